//! The admin subcommands against real holders: `status` shows who holds a lock and for how
//! long, `list` finds locks (and nothing else) with SCAN, `release --force` breaks a lock,
//! fences its holder off and wakes a waiter; the run path still takes one round trip.

use std::time::Duration;

use crate::common::*;

#[test]
fn status_shows_the_holder_and_then_a_free_lock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis).key("nightly backup").hold(&dir, "h");

    let json = stdout_of("status", &redis, &["--key", "nightly backup", "--json"]);
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

    let text = stdout_of("status", &redis, &["--key", "nightly backup"]);
    assert!(text.contains("is held"), "{text}");
    assert!(text.contains(&format!("pid {}", holder.pid())), "{text}");
    // The holder's details expire with the lock.
    let holder_key = format!("{}:holder", lock_key("nightly backup"));
    let pttl = redis.pttl(&holder_key);
    assert!(pttl > 0 && pttl <= 30_000, "holder details PTTL {pttl}");

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    assert_eq!(redis.pttl(&holder_key), -2, "holder details left behind");
    let json = stdout_of("status", &redis, &["--key", "nightly backup", "--json"]);
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
    let (a, _) = Redlock::run(&redis).key("alpha").hold(&dir, "a");
    let (b, _) = Redlock::run(&redis).key("b}ra{vo *").hold(&dir, "b");
    let (c, _) = Redlock::run(&redis)
        .key("other")
        .args(["--prefix", "x:"])
        .hold(&dir, "c");
    // A waiter gives the lock its wake and queue keys; a finished run leaves a fencing counter.
    let waiter = Redlock::run(&redis)
        .key("alpha")
        .wait("60s")
        .arg("--fair")
        .sh("true")
        .spawn();
    wait_until(PATIENCE, "the waiter to queue", || {
        redis.info_field("blocked_clients") == 1
    });
    Redlock::run(&redis)
        .key("done")
        .sh("true")
        .status(0)
        .output();
    redis::cmd("SET")
        .arg("unrelated")
        .arg("1")
        .exec(&mut redis.conn())
        .unwrap();

    let text = stdout_of("list", &redis, &[]);
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "b}ra{vo *"], "{text}");
    let json = stdout_of("list", &redis, &["--json"]);
    assert!(
        json.starts_with('[') && json.trim_end().ends_with(']'),
        "{json}"
    );
    assert_eq!(json.matches(r#""state":"held""#).count(), 2, "{json}");
    let other = stdout_of("list", &redis, &["--prefix", "x:"]);
    assert!(other.starts_with("other\t"), "{other}");
    assert_eq!(other.lines().count(), 1, "{other}");
    let glob = stdout_of("list", &redis, &["--prefix", "*"]);
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
    let (holder, token) = Redlock::run(&redis).key("keep").hold(&dir, "h");
    Redlock::admin("release", &redis)
        .key("keep")
        .status(64)
        .stderr_prefixed()
        .stderr_contains("--force")
        .stderr_lines(1)
        .output();
    assert_eq!(redis.get(&lock_key("keep")), Some(token));
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn force_release_fences_the_holder_off_and_wakes_a_waiter() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis).key("stuck").ttl("3s").hold(&dir, "h");
    let waiter = Redlock::run(&redis)
        .key("stuck")
        .wait("60s")
        .sh(&format!(
            "echo $REDLOCK_FENCING_TOKEN > {}",
            dir.sh("w.fence")
        ))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });

    // With --token, only that holder's lock is broken.
    Redlock::admin("release", &redis)
        .key("stuck")
        .args(["--force", "--token", "nope"])
        .status(75)
        .stdout_contains("left alone")
        .output();
    assert_eq!(
        redis.get(&lock_key("stuck")).as_deref(),
        Some(token.as_str())
    );

    Redlock::admin("release", &redis)
        .key("stuck")
        .args(["--force", "--token", &token])
        .status(0)
        .stdout_contains(&token)
        .stdout_contains(&format!("pid {}", holder.pid()))
        .stdout_contains("fencing counter now 2")
        .output();

    // The waiter runs with a token above the removed holder's and the breaker's.
    waiter.finish().assert_code(0);
    assert_eq!(wait_for_line(&dir.join("w.fence")), "3");
    // The old holder finds its key gone at its next renewal and stops its command.
    holder.finish().assert_code(76);

    Redlock::admin("release", &redis)
        .key("stuck")
        .arg("--force")
        .status(0)
        .stdout_contains("is free")
        .output();
    assert_eq!(redis.get(&fence_key("stuck")).as_deref(), Some("3"));
}

#[test]
fn a_run_without_waiting_is_one_round_trip_to_acquire_and_one_to_release() {
    let redis = RedisServer::start();
    // The first run finds the script cache empty (EVALSHA, NOSCRIPT, EVAL); later ones do not.
    let run = || Redlock::run(&redis).key("rt").sh("true").status(0).output();
    run();
    redis.reset_stats();
    run();
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
        Redlock::admin_at(sub[0], &format!("redis://127.0.0.1:{port}"))
            .args(&sub[1..])
            .status(69)
            .stderr_prefixed()
            .stderr_lines(1)
            .output();
    }
}

#[test]
fn holder_details_are_renewed_with_the_lease() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis)
        .key("renewed")
        .ttl("300ms")
        .hold(&dir, "h");
    // Several leases' worth of time: only renewals keep the details alive.
    let since = std::time::Instant::now();
    wait_until(PATIENCE, "two leases to pass", || {
        since.elapsed() > Duration::from_millis(700)
    });
    let json = stdout_of("status", &redis, &["--key", "renewed", "--json"]);
    assert!(
        json.contains(&format!(r#""pid":{},"#, holder.pid())),
        "{json}"
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}
