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

    promtool_accepts(&prom);
}

/// `promtool check metrics` (Prometheus's linter) finds nothing to say about the file.
#[track_caller]
fn promtool_accepts(prom: &std::path::Path) {
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(prom).unwrap())
        .output()
        .expect("promtool (scripts/test.sh installs Debian's prometheus package)");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {:?}\n{}{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        read(prom)
    );
}

/// The sum of `redlock_runs_total` over its outcomes for lock `key`.
fn runs(text: &str, key: &str) -> f64 {
    let head = format!("redlock_runs_total{{key=\"{key}\",");
    text.lines()
        .filter_map(|l| l.strip_prefix(&head)?.split_once("} "))
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

#[test]
fn runs_ending_together_lose_no_count() {
    // 20 runs at once of one lock, one file: one or a few take the lock, the rest are busy,
    // and all of them end (and write the file) at about the same time.
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("job.prom");
    let file = prom.to_str().unwrap();
    let procs: Vec<Proc> = (0..20)
        .map(|_| {
            Redlock::run(&redis)
                .key("job")
                .args(["--metrics-file", file])
                .sh("sleep 0.3")
                .spawn()
        })
        .collect();
    let codes: Vec<i32> = procs
        .into_iter()
        .map(|p| p.finish_within(PATIENCE).code())
        .collect();
    let count = |c: i32| codes.iter().filter(|&&x| x == c).count() as f64;
    assert_eq!(count(0) + count(75), 20.0, "{codes:?}");
    assert!(
        count(0) >= 1.0 && count(75) >= 1.0,
        "not a busy mix: {codes:?}"
    );
    let text = read(&prom);
    assert_eq!(runs(&text, "job"), 20.0, "{text}");
    let k = r#"{key="job""#;
    let success = format!(r#"redlock_runs_total{k},outcome="success"}}"#);
    let busy = format!(r#"redlock_runs_total{k},outcome="busy"}}"#);
    assert_eq!(value(&text, &success), count(0), "{text}");
    assert_eq!(value(&text, &busy), count(75), "{text}");
    let waited = format!("redlock_lock_wait_seconds_count{k}}}");
    assert_eq!(value(&text, &waited), 20.0, "{text}");
    assert!(dir.join(".job.prom.lock").is_file());
    promtool_accepts(&prom);
}

#[test]
fn a_nested_run_of_another_lock_keeps_the_outer_counts() {
    // REDLOCK_METRICS_FILE is inherited by the command, so the inner run writes the same file.
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("n.prom");
    let outer = || {
        Redlock::run(&redis)
            .key("outer")
            .env("REDLOCK_METRICS_FILE", &prom)
    };
    for _ in 0..3 {
        outer().sh("true").status(0).output();
    }
    let url = redis.url();
    outer()
        .command([
            BIN, "run", "--url", &url, "--key", "inner", "--", "sh", "-c", "exit 3",
        ])
        .status(3)
        .any_stderr()
        .output();
    let text = read(&prom);
    let series = |name: &str, key: &str, labels: &str| {
        value(&text, &format!(r#"{name}{{key="{key}"{labels}}}"#))
    };
    let (success, failed) = (r#",outcome="success""#, r#",outcome="failed""#);
    // The outer run ended last: its three successes and the failed fourth are all there...
    assert_eq!(
        series("redlock_runs_total", "outer", success),
        3.0,
        "{text}"
    );
    assert_eq!(series("redlock_runs_total", "outer", failed), 1.0, "{text}");
    assert_eq!(series("redlock_exit_status", "outer", ""), 3.0, "{text}");
    assert!(series(LAST_SUCCESS, "outer", "") > 0.0, "{text}");
    // ...and so is the inner run, carried over as it wrote it.
    assert_eq!(series("redlock_runs_total", "inner", failed), 1.0, "{text}");
    assert_eq!(runs(&text, "inner"), 1.0, "{text}");
    assert_eq!(series("redlock_exit_status", "inner", ""), 3.0, "{text}");
    assert!(!text.contains(r#"redlock_last_success_timestamp_seconds{key="inner"}"#));
    // The next outer run starts from its own counts, not from 0.
    outer().sh("true").status(0).output();
    let text = read(&prom);
    let success = r#"redlock_runs_total{key="outer",outcome="success"}"#;
    assert_eq!(value(&text, success), 4.0, "{text}");
    assert_eq!(runs(&text, "inner"), 1.0, "{text}");
    promtool_accepts(&prom);
}

const LAST_SUCCESS: &str = "redlock_last_success_timestamp_seconds";

#[test]
fn two_locks_alternating_on_one_file_keep_their_own_series() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("shared.prom");
    let file = prom.to_str().unwrap();
    let run = |key: &str| Redlock::run(&redis).key(key).args(["--metrics-file", file]);
    for _ in 0..3 {
        run("a").sh("true").status(0).output();
        run("b").sh("exit 3").status(3).output();
    }
    run("a").sh("true").status(0).output();
    let text = read(&prom);
    let k = |key: &str, rest: &str| format!(r#"{{key="{key}"{rest}}}"#);
    let runs_of = |key: &str, outcome: &str| {
        value(
            &text,
            &format!(
                "redlock_runs_total{}",
                k(key, &format!(r#",outcome="{outcome}""#))
            ),
        )
    };
    assert_eq!(runs_of("a", "success"), 4.0, "{text}");
    assert_eq!(runs_of("b", "failed"), 3.0, "{text}");
    assert_eq!((runs(&text, "a"), runs(&text, "b")), (4.0, 3.0), "{text}");
    assert_eq!(
        value(&text, &format!("redlock_exit_status{}", k("b", ""))),
        3.0
    );
    assert_eq!(
        value(&text, &format!("redlock_exit_status{}", k("a", ""))),
        0.0
    );
    assert_eq!(
        value(
            &text,
            &format!("redlock_lock_held_seconds_count{}", k("b", ""))
        ),
        3.0
    );
    assert!(value(&text, &format!("{LAST_SUCCESS}{}", k("a", ""))) > 0.0);
    assert!(
        !text.contains(&format!("{LAST_SUCCESS}{}", k("b", ""))),
        "{text}"
    );
    // One HELP and TYPE per family, whatever the number of locks.
    assert_eq!(
        text.matches("# TYPE redlock_runs_total counter").count(),
        1,
        "{text}"
    );
    promtool_accepts(&prom);
}

#[test]
fn a_lock_file_held_by_something_else_delays_the_write_two_seconds_not_more() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("job.prom");
    let lock = dir.join(".job.prom.lock");
    // flock(1) holds the lock until the test closes cat's stdin.
    let mut holder = Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .arg("cat")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("flock (util-linux)");
    wait_until(PATIENCE, "flock to hold the lock file", || {
        Command::new("flock")
            .args(["-n"])
            .arg(&lock)
            .arg("true")
            .status()
            .is_ok_and(|s| s.code() == Some(1))
    });
    let out = Redlock::run(&redis)
        .key("job")
        .args(["--metrics-file", prom.to_str().unwrap()])
        .sh("true")
        .status(0)
        .stderr_contains("still locked by another run after 2 s; writing without it")
        .output();
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    assert!(
        out.elapsed >= std::time::Duration::from_millis(1900),
        "{:?}",
        out.elapsed
    );
    // The 2 s and a run's own time, well short of a hang.
    assert!(
        out.elapsed < std::time::Duration::from_secs(8),
        "{:?}",
        out.elapsed
    );
    let text = read(&prom);
    assert_eq!(runs(&text, "job"), 1.0, "{text}");
}

#[test]
fn a_fifo_at_the_lock_files_name_is_a_warning_not_a_hang() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("job.prom");
    let lock = dir.join(".job.prom.lock");
    assert!(
        Command::new("mkfifo")
            .arg(&lock)
            .status()
            .unwrap()
            .success()
    );
    let out = Redlock::run(&redis)
        .key("job")
        .args(["--metrics-file", prom.to_str().unwrap()])
        .sh("true")
        .status(0)
        .stderr_contains(".job.prom.lock: not a regular file; writing without it")
        .output();
    assert!(
        out.elapsed < std::time::Duration::from_secs(5),
        "{:?}",
        out.elapsed
    );
    assert_eq!(runs(&read(&prom), "job"), 1.0);
}
