//! The admin subcommands against real holders: `status` shows who holds a lock and for how
//! long, `list` finds locks (and nothing else) with SCAN, `release --force` breaks a lock,
//! fences its holder off and wakes a waiter, and removes a key redlock did not make; the run
//! path still takes one round trip each way, and touches only the lock when nobody waits.

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
        format!(r#""fence":{}"#, fence_of(&redis, "nightly backup")),
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
    let fence = fence_of(&redis, "nightly backup");
    assert!(json.contains(&format!(r#""fence":{fence}"#)), "{json}");
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

    let held = fence_of(&redis, "stuck");
    let out = Redlock::admin("release", &redis)
        .key("stuck")
        .args(["--force", "--token", &token])
        .status(0)
        .stdout_contains(&token)
        .stdout_contains(&format!("pid {}", holder.pid()))
        .stdout_contains("fencing counter now ")
        .output();
    // The waiter may have taken the lock since: the release says what it moved the counter to.
    let broken = fencing_token(out.stdout.rsplit("fencing counter now ").next().unwrap());

    // The waiter runs with a token above the removed holder's and the breaker's.
    waiter.finish().assert_code(0);
    let waited = fencing_token(&wait_for_line(&dir.join("w.fence")));
    assert_increasing(&[held, broken, waited]);
    // The old holder finds its key gone at its next renewal and stops its command.
    holder.finish().assert_code(76);

    Redlock::admin("release", &redis)
        .key("stuck")
        .arg("--force")
        .status(0)
        .stdout_contains("is free")
        .output();
    // A free lock's release fences nothing: the counter is the waiter's token.
    assert_eq!(fence_of(&redis, "stuck"), waited);
}

/// A run nobody waits for takes one round trip to acquire and one to release (after the
/// connection's set-up, which asks ROLE), and leaves the waiters' bookkeeping alone: inside its
/// two scripts only the lock, its holder's details, the fencing counter and the record of runs
/// (the run put in the ring, then its end written as the client sends it, and counted) are
/// touched, whether anyone waits is asked once (EXISTS), and nothing reads the record whole:
/// 12 commands in all.
#[test]
fn a_run_without_waiting_is_one_round_trip_each_way_and_touches_only_the_lock() {
    let redis = RedisServer::start();
    // The first run finds the script cache empty (EVALSHA, NOSCRIPT, EVAL); later ones do not.
    let run = || Redlock::run(&redis).key("rt").sh("true").status(0).output();
    run();
    redis.reset_stats();
    run();
    assert_eq!(redis.client_calls(), 2);
    let calls = redis.command_calls();
    let calls: Vec<(&str, u64)> = calls.iter().map(|(c, n)| (c.as_str(), *n)).collect();
    assert_eq!(
        calls,
        [
            ("config|get", 1), // the eviction-policy check, beside the acquire
            ("del", 1),        // the lock and its holder's details, at the release
            ("evalsha", 2),
            ("exists", 1),  // does anyone wait? (the release)
            ("get", 1),     // the lock's token, at the release
            ("hincrby", 1), // the run's outcome counted
            ("hmget", 1),   // the record's head: the previous run, and where this one goes
            ("hset", 3),    // the holder's details; the run recorded; its end (and last success)
            ("pexpire", 1), // the holder's details (the record's lifetime: once a day)
            ("role", 1),    // the replica check, once, in the connection's set-up
            ("set", 2),     // the lock; the fencing counter set to the clock, reading it back
            ("time", 1),    // the server's clock: the fencing token and the run's start
        ]
    );
    let inside: u64 = calls
        .iter()
        .filter(|(c, _)| !["config|get", "evalsha", "role"].contains(c))
        .map(|(_, n)| n)
        .sum();
    assert!(inside <= 12, "{inside} commands inside the scripts");
}

/// A Redis hash at the lock key of `name`, which redlock did not make.
fn hash_at(redis: &RedisServer, name: &str) {
    redis::cmd("HSET")
        .arg(lock_key(name))
        .arg("field")
        .arg("value")
        .exec(&mut redis.conn())
        .unwrap();
}

/// A key redlock did not make at a lock's name (a hash, say): `run` refuses it with 64 and runs
/// nothing, `status` says what it is with 69, each in one line; `list` leaves it out.
#[test]
fn a_foreign_key_at_a_lock_name_is_named_as_such() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    hash_at(&redis, "odd");
    let foreign = "is a Redis hash that redlock did not make";
    Redlock::run(&redis)
        .key("odd")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains(&format!(
            "lock 'odd': its key {foreign}; not running the command"
        ))
        .stderr_prefixed()
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    let status = Redlock::admin("status", &redis)
        .key("odd")
        .status(69)
        .stderr_contains(&format!(
            "cannot read lock 'odd': its key redlock:{{odd}} {foreign} (`redlock release --force` \
             on this key removes it)"
        ))
        .stderr_prefixed()
        .stderr_lines(1)
        .output();
    assert!(!status.stderr.contains("\"the\""), "{}", status.stderr);
    assert_eq!(stdout_of("list", &redis, &[]), "");
}

/// `release --force` removes a key redlock did not make at a lock's name, says what it was and
/// advances the fencing counter, after which the lock works; with `--token` (which such a key
/// does not hold) it is left alone with 75.
#[test]
fn release_force_removes_a_foreign_key_at_a_lock_name() {
    let redis = RedisServer::start();
    hash_at(&redis, "odd");
    Redlock::admin("release", &redis)
        .key("odd")
        .args(["--force", "--token", "t"])
        .status(75)
        .stdout(
            "lock 'odd' is a Redis hash that redlock did not make, held by no token; left alone \
             (fencing counter 0)\n",
        )
        .output();
    let kind: String = redis::cmd("TYPE")
        .arg(lock_key("odd"))
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(kind, "hash");
    Redlock::admin("release", &redis)
        .key("odd")
        .arg("--force")
        .status(0)
        .stdout_contains(
            "removed lock 'odd': its key was a Redis hash that redlock did not make; fencing \
             counter now ",
        )
        .output();
    assert_eq!(redis.pttl(&lock_key("odd")), -2, "the hash is still there");
    let fenced = fence_of(&redis, "odd");
    let out = Redlock::run(&redis)
        .key("odd")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .status(0)
        .any_stdout() // the token, parsed below
        .output();
    assert_increasing(&[fenced, fencing_token(&out.stdout)]);

    hash_at(&redis, "odd json");
    let json = stdout_of(
        "release",
        &redis,
        &["--key", "odd json", "--force", "--json"],
    );
    for want in [
        r#""result":"released""#,
        r#""token":null"#,
        &format!(r#""fence":{}"#, fence_of(&redis, "odd json")),
        r#""kind":"foreign""#,
        r#""holders_left":0"#,
    ] {
        assert!(json.contains(want), "{want} missing from {json}");
    }
    assert_eq!(redis.pttl(&lock_key("odd json")), -2);
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

/// A quorum with one node silent (SIGSTOPped: it accepts connections and never answers): `list`
/// asks it once, not once per lock, so it ends in about one request timeout (5 s) however
/// many locks there are (it took 5 s more per lock), lists what the other two hold, and says on
/// stderr that the node did not answer.
#[test]
fn list_on_a_quorum_with_a_silent_node_asks_it_once() {
    let servers = start_servers(3);
    let names = ["l1", "l2", "l3", "l4"];
    for server in &servers {
        let mut conn = server.conn();
        for name in names {
            redis::cmd("SET")
                .arg(lock_key(name))
                .arg(format!("tok-{name}"))
                .arg("PX")
                .arg(60_000)
                .exec(&mut conn)
                .unwrap();
        }
    }
    servers[2].pause();
    let silent = format!(
        "127.0.0.1:{}: cannot list locks: no answer from Redis at 127.0.0.1:{} in time",
        servers[2].port(),
        servers[2].port()
    );
    // Text and JSON at once, each with the silent node.
    let outs: Vec<Output> = std::thread::scope(|s| {
        let runs: Vec<_> = [false, true]
            .map(|json| {
                let list = Redlock::admin_quorum("list", &servers)
                    .args(if json { &["--json"][..] } else { &[] })
                    .any_stdout()
                    .stderr_lines(1)
                    .stderr_contains(&silent);
                s.spawn(move || list.output())
            })
            .into_iter()
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for (json, out) in [false, true].into_iter().zip(outs) {
        assert!(
            out.elapsed < Duration::from_secs(10),
            "took {:?}",
            out.elapsed
        );
        if json {
            assert_eq!(
                out.stdout
                    .matches(r#""agreeing":2,"nodes":3,"answered":2"#)
                    .count(),
                4
            );
            assert_eq!(
                out.stdout
                    .matches(r#""status":null,"error":"no answer"#)
                    .count(),
                4
            );
            continue;
        }
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), names.len(), "{}", out.stdout);
        for (line, name) in lines.iter().zip(names) {
            assert!(
                line.starts_with(&format!("{name}\texpires in "))
                    && line.ends_with(&format!("\ttoken tok-{name}\ton 2 of 3 nodes")),
                "{line}"
            );
        }
    }
    servers[2].resume();
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
