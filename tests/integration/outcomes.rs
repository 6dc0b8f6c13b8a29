//! The record of runs tells what happened: one run, one outcome. A run that waited and then
//! ran is not busy; a vanished run is counted as soon as anyone sees it; a run that a
//! forwarded TERM cut short is not a success; with several holders a failure that ends after
//! the last success is seen by `check` and `history`.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::*;

/// `status`'s line starting with `part`, trimmed.
fn status_line(redis: &RedisServer, key: &str, part: &str) -> String {
    let out = Redlock::admin("status", redis)
        .key(key)
        .status(0)
        .any_stdout()
        .output();
    out.stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(part))
        .unwrap_or_else(|| panic!("no {part} line in {}", out.stdout))
        .to_owned()
}

/// A job that says it is ready, waits for `<tag>.go`, then runs `then`.
fn job(dir: &TempDir, tag: &str, then: &str) -> String {
    format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.02; done; {then}",
        dir.sh(&format!("{tag}.ready")),
        dir.sh(&format!("{tag}.go"))
    )
}

#[test]
fn a_failure_under_limit_that_ends_after_the_last_success_is_not_hidden() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let slot = || Redlock::run(&redis).key("f").args(["--limit", "2"]);
    // A long run that fails, and more quick successes beside it than the record keeps.
    let long = slot().sh(&job(&dir, "long", "exit 5")).spawn();
    wait_for_file(&dir.join("long.ready"));
    for _ in 0..21 {
        slot().sh("true").status(0).output();
    }
    touch(&dir.join("long.go"));
    long.finish().assert_code(5);
    Redlock::admin("check", &redis)
        .key("f")
        .args(["--max-age", "1h"])
        .status(1)
        .stdout_contains("WARNING: ")
        .stdout_contains("exit 5")
        .output();
    let out = Redlock::admin("history", &redis)
        .key("f")
        .status(0)
        .any_stdout()
        .output();
    assert!(out.stdout.contains("failed (exit 5)"), "{}", out.stdout);
    // The 20 newest, and the failure that ended last.
    assert_eq!(out.stdout.lines().count(), 21, "{}", out.stdout);
}

