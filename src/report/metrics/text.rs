//! The metrics file's text: this run's series for its lock, the counters carried over from the
//! previous file, and every other lock's series in that file carried over as they were (one file
//! may hold several locks' series, told apart by their `key` label).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Stats;
use crate::exit::{CUT_SHORT, Outcome};

pub(super) fn seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A label value as the exposition format wants it.
pub(super) fn escape(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

pub(super) const LAST_SUCCESS: &str = "redlock_last_success_timestamp_seconds";

/// The last-success time recorded for `key` in a previous file.
pub(super) fn last_success_in(text: &str, key: &str) -> Option<f64> {
    let head = format!("{LAST_SUCCESS}{{key=\"{}\"}} ", escape(key));
    text.lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite())
}

/// The buckets (seconds) of the histogram of the time waited for the lock: from an uncontended
/// acquire (milliseconds) to an hour's `--wait`.
const WAIT_BUCKETS: &[f64] = &[
    0.005, 0.05, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
];
/// The buckets (seconds) of the histogram of the time the lock was held: a job's run time.
const HELD_BUCKETS: &[f64] = &[
    1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
];

/// Every outcome label, so that each `redlock_runs_total` series exists from the first file
/// on (a counter that appears only when it first counts hides its first increase from
/// `rate()`).
const OUTCOMES: &[Outcome] = &[
    Outcome::Exited(0),
    Outcome::Exited(1),
    Outcome::Busy,
    Outcome::Skipped,
    Outcome::Interrupted(0),
    Outcome::NotRun { found: true },
    Outcome::LockLost,
    Outcome::MaxRuntime,
    Outcome::Unavailable,
    Outcome::Usage,
    Outcome::Internal,
];

/// The file's text, the metrics written one by one: this lock's samples, its counters carried
/// over from `previous`, and after them, in each family, the other locks' samples there.
struct Text<'a> {
    out: String,
    key: String,
    previous: &'a str,
}

impl Text<'_> {
    /// One family: its HELP and TYPE, this lock's samples (written by `samples`), then every
    /// other lock's samples of it in the previous file, as they were. A family left without
    /// any sample is left out.
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: impl FnOnce(&mut Self)) {
        let start = self.out.len();
        self.out
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        let head = self.out.len();
        samples(self);
        let suffixes: &[&str] = if kind == "histogram" {
            &["_bucket", "_sum", "_count"]
        } else {
            &[""]
        };
        for suffix in suffixes {
            let metric = format!("{name}{suffix}");
            let others: Vec<&str> = self
                .previous
                .lines()
                .filter(|l| self.another_lock(l, &metric))
                .collect();
            for line in others {
                self.out.push_str(line);
                self.out.push('\n');
            }
        }
        if self.out.len() == head {
            self.out.truncate(start);
        }
    }

    /// Whether `line` is a sample of `metric` for a lock other than this one.
    fn another_lock(&self, line: &str, metric: &str) -> bool {
        let Some(labels) = line
            .strip_prefix(metric)
            .and_then(|l| l.strip_prefix("{key=\""))
        else {
            return false;
        };
        let ours = labels
            .strip_prefix(self.key.as_str())
            .is_some_and(|l| l.starts_with("\",") || l.starts_with("\"}"));
        !ours && labels.contains("} ")
    }

    /// One sample: `name{key="K"<labels>} value`.
    fn sample(&mut self, name: &str, labels: &str, value: &str) {
        let key = &self.key;
        self.out
            .push_str(&format!("{name}{{key=\"{key}\"{labels}}} {value}\n"));
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &str, value: Option<String>) {
        self.family(name, "gauge", help, |text| {
            if let Some(value) = value {
                text.sample(name, labels, &value);
            }
        });
    }

    /// What the previous file said of the series `name{key="K"<labels>}` (0 when nothing).
    fn before(&self, name: &str, labels: &str) -> f64 {
        let head = format!("{name}{{key=\"{}\"{labels}}} ", self.key);
        self.previous
            .lines()
            .find_map(|l| l.strip_prefix(&head))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .unwrap_or(0.0)
    }

    /// A counter's series: the previous file's value plus `by`.
    fn count(&mut self, name: &str, labels: &str, by: f64) {
        let value = self.before(name, labels) + by;
        self.sample(name, labels, &number(value));
    }

    /// A histogram carried over, with `observed` (seconds) added when this run observed one.
    fn histogram(&mut self, name: &str, help: &str, buckets: &[f64], observed: Option<f64>) {
        self.family(name, "histogram", help, |text| {
            let bucket = format!("{name}_bucket");
            for le in buckets
                .iter()
                .map(|b| b.to_string())
                .chain(["+Inf".to_owned()])
            {
                let within =
                    observed.is_some_and(|o| le == "+Inf" || o <= le.parse().unwrap_or(0.0));
                let labels = format!(",le=\"{le}\"");
                text.count(&bucket, &labels, f64::from(u8::from(within)));
            }
            text.count(&format!("{name}_sum"), "", observed.unwrap_or(0.0));
            let counted = f64::from(u8::from(observed.is_some()));
            text.count(&format!("{name}_count"), "", counted);
        });
    }
}

