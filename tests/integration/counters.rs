//! The metrics file's counters, carried from one run's file to the next: runs by outcome, lost
//! leases, renewals and their failures, histograms of the time waited and held; and the file as
//! `promtool check metrics` (Prometheus's own linter) reads it.

use std::process::Command;

use crate::common::*;

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} missing:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn counters_carry_across_runs_and_promtool_accepts_the_file() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("job.prom");
    let file = prom.to_str().unwrap();
    let run = || {
        Redlock::run(&redis)
            .key("job")
            .args(["--metrics-file", file])
    };
    run().ttl("300ms").sh("sleep 0.5").status(0).output();
    run().sh("exit 3").status(3).output();
    let (holder, _) = Redlock::run(&redis).key("job").hold(&dir, "h");
    run().sh("true").status(75).output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    // A lost lease: the key deleted under the running command.
    let lost = run().ttl("600ms").sh(&hold_script(&dir, "l")).spawn();
    wait_for_file(&dir.join("l.ready"));
    redis.del(&lock_key("job"));
    lost.finish().assert_code(76);

    let text = read(&prom);
    let k = r#"{key="job""#;
    for (outcome, n) in [
        ("success", 1.0),
        ("failed", 1.0),
        ("busy", 1.0),
        ("lock_lost", 1.0),
        ("skipped", 0.0),
    ] {
        assert_eq!(
            value(
                &text,
                &format!(r#"redlock_runs_total{k},outcome="{outcome}"}}"#)
            ),
            n,
            "{outcome}"
        );
    }
    assert_eq!(
        value(&text, &format!("redlock_lost_leases_total{k}}}")),
        1.0
    );
    assert!(
        value(&text, &format!("redlock_renewals_total{k}}}")) >= 1.0,
        "{text}"
    );
    // Waited: every run; held: the three that took the lock.
    assert_eq!(
        value(&text, &format!("redlock_lock_wait_seconds_count{k}}}")),
        4.0
    );
    assert_eq!(
        value(&text, &format!("redlock_lock_held_seconds_count{k}}}")),
        3.0
    );
    assert_eq!(
        value(
            &text,
            &format!(r#"redlock_lock_held_seconds_bucket{k},le="+Inf"}}"#)
        ),
        3.0
    );
    assert!(
        value(&text, &format!("redlock_lock_held_seconds_sum{k}}}")) >= 0.5,
        "{text}"
    );
    // The last run's gauges are as before.
    assert_eq!(value(&text, &format!("redlock_exit_status{k}}}")), 76.0);

    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&prom).unwrap())
        .output()
        .expect("promtool (scripts/test.sh installs Debian's prometheus package)");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {:?}\n{}{}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
