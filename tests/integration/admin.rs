//! The admin subcommands against real holders: `status` shows who holds a lock and for how
//! long, `list` finds locks (and nothing else) with SCAN, `release --force` breaks a lock,
//! fences its holder off and wakes a waiter; the run path still takes one round trip.

use std::time::Duration;

use crate::common::*;

fn stdout_of(cmd: std::process::Command) -> String {
    let out = run_timeout(cmd, PATIENCE);
    out.assert_code(0);
    out.stdout
}

#[test]
fn status_shows_the_holder_and_then_a_free_lock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = spawn_holder(&redis, "nightly backup", &[], &dir, "h");

    let json = stdout_of(admin(
        &redis,
        "status",
        &["--key", "nightly backup", "--json"],
    ));
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    for want in [
        r#""key":"nightly backup""#.to_owned(),
        r#""state":"held""#.to_owned(),
        r#""fence":1"#.to_owned(),
        format!(r#""token":"{token}""#),
        format!(r#""host":{}"#, json_str(&host)),
        format!(r#""pid":{},"#, holder.pid()),
        r#""command":"sh -c "#.to_owned(),
    ] {
        assert!(json.contains(&want), "{want} missing from {json}");
    }
    assert_eq!(json.lines().count(), 1, "{json}");

    let text = stdout_of(admin(&redis, "status", &["--key", "nightly backup"]));
    assert!(text.contains("is held"), "{text}");
    assert!(text.contains(&format!("pid {}", holder.pid())), "{text}");
    // The holder's details expire with the lock.
    let holder_key = format!("{}:holder", lock_key("nightly backup"));
    let pttl = redis.pttl(&holder_key);
    assert!(pttl > 0 && pttl <= 30_000, "holder details PTTL {pttl}");

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    assert_eq!(redis.pttl(&holder_key), -2, "holder details left behind");
    let json = stdout_of(admin(
        &redis,
        "status",
        &["--key", "nightly backup", "--json"],
    ));
    assert!(json.contains(r#""state":"free""#), "{json}");
    assert!(json.contains(r#""fence":1"#), "{json}");
    assert!(json.contains(r#""holder":null"#), "{json}");
}

fn json_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn list_finds_locks_and_nothing_else_under_the_prefix() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (a, _) = spawn_holder(&redis, "alpha", &[], &dir, "a");
    let (b, _) = spawn_holder(&redis, "b}ra{vo *", &[], &dir, "b");
    let (c, _) = spawn_holder(&redis, "other", &["--prefix", "x:"], &dir, "c");
    // A waiter gives the lock its wake and queue keys; a finished run leaves a fencing counter.
    let waiter = Proc::spawn(run_sh(
        &redis,
        "alpha",
        &["--wait", "60s", "--fair"],
        "true",
    ));
    wait_until(PATIENCE, "the waiter to queue", || {
        redis.info_field("blocked_clients") == 1
    });
    run_timeout(run_sh(&redis, "done", &[], "true"), PATIENCE).assert_code(0);
    redis::cmd("SET")
        .arg("unrelated")
        .arg("1")
        .exec(&mut redis.conn())
        .unwrap();

    let text = stdout_of(admin(&redis, "list", &[]));
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "b}ra{vo *"], "{text}");
    let json = stdout_of(admin(&redis, "list", &["--json"]));
    assert!(
        json.starts_with('[') && json.trim_end().ends_with(']'),
        "{json}"
    );
    assert_eq!(json.matches(r#""state":"held""#).count(), 2, "{json}");
    let other = stdout_of(admin(&redis, "list", &["--prefix", "x:"]));
    assert!(other.starts_with("other\t"), "{other}");
    assert_eq!(other.lines().count(), 1, "{other}");
    let glob = stdout_of(admin(&redis, "list", &["--prefix", "*"]));
    assert_eq!(glob, "", "a '*' prefix must be literal");

    for (proc, tag) in [(a, "a"), (b, "b"), (c, "c")] {
        touch(&dir.join(&format!("{tag}.go")));
        proc.finish().assert_code(0);
    }
    waiter.finish().assert_code(0);
}

#[test]
fn release_refuses_without_force() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = spawn_holder(&redis, "keep", &[], &dir, "h");
    let out = run_timeout(admin(&redis, "release", &["--key", "keep"]), PATIENCE);
    out.assert_code(64);
    out.assert_stderr_prefixed();
    assert!(out.stderr.contains("--force"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert_eq!(redis.get(&lock_key("keep")), Some(token));
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn force_release_fences_the_holder_off_and_wakes_a_waiter() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = spawn_holder(&redis, "stuck", &["--ttl", "3s"], &dir, "h");
    let waiter = Proc::spawn(run_sh(
        &redis,
        "stuck",
        &["--wait", "60s"],
        &format!("echo $REDLOCK_FENCING_TOKEN > {}", dir.sh("w.fence")),
    ));
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });

    // With --token, only that holder's lock is broken.
    let out = run_timeout(
        admin(
            &redis,
            "release",
            &["--key", "stuck", "--force", "--token", "nope"],
        ),
        PATIENCE,
    );
    out.assert_code(75);
    assert!(out.stdout.contains("left alone"), "{}", out.stdout);
    assert_eq!(
        redis.get(&lock_key("stuck")).as_deref(),
        Some(token.as_str())
    );

    let out = run_timeout(
        admin(
            &redis,
            "release",
            &["--key", "stuck", "--force", "--token", &token],
        ),
        PATIENCE,
    );
    out.assert_code(0);
    assert!(out.stdout.contains(&token), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("pid {}", holder.pid())),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("fencing counter now 2"),
        "{}",
        out.stdout
    );

    // The waiter runs with a token above the removed holder's and the breaker's.
    waiter.finish().assert_code(0);
    assert_eq!(wait_for_line(&dir.join("w.fence")), "3");
    // The old holder finds its key gone at its next renewal and stops its command.
    let out = holder.finish();
    out.assert_code(76);

    let again = run_timeout(
        admin(&redis, "release", &["--key", "stuck", "--force"]),
        PATIENCE,
    );
    again.assert_code(0);
    assert!(again.stdout.contains("is free"), "{}", again.stdout);
    assert_eq!(redis.get(&fence_key("stuck")).as_deref(), Some("3"));
}

#[test]
fn a_run_without_waiting_is_one_round_trip_to_acquire_and_one_to_release() {
    let redis = RedisServer::start();
    // The first run finds the script cache empty (EVALSHA, NOSCRIPT, EVAL); later ones do not.
    run_timeout(run_sh(&redis, "rt", &[], "true"), PATIENCE).assert_code(0);
    redis.reset_stats();
    run_timeout(run_sh(&redis, "rt", &[], "true"), PATIENCE).assert_code(0);
    assert_eq!(redis.client_calls(), 2);
}

#[test]
fn admin_commands_report_an_unreachable_redis_with_69() {
    let port = free_port();
    for sub in [
        &["status", "--key", "k"][..],
        &["list"],
        &["release", "--key", "k", "--force"],
    ] {
        let mut cmd = redlock();
        cmd.args(&sub[..1])
            .args(["--url", &format!("redis://127.0.0.1:{port}")])
            .args(&sub[1..]);
        let out = run_timeout(cmd, PATIENCE);
        out.assert_code(69);
        out.assert_stderr_prefixed();
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
}

#[test]
fn holder_details_are_renewed_with_the_lease() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = spawn_holder(&redis, "renewed", &["--ttl", "300ms"], &dir, "h");
    // Several leases' worth of time: only renewals keep the details alive.
    let since = std::time::Instant::now();
    wait_until(PATIENCE, "two leases to pass", || {
        since.elapsed() > Duration::from_millis(700)
    });
    let json = stdout_of(admin(&redis, "status", &["--key", "renewed", "--json"]));
    assert!(
        json.contains(&format!(r#""pid":{},"#, holder.pid())),
        "{json}"
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}
