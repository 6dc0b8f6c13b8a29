//! Fencing tokens that never go backwards (carried by the server's clock across a counter that
//! was lost: a restart without persistence, FLUSHALL, a failover to a replica that missed the
//! last acquisitions; and beside an older redlock that only INCRs), no key without an expiry
//! after runs of every kind, and `--fsync` (WAITAOF) on Valkey 8: the lock survives a crash of
//! the machine (the server SIGKILLed with its unsynced writes lost) and a restart from its
//! append-only file; without it a crash loses the lock; servers that cannot are refused.

use std::time::Duration;

use nix::sys::signal::Signal;

use super::topology::{info, replica_of, replicaof};
use crate::common::*;

/// One run of `name` on `redis` that prints its fencing token.
fn token_of_a_run(redis: &RedisServer, name: &str) -> i64 {
    let out = Redlock::run(redis)
        .key(name)
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .status(0)
        .any_stdout() // the token, parsed below
        .output();
    fencing_token(&out.stdout)
}

#[test]
fn tokens_increase_across_a_restart_without_persistence_and_flushall() {
    let mut redis = RedisServer::start();
    let mut tokens: Vec<i64> = (0..3).map(|_| token_of_a_run(&redis, "job")).collect();
    // The data is gone; the server's clock is not.
    redis.restart();
    assert_eq!(
        redis.get(&fence_key("job")),
        None,
        "the restart kept the counter"
    );
    tokens.push(token_of_a_run(&redis, "job"));
    redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();
    tokens.push(token_of_a_run(&redis, "job"));
    assert_increasing(&tokens);
}

/// The replica stopped following after the first acquisition; three more went to the master;
/// then the replica was promoted and the clients moved to it. Its counter lags three
/// acquisitions behind: the next token must still be above every one handed out.
#[test]
fn tokens_increase_across_a_failover_to_a_replica_that_missed_acquisitions() {
    let master = RedisServer::start();
    let replica = replica_of(&master);
    let first = token_of_a_run(&master, "job");
    wait_until(PATIENCE, "the replica to have the first token", || {
        replica.get(&fence_key("job")) == Some(first.to_string())
    });
    // Cut off: it stops following, with the first token only.
    replicaof(&replica, None);
    let mut tokens = vec![first];
    tokens.extend((0..3).map(|_| token_of_a_run(&master, "job")));
    assert_eq!(replica.get(&fence_key("job")), Some(first.to_string()));
    assert!(info(&replica, "replication").contains("role:master"));
    tokens.push(token_of_a_run(&replica, "job"));
    assert_increasing(&tokens);
}

/// An older redlock took its token with INCR on the same counter: mixed, the tokens of both keep
/// increasing (the older one's INCR keeps a counter's expiry, and goes on from the clock-carried
/// value).
#[test]
fn tokens_increase_beside_an_older_redlock_that_only_incrs() {
    let redis = RedisServer::start();
    let older = |redis: &RedisServer| -> i64 {
        redis::cmd("INCR")
            .arg(fence_key("job"))
            .query(&mut redis.conn())
            .unwrap()
    };
    let small = older(&redis);
    assert_eq!(small, 1, "the older redlock's first token");
    let ours = token_of_a_run(&redis, "job");
    let theirs = older(&redis);
    let ours_again = token_of_a_run(&redis, "job");
    assert!(small < ours);
    assert_increasing(&[ours, theirs, ours_again]);
    assert!(
        redis.pttl(&fence_key("job")) > 0,
        "the counter lost its expiry"
    );
}

