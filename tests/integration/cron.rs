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
    run_timeout(
        run_sh(&redis, "cron", &["--min-interval", "50m"], "true"),
        PATIENCE,
    )
    .assert_code(0);
    let pttl = redis.pttl(&done_key("cron"));
    assert!(pttl > 0 && pttl <= 50 * 60_000, "done record PTTL {pttl}");

    let out = run_timeout(
        run_sh(
            &redis,
            "cron",
            &["--min-interval", "50m", "-v"],
            &marker_script(&dir),
        ),
        PATIENCE,
    );
    out.assert_code(75);
    out.assert_stderr_prefixed();
    assert!(out.stderr.contains("--min-interval"), "{}", out.stderr);
    assert!(!dir.join("marker").exists(), "the command ran");
    assert_eq!(
        redis.get(&lock_key("cron")),
        None,
        "a skipped run took the lock"
    );

    // --conflict-exit-code and the environment variable apply as well.
    let mut cmd = run_sh(
        &redis,
        "cron",
        &["--conflict-exit-code", "0"],
        &marker_script(&dir),
    );
    cmd.env("REDLOCK_MIN_INTERVAL", "1h");
    run_timeout(cmd, PATIENCE).assert_code(0);
    assert!(!dir.join("marker").exists(), "the command ran");

    // Without --min-interval the record is ignored, and a shorter window has passed.
    run_timeout(run_sh(&redis, "cron", &[], &marker_script(&dir)), PATIENCE).assert_code(0);
    assert!(dir.join("marker").exists());
    std::fs::remove_file(dir.join("marker")).unwrap();
    redis::cmd("SET")
        .arg(done_key("cron"))
        .arg(0)
        .exec(&mut redis.conn())
        .unwrap();
    run_timeout(
        run_sh(
            &redis,
            "cron",
            &["--min-interval", "50m"],
            &marker_script(&dir),
        ),
        PATIENCE,
    )
    .assert_code(0);
    assert!(
        dir.join("marker").exists(),
        "an old record still skipped the run"
    );

    let status = run_timeout(admin(&redis, "status", &["--key", "cron"]), PATIENCE);
    assert!(status.stdout.contains("last success"), "{}", status.stdout);
}

#[test]
fn a_failed_run_is_not_recorded() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    run_timeout(
        run_sh(&redis, "flaky", &["--min-interval", "1h"], "exit 3"),
        PATIENCE,
    )
    .assert_code(3);
    assert_eq!(redis.pttl(&done_key("flaky")), -2);
    run_timeout(
        run_sh(
            &redis,
            "flaky",
            &["--min-interval", "1h"],
            &marker_script(&dir),
        ),
        PATIENCE,
    )
    .assert_code(0);
    assert!(
        dir.join("marker").exists(),
        "a failed run skipped the next one"
    );
}

#[test]
fn a_waiter_that_waited_for_a_successful_run_skips() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let opts = ["--min-interval", "50m", "--ttl", "60s"];
    let (holder, _) = spawn_holder(&redis, "fleet", &opts, &dir, "h");
    let mut waiter_opts = opts.to_vec();
    waiter_opts.extend(["--wait", "60s", "-v"]);
    let waiter = Proc::spawn(run_sh(&redis, "fleet", &waiter_opts, &marker_script(&dir)));
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
        let out = run_timeout(
            run_sh(
                &redis,
                "bad",
                &["--min-interval", bad],
                &marker_script(&dir),
            ),
            PATIENCE,
        );
        out.assert_code(64);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    assert!(!dir.join("marker").exists());
    assert!(redis.all_keys().is_empty(), "{:?}", redis.all_keys());
}