/// A sample's value: whole numbers without a fraction, the rest to the millisecond.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

pub(super) fn render(
    key: &str,
    code: i32,
    outcome: Outcome,
    stats: &Stats,
    now: f64,
    last_success: Option<f64>,
    previous: &str,
) -> String {
    let mut text = Text {
        out: String::new(),
        key: escape(key),
        previous,
    };
    text.gauge(
        "redlock_last_run_timestamp_seconds",
        "When redlock last finished a run of this lock (unix seconds).",
        "",
        Some(format!("{now:.3}")),
    );
    // Absent for this lock until its first success; another lock's is carried over all the same.
    text.gauge(
        LAST_SUCCESS,
        "When a run of this lock last succeeded, here or (seen by a --min-interval skip) elsewhere.",
        "",
        last_success.map(|t| format!("{t:.3}")),
    );
    text.gauge(
        "redlock_exit_status",
        "redlock's exit status for the last run.",
        "",
        Some(code.to_string()),
    );
    text.gauge(
        "redlock_outcome",
        "How the last run ended (1 for the outcome label that applies).",
        &format!(",outcome=\"{}\"", stats.label(outcome)),
        Some("1".into()),
    );
    let secs = |d: Option<Duration>| format!("{:.3}", d.unwrap_or_default().as_secs_f64());
    text.gauge(
        "redlock_wait_seconds",
        "Time spent taking (or waiting for) the lock in the last run.",
        "",
        Some(secs(stats.waited)),
    );
    text.gauge(
        "redlock_held_seconds",
        "Time the lock was held in the last run.",
        "",
        Some(secs(stats.held)),
    );
    text.gauge(
        "redlock_renewals",
        "Successful lease renewals in the last run.",
        "",
        Some(stats.renewals.to_string()),
    );
    text.gauge(
        "redlock_renewal_failures",
        "Failed lease renewal attempts in the last run.",
        "",
        Some(stats.renewal_failures.to_string()),
    );
    counters(&mut text, outcome, stats);
    text.out
}

