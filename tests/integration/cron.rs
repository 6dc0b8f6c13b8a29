//! `--min-interval`: the same crontab on many hosts runs the job once per window. A success is
//! recorded in Redis by the release; later runs (and waiters that waited for it) skip.

use crate::common::*;

fn done_key(name: &str) -> String {
    format!("{}:done", lock_key(name))
}

#[test]
fn a_success_skips_later_runs_within_the_interval() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let cron = || Redlock::run(&redis).key("cron");
    cron()
        .args(["--min-interval", "50m"])
        .sh("true")
        .status(0)
        .output();
    let pttl = redis.pttl(&done_key("cron"));
    assert!(pttl > 0 && pttl <= 50 * 60_000, "done record PTTL {pttl}");

    cron()
        .args(["--min-interval", "50m", "-v"])
        .sh(&marker_script(&dir))
        .status(75)
        .stderr_prefixed()
        .stderr_contains("--min-interval")
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    assert_eq!(
        redis.get(&lock_key("cron")),
        None,
        "a skipped run took the lock"
    );

    // --conflict-exit-code and the environment variable apply as well.
    cron()
        .args(["--conflict-exit-code", "0"])
        .env("REDLOCK_MIN_INTERVAL", "1h")
        .sh(&marker_script(&dir))
        .status(0)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");

    // Without --min-interval the record is ignored, and a shorter window has passed (both
    // records of the last success made old: the :done key and the record of runs').
    cron().sh(&marker_script(&dir)).status(0).output();
    assert!(dir.join("marker").exists());
    std::fs::remove_file(dir.join("marker")).unwrap();
    redis::cmd("SET")
        .arg(done_key("cron"))
        .arg(0)
        .exec(&mut redis.conn())
        .unwrap();
    make_last_success_old(&redis, "cron");
    cron()
        .args(["--min-interval", "50m"])
        .sh(&marker_script(&dir))
        .status(0)
        .output();
    assert!(
        dir.join("marker").exists(),
        "an old record still skipped the run"
    );

    Redlock::admin("status", &redis)
        .key("cron")
        .stdout_contains("last success")
        .output();
}

/// The record of runs' last success of `name` moved to the epoch, as if it were long ago.
fn make_last_success_old(redis: &RedisServer, name: &str) {
    let counts = format!("{}:counts", lock_key(name));
    let last: String = redis::cmd("HGET")
        .arg(&counts)
        .arg("last_success")
        .query(&mut redis.conn())
        .unwrap();
    let ended = last
        .split("\"ended\":\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let old = last.replace(&format!("\"ended\":\"{ended}\""), "\"ended\":\"1\"");
    redis::cmd("HSET")
        .arg(&counts)
        .arg("last_success")
        .arg(old)
        .exec(&mut redis.conn())
        .unwrap();
}

#[test]
fn a_success_without_the_flag_counts_for_a_later_run_with_it() {
    // A manual run, or a host not yet given --min-interval, succeeded: a scheduled run with
    // --min-interval skips, as its help says ("a run of this lock succeeded this recently").
    let redis = RedisServer::start();
    let dir = TempDir::new();
    Redlock::run(&redis).key("once").sh("true").output();
    Redlock::run(&redis)
        .key("once")
        .args(["--min-interval", "1h"])
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    // A failure or a cut-short run after it changes nothing: the last success still counts.
    Redlock::run(&redis)
        .key("once")
        .sh("exit 3")
        .status(3)
        .output();
    Redlock::run(&redis)
        .key("once")
        .args(["--min-interval", "1h"])
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    // Once that success is older than the interval, the run goes ahead.
    make_last_success_old(&redis, "once");
    Redlock::run(&redis)
        .key("once")
        .args(["--min-interval", "1h"])
        .sh(&marker_script(&dir))
        .output();
    assert!(dir.join("marker").exists(), "the command did not run");
}

#[test]
fn a_failed_run_is_not_recorded() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let flaky = || {
        Redlock::run(&redis)
            .key("flaky")
            .args(["--min-interval", "1h"])
    };
    flaky().sh("exit 3").status(3).output();
    assert_eq!(redis.pttl(&done_key("flaky")), -2);
    flaky().sh(&marker_script(&dir)).status(0).output();
    assert!(
        dir.join("marker").exists(),
        "a failed run skipped the next one"
    );
}

#[test]
fn a_waiter_that_waited_for_a_successful_run_skips() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let fleet = || {
        Redlock::run(&redis)
            .key("fleet")
            .args(["--min-interval", "50m"])
            .ttl("60s")
    };
    let (holder, _) = fleet().hold(&dir, "h");
    let waiter = fleet()
        .wait("60s")
        .arg("-v")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    let out = waiter.finish();
    out.assert_code(75);
    assert!(out.stderr.contains("--min-interval"), "{}", out.stderr);
    assert!(!dir.join("marker").exists(), "the waiter ran the job again");
}

#[test]
fn bad_intervals_are_usage_errors() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for bad in ["0", "abc", "400d"] {
        Redlock::run(&redis)
            .key("bad")
            .args(["--min-interval", bad])
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_lines(1)
            .output();
    }
    assert!(!dir.join("marker").exists());
    assert!(redis.all_keys().is_empty(), "{:?}", redis.all_keys());
}