#[test]
fn a_vanished_run_is_counted_when_a_reader_first_sees_it() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Redlock::run(&redis)
        .key("v")
        .ttl("1s")
        .sh(&job(&dir, "h", "true"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    holder.signal(Signal::SIGKILL);
    wait_until(Duration::from_secs(5), "the lease to end", || {
        redis.get(&lock_key("v")).is_none()
    });
    // No acquire since: status, and then check, count it all the same.
    assert_eq!(
        status_line(&redis, "v", "counts:"),
        "counts:   0 busy, 0 skipped, 1 lost; runs ended: 1 vanished"
    );
    Redlock::admin("check", &redis)
        .key("v")
        .args(["--max-age", "1h", "--json"])
        .status(2)
        .stdout_contains(r#""outcome":"vanished""#)
        .stdout_contains(r#""vanished":1"#)
        .output();
    // Counted once, however often it is read.
    assert_eq!(
        status_line(&redis, "v", "counts:"),
        "counts:   0 busy, 0 skipped, 1 lost; runs ended: 1 vanished"
    );
}

#[test]
fn a_run_that_waited_and_then_ran_is_not_busy() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("w").hold(&dir, "h");
    let waiter = Redlock::run(&redis).key("w").wait("10s").sh("true").spawn();
    wait_until(Duration::from_secs(5), "the waiter to wait", || {
        status_line(&redis, "w", "waiters:") != "waiters:  none"
    });
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    assert_eq!(
        status_line(&redis, "w", "counts:"),
        "counts:   0 busy, 0 skipped, 0 lost; runs ended: 2 success"
    );
    // Waiters that find the run done within --min-interval are skipped, not busy as well.
    let (holder, _) = Redlock::run(&redis)
        .key("m")
        .args(["--min-interval", "1m"])
        .hold(&dir, "m");
    let waiters: Vec<Proc> = (0..4)
        .map(|_| {
            Redlock::run(&redis)
                .key("m")
                .args(["--min-interval", "1m", "--wait", "10s"])
                .sh("true")
                .spawn()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    touch(&dir.join("m.go"));
    holder.finish().assert_code(0);
    for waiter in waiters {
        waiter.finish().assert_code(75);
    }
    assert_eq!(
        status_line(&redis, "m", "counts:"),
        "counts:   0 busy, 4 skipped, 0 lost; runs ended: 1 success"
    );
}

#[test]
fn a_run_cut_short_by_a_forwarded_term_is_not_a_success() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // The job traps TERM and exits 0, as a pod's job asked to stop often does.
    let metrics = dir.join("t.prom");
    let run = Redlock::run(&redis)
        .key("t")
        .arg("--metrics-file")
        .arg(&metrics)
        .sh(&format!(
            "trap 'exit 0' TERM; touch {}; while :; do sleep 0.02; done",
            dir.sh("t.ready")
        ))
        .spawn();
    wait_for_file(&dir.join("t.ready"));
    run.signal(Signal::SIGTERM);
    run.finish().assert_code(0);
    let out = Redlock::admin("history", &redis)
        .key("t")
        .arg("--json")
        .status(0)
        .any_stdout()
        .output();
    assert!(
        out.stdout
            .contains(r#""outcome":"cut_short","exit_status":0"#),
        "{}",
        out.stdout
    );
    Redlock::admin("check", &redis)
        .key("t")
        .args(["--max-age", "1h"])
        .status(2)
        .stdout_contains("CRITICAL: ")
        .output();
    // The host's metrics file says the same: cut short, and no success.
    let text = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        text.contains(r#"redlock_runs_total{key="t",outcome="cut_short"} 1"#)
            && text.contains(r#"redlock_runs_total{key="t",outcome="success"} 0"#)
            && !text.contains("redlock_last_success_timestamp_seconds{"),
        "{text}"
    );
}

#[test]
fn status_json_names_the_min_interval_record_as_such() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("j").sh("true").status(0).output();
    let out = Redlock::admin("status", &redis)
        .key("j")
        .arg("--json")
        .status(0)
        .any_stdout()
        .output();
    assert!(
        out.stdout.contains(r#""min_interval_success_ms_ago":null"#)
            && !out.stdout.contains("last_success_ms_ago"),
        "{}",
        out.stdout
    );
}

/// A run whose holder was frozen past its lease (SIGSTOP of redlock: the watchdog stops the
/// command at the lease's end) held the lock to that end, not to when redlock woke and found
/// it lost: `history` never shows it overlapping the run that took the lock after it. The
/// same for a lock taken with `--limit` (its places renew and end by their own scripts).
#[test]
fn a_run_frozen_past_its_lease_held_the_lock_no_longer_than_the_lease() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for (key, args) in [("frozen", &[][..]), ("frozen-sem", &["--limit", "1"][..])] {
        let ready = format!("{key}.ready");
        let holder = Redlock::run(&redis)
            .key(key)
            .ttl("2s")
            .args(args)
            .sh(&format!("touch {}; sleep 30", dir.sh(&ready)))
            .spawn();
        wait_for_file(&dir.join(&ready));
        holder.signal(Signal::SIGSTOP);
        // Well past the 2 s lease: the next run takes the lock while the holder is frozen.
        std::thread::sleep(Duration::from_millis(2500));
        Redlock::run(&redis).key(key).args(args).sh("true").output();
        std::thread::sleep(Duration::from_millis(1000));
        holder.signal(Signal::SIGCONT);
        holder.finish().assert_code(76);
        let out = Redlock::admin("history", &redis)
            .key(key)
            .arg("--json")
            .status(0)
            .any_stdout()
            .output();
        let field = |run: &str, name: &str| -> u64 {
            run.split(&format!("\"{name}\":"))
                .nth(1)
                .and_then(|r| r.split([',', '}']).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {run}"))
        };
        let runs: Vec<&str> = out.stdout.split("},{").collect();
        assert_eq!(runs.len(), 2, "{}", out.stdout);
        let (after, lost) = (runs[0], runs[1]);
        assert!(lost.contains("\"outcome\":\"lock_lost\""), "{}", out.stdout);
        let held = field(lost, "duration_ms");
        assert!(
            held <= 2100,
            "{key}: held {held} ms on a 2 s lease: {}",
            out.stdout
        );
        assert!(
            field(lost, "started_ms") + held <= field(after, "started_ms"),
            "{key}: the lost run overlaps the next: {}",
            out.stdout
        );
    }
}