/// The counters and histograms, carried over from the previous file: every run that wrote it.
fn counters(text: &mut Text, outcome: Outcome, stats: &Stats) {
    text.family(
        "redlock_runs_total",
        "counter",
        "Runs of this lock that wrote this file, by how they ended.",
        |text| {
            let labels = OUTCOMES.iter().map(|o| o.label()).chain([CUT_SHORT]);
            for label in labels {
                let this = f64::from(u8::from(label == stats.label(outcome)));
                text.count("redlock_runs_total", &format!(",outcome=\"{label}\""), this);
            }
        },
    );
    let counters = [
        (
            "redlock_renewals_total",
            "Successful lease renewals, over the runs that wrote this file.",
            stats.renewals as f64,
        ),
        (
            "redlock_renewal_failures_total",
            "Failed lease renewal attempts, over the runs that wrote this file.",
            stats.renewal_failures as f64,
        ),
        (
            "redlock_lost_leases_total",
            "Runs that lost their lock while the command ran (exit 76).",
            f64::from(u8::from(outcome == Outcome::LockLost)),
        ),
    ];
    for (name, help, by) in counters {
        text.family(name, "counter", help, |text| text.count(name, "", by));
    }
    text.histogram(
        "redlock_lock_wait_seconds",
        "Time spent taking (or waiting for) the lock, over the runs that wrote this file.",
        WAIT_BUCKETS,
        stats.waited.map(|d| d.as_secs_f64()),
    );
    text.histogram(
        "redlock_lock_held_seconds",
        "Time the lock was held, over the runs that wrote this file.",
        HELD_BUCKETS,
        stats.held.map(|d| d.as_secs_f64()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_last_success_read_back() {
        let stats = Stats::default();
        let key = "a\"b\\c\nd";
        let text = render(key, 0, Outcome::Exited(0), &stats, 10.0, Some(7.5), "");
        assert!(
            text.contains(r#"redlock_exit_status{key="a\"b\\c\nd"} 0"#),
            "{text}"
        );
        assert!(text.contains(r#",outcome="success"} 1"#), "{text}");
        assert_eq!(last_success_in(&text, key), Some(7.5));
        assert_eq!(last_success_in(&text, "other"), None);
        assert!(!render("k", 1, Outcome::Exited(1), &stats, 1.0, None, "").contains(LAST_SUCCESS));
    }

    #[test]
    fn counters_and_histograms_carry_over() {
        let held = Stats {
            waited: Some(Duration::from_millis(20)),
            held: Some(Duration::from_secs(90)),
            renewals: 3,
            ..Stats::default()
        };
        let first = render("k", 0, Outcome::Exited(0), &held, 1.0, None, "");
        let second = render("k", 76, Outcome::LockLost, &held, 2.0, None, &first);
        let third = render(
            "k",
            75,
            Outcome::Busy,
            &Stats::default(),
            3.0,
            None,
            &second,
        );
        for line in [
            r#"redlock_runs_total{key="k",outcome="success"} 1"#,
            r#"redlock_runs_total{key="k",outcome="lock_lost"} 1"#,
            r#"redlock_runs_total{key="k",outcome="busy"} 1"#,
            r#"redlock_runs_total{key="k",outcome="failed"} 0"#,
            r#"redlock_renewals_total{key="k"} 6"#,
            r#"redlock_lost_leases_total{key="k"} 1"#,
            r#"redlock_lock_held_seconds_bucket{key="k",le="60"} 0"#,
            r#"redlock_lock_held_seconds_bucket{key="k",le="300"} 2"#,
            r#"redlock_lock_held_seconds_bucket{key="k",le="+Inf"} 2"#,
            r#"redlock_lock_held_seconds_sum{key="k"} 180"#,
            r#"redlock_lock_held_seconds_count{key="k"} 2"#,
            r#"redlock_lock_wait_seconds_bucket{key="k",le="0.05"} 2"#,
        ] {
            assert!(third.lines().any(|l| l == line), "{line} missing:\n{third}");
        }
        // Another lock starts from 0, and this lock's series are carried over as they were.
        let other = render("other", 0, Outcome::Exited(0), &held, 4.0, None, &third);
        assert!(
            other.contains(r#"redlock_renewals_total{key="other"} 3"#),
            "{other}"
        );
        for line in third.lines().filter(|l| !l.starts_with('#')) {
            assert!(other.lines().any(|l| l == line), "{line} lost:\n{other}");
        }
        assert_eq!(other.matches("# TYPE redlock_runs_total ").count(), 1);
        assert_eq!(last_success_in(&other, "k"), None);
        let back = render("k", 1, Outcome::Exited(1), &held, 5.0, None, &other);
        assert!(back.contains(r#"redlock_runs_total{key="k",outcome="failed"} 1"#));
        assert!(back.contains(r#"redlock_runs_total{key="k",outcome="success"} 1"#));
        assert!(back.contains(r#"redlock_runs_total{key="other",outcome="success"} 1"#));
    }

    #[test]
    fn a_key_that_is_a_prefix_of_another_is_told_apart() {
        let stats = Stats::default();
        let long = render("ab", 0, Outcome::Exited(0), &stats, 1.0, Some(1.0), "");
        let long = render("a\"b", 0, Outcome::Exited(0), &stats, 1.0, Some(1.0), &long);
        let short = render("a", 1, Outcome::Exited(1), &stats, 2.0, None, &long);
        for key in [r#"ab"#, r#"a\"b"#] {
            let line = format!(r#"redlock_runs_total{{key="{key}",outcome="success"}} 1"#);
            assert!(short.lines().any(|l| l == line), "{line}:\n{short}");
        }
        assert!(short.contains(r#"redlock_runs_total{key="a",outcome="success"} 0"#));
        assert!(!short.contains(r#"redlock_last_success_timestamp_seconds{key="a"}"#));
        // Lines that are no sample of a known family are not carried over.
        let junk = render(
            "a",
            0,
            Outcome::Exited(0),
            &stats,
            3.0,
            None,
            "x{key=\"b\"} 1\n",
        );
        assert!(!junk.contains("x{"), "{junk}");
    }
}
