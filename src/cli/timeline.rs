//! The numbers behind docs/img/timeline.svg, the picture of a run's lease: the default `--ttl`
//! and `--kill-after` as the command line has them, put through the functions a run uses
//! (`lease::timing`, the run's lease grace). `examples/timeline-numbers.rs` prints them and
//! `scripts/timeline.py` draws them (see [`REGENERATE`]); a docs test fails when the committed
//! picture is not what they draw.

use std::time::Duration;

use crate::cli::{DEFAULT_KILL_AFTER, command, parse_ttl};
use crate::lease::timing::RELEASE_BUDGET;
use crate::lease::timing::{drift, kill_margin, renew_interval, renew_timeout, retry_interval};
use crate::run::lease_grace;

/// The command that redraws the picture (with the man page and completions): it runs
/// `cargo run --example timeline-numbers | python3 scripts/timeline.py > docs/img/timeline.svg`.
pub const REGENERATE: &str = "scripts/gen-docs.sh";

/// `--ttl`'s default, as `redlock run --help` shows it.
pub fn default_ttl() -> Duration {
    let cmd = command();
    let run = cmd.find_subcommand("run").expect("a run subcommand");
    let ttl = run
        .get_arguments()
        .find(|arg| arg.get_long() == Some("ttl"))
        .expect("a --ttl option");
    let text = ttl
        .get_default_values()
        .first()
        .expect("--ttl has a default")
        .to_string_lossy()
        .into_owned();
    parse_ttl(&text).expect("--ttl's default parses")
}

/// How long after the request that last counted the stop line comes: no renewal counting by
/// then, the command is sent the stop signal (as the run's core has it: the lease ends ttl less
/// the drift allowance after that request, the kill line is a margin before that, the stop line
/// a grace before the kill line).
pub fn stop_line(ttl: Duration, kill_after: Duration) -> Duration {
    ttl.saturating_sub(drift(ttl))
        .saturating_sub(kill_margin(ttl))
        .saturating_sub(lease_grace(ttl, kill_after))
}

/// The longest Redis outage that can never stop a run (docs/faq.md quotes it): one that starts
/// just before a renewal is due leaves the stop line that much later.
pub fn outage_ridden_out(ttl: Duration, kill_after: Duration) -> Duration {
    stop_line(ttl, kill_after).saturating_sub(renew_interval(ttl))
}

/// One line per number, tab-separated: its name, milliseconds (three decimals), what it is.
/// Every moment counts from when the request that took (or last renewed) the lease was sent.
pub fn numbers() -> String {
    let ttl = default_ttl();
    let kill_after = DEFAULT_KILL_AFTER;
    // As the run's core has them (see `stop_line`).
    let lease_end = ttl.saturating_sub(drift(ttl));
    let kill_line = lease_end - kill_margin(ttl);
    let grace = lease_grace(ttl, kill_after);
    let stop_line = stop_line(ttl, kill_after);
    let rows: [(&str, Duration, &str); 12] = [
        ("ttl", ttl, "--ttl's default"),
        ("kill_after", kill_after, "--kill-after's default"),
        (
            "renew_interval",
            renew_interval(ttl),
            "a renewal is due this long after the last one that counted was sent",
        ),
        (
            "renew_timeout",
            renew_timeout(ttl),
            "the time limit of one renewal",
        ),
        (
            "retry_interval",
            retry_interval(ttl),
            "the wait before retrying a renewal that failed",
        ),
        ("drift", drift(ttl), "the allowance for clock drift"),
        (
            "kill_margin",
            kill_margin(ttl),
            "how long before the lease's end the group must be dead",
        ),
        (
            "lease_grace",
            grace,
            "the grace after the loss of the lease",
        ),
        (
            "lease_end",
            lease_end,
            "the lease's end by redlock's clock, after the request that counted",
        ),
        (
            "kill_line",
            kill_line,
            "the kill line: SIGKILL to the whole group, by redlock or its watchdog",
        ),
        (
            "stop_line",
            stop_line,
            "the stop line: a lease not renewed by then is given up, the stop signal sent",
        ),
        (
            "release_budget",
            RELEASE_BUDGET,
            "the most time spent releasing",
        ),
    ];
    rows.iter()
        .map(|(name, value, meaning)| {
            format!("{name}\t{:.3}\t{meaning}\n", value.as_secs_f64() * 1000.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_come_in_order_before_the_lease_ends() {
        let text = numbers();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|line| {
                    let mut cells = line.split('\t');
                    (cells.next() == Some(name)).then(|| cells.next().unwrap().parse().unwrap())
                })
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert!(value("renew_interval") < value("stop_line"));
        assert!(value("stop_line") < value("kill_line"));
        assert!(value("kill_line") < value("lease_end"));
        assert!(value("lease_end") < value("ttl"));
        assert_eq!(
            value("kill_line") - value("stop_line"),
            value("lease_grace")
        );
    }
}