/// Every key redlock wrote has an expiry, after runs of every kind: a plain run, a busy attempt,
/// a waiter, a `--fair` waiter, a semaphore, shared holders, a `--min-interval` skip, a waiter
/// stopped by TERM, a forced release, and a holder SIGKILLed mid-run.
#[test]
fn no_key_lives_for_ever_after_runs_of_every_kind() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let run = |key: &str| Redlock::run(&redis).key(key);
    run("plain").sh("true").status(0).output();

    let (holder, _) = run("busy").hold(&dir, "b");
    run("busy").sh("true").status(75).output();
    let waiter = run("busy").wait("30s").sh("true").spawn();
    let fair = run("busy").wait("30s").arg("--fair").sh("true").spawn();
    let stopped = run("busy").wait("30s").sh("true").spawn();
    wait_until(PATIENCE, "three waiters", || {
        redis.info_field("blocked_clients") >= 2
    });
    stopped.signal(Signal::SIGTERM);
    stopped.finish().assert_signal(15);
    touch(&dir.join("b.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    fair.finish().assert_code(0);

    let slot = || run("pool").args(["--limit", "2"]);
    let (a, _) = slot().hold(&dir, "s1");
    slot().sh("true").status(0).output();
    touch(&dir.join("s1.go"));
    a.finish().assert_code(0);
    let reader = || run("doc").arg("--shared");
    let (r, _) = reader().hold(&dir, "r1");
    reader().sh("true").status(0).output();
    touch(&dir.join("r1.go"));
    r.finish().assert_code(0);

    run("daily")
        .args(["--min-interval", "1h"])
        .sh("true")
        .status(0)
        .output();
    run("daily")
        .args(["--min-interval", "1h"])
        .sh("true")
        .status(75)
        .output();

    let (h, _) = run("broken").ttl("10s").hold(&dir, "f");
    Redlock::admin("release", &redis)
        .key("broken")
        .arg("--force")
        .status(0)
        .stdout_contains("released lock 'broken' held by")
        .output();
    h.finish().assert_code(76);

    let (killed, _) = run("killed").ttl("10s").hold(&dir, "k");
    killed.signal(Signal::SIGKILL);
    killed.finish().assert_signal(9);

    // Every key is in database 0 (all_keys names them "db0:KEY").
    let keys: Vec<String> = redis
        .all_keys()
        .into_iter()
        .map(|key| {
            key.strip_prefix("db0:")
                .unwrap_or_else(|| panic!("a key outside database 0: {key}"))
                .to_owned()
        })
        .collect();
    assert!(keys.iter().any(|k| k.ends_with(":fence")), "{keys:?}");
    let forever: Vec<&String> = keys.iter().filter(|key| redis.pttl(key) == -1).collect();
    assert_eq!(forever, Vec::<&String>::new(), "keys without an expiry");
}

/// A Valkey 8 server with an append-only file fsynced as `fsync` says, whose SIGKILL is a
/// machine's crash: what it wrote but did not fsync is lost ([`ServerOpts::lose_unsynced`]).
fn valkey_with_aof(fsync: &str) -> RedisServer {
    RedisServer::start_with(ServerOpts {
        binary: Some(valkey_binary()),
        args: vec![
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            fsync.into(),
        ],
        lose_unsynced: true,
        ..ServerOpts::default()
    })
}

fn waitaof_calls(redis: &RedisServer) -> u64 {
    redis
        .command_calls()
        .into_iter()
        .find(|(command, _)| command == "waitaof")
        .map_or(0, |(_, calls)| calls)
}

/// `--fsync` on a server that fsyncs every write (`appendfsync always`): WAITAOF after the
/// acquire and after every renewal; the lock survives the machine's crash (the server SIGKILLed
/// with its unsynced writes lost) and a restart from its append-only file, a contender finds it
/// busy, and the holder, renewing on, ends well.
#[test]
fn with_fsync_the_lock_survives_a_crash_of_the_machine() {
    let mut redis = valkey_with_aof("always");
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis)
        .key("durable")
        .ttl("3s")
        .arg("--fsync")
        .hold(&dir, "h");
    // The acquire, and then renewals every second: each waited for the fsync.
    wait_until(PATIENCE, "a renewal fsynced", || waitaof_calls(&redis) >= 2);
    redis.restart();
    assert_eq!(
        redis.get(&lock_key("durable")).as_deref(),
        Some(token.as_str()),
        "the lock did not survive the crash"
    );
    Redlock::run(&redis)
        .key("durable")
        .sh("true")
        .status(75)
        .output();
    std::thread::sleep(Duration::from_millis(1200));
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    assert!(
        waitaof_calls(&redis) >= 1,
        "renewals after the restart waited for no fsync"
    );
    assert_eq!(redis.get(&lock_key("durable")), None);
}

/// What `--fsync` guards against, on a server that never fsyncs by itself (`appendfsync no`):
/// a lock taken without it is acknowledged, and lost with the machine's crash, so a second
/// holder runs while the first one's command still does; with it, nothing is acknowledged that
/// is not on disk, so the run is refused (69) and the lock released.
#[test]
fn a_crash_of_the_machine_loses_a_lock_no_fsync_waited_for() {
    let mut redis = valkey_with_aof("no");
    let dir = TempDir::new();
    let (first, _) = Redlock::run(&redis).key("lost").ttl("30s").hold(&dir, "a");
    redis.restart();
    assert_eq!(redis.get(&lock_key("lost")), None, "the lock survived");
    let (second, _) = Redlock::run(&redis).key("lost").ttl("30s").hold(&dir, "b");
    for tag in ["a", "b"] {
        touch(&dir.join(&format!("{tag}.go")));
    }
    // The first finds the key another's at its release: lost (76); the second ends well.
    first.finish().assert_code(76);
    second.finish().assert_code(0);
    Redlock::run(&redis)
        .key("lost")
        .arg("--fsync")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr(
            "redlock: cannot take lock 'lost': the master did not fsync the lock to its \
             append-only file within 1s (--fsync); released it\n",
        )
        .output();
    assert!(!dir.join("marker").exists(), "it ran");
    assert_eq!(redis.get(&lock_key("lost")), None, "left locked");
}

/// Servers that cannot fsync as asked are refused before the command runs, with 69 and one line
/// saying which and what to do, and nothing stays locked: one without an append-only file, and
/// Redis 7.0, which has no WAITAOF.
#[test]
fn fsync_is_refused_where_the_server_cannot_give_it() {
    let dir = TempDir::new();
    let no_aof = RedisServer::start_with(ServerOpts {
        binary: Some(valkey_binary()),
        ..ServerOpts::default()
    });
    let redis_70 = RedisServer::start_with(ServerOpts {
        binary: Some("redis-server".into()),
        ..ServerOpts::default()
    });
    for (server, says) in [
        (&no_aof, "appendonly is disabled"),
        (&redis_70, "unknown command"),
    ] {
        let out = Redlock::run(server)
            .key("k")
            .arg("--fsync")
            .sh(&marker_script(&dir))
            .status(69)
            .stderr_lines(1)
            .stderr_contains(says)
            .stderr_contains("--fsync needs WAITAOF")
            .stderr_contains("released it")
            .output();
        assert!(!dir.join("marker").exists(), "{}", out.stderr);
        assert_eq!(
            server.get(&lock_key("k")),
            None,
            "left locked: {}",
            out.stderr
        );
    }
}
