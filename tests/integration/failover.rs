//! Failovers under --min-replicas: a replica that stops following while the lock is held and
//! is then promoted never gives the lock away while the holder's command runs (the holder
//! exits 76, saying its replicas stopped acknowledging), directly and through Sentinel; a
//! failover to a replica that acknowledged the acquire never repeats a fencing token.

use std::path::Path;

use super::topology::*;
use crate::common::*;

/// A command that records when it started (`date +%s%N`) in `path`.
fn stamp_script(path: &Path) -> String {
    format!("date +%s%N > {}", shell_quote(path))
}

/// The holder's last heartbeat came before the contender's command started.
#[track_caller]
fn assert_no_overlap(dir: &TempDir, holder: &str, contender: &Path) {
    let last = *read_stamps(&dir.join(&format!("{holder}.hb")))
        .iter()
        .max()
        .expect("no heartbeat");
    let started = read_stamps(contender)[0];
    assert!(
        last < started,
        "two commands at once: the holder beat {} ms after the contender started",
        (last - started) / 1_000_000
    );
    eprintln!(
        "the contender started {} ms after the holder's last heartbeat",
        (started - last) / 1_000_000
    );
}

/// The holder's command: a heartbeat that ignores the stop signal, so only the SIGKILL redlock
/// sends a margin before its lease deadline ends it. The lease deadline alone keeps it from
/// overlapping, with no help from a prompt exit after SIGTERM.
fn deaf_heartbeat(dir: &TempDir) -> String {
    format!("trap '' TERM; {}", heartbeat_script(dir, "a"))
}

/// What must hold once the holder is done: it was stopped for want of replica acknowledgements.
#[track_caller]
fn assert_stopped_for_replicas(out: &Output) {
    out.assert_code(76);
    out.assert_stderr_prefixed();
    assert!(
        out.stderr
            .contains("its replicas stopped acknowledging the renewals (--min-replicas)"),
        "{}",
        out.stderr
    );
    // The first unacknowledged renewal warns once, naming --min-replicas once (it was doubled:
    // "(--min-replicas); --min-replicas)").
    let warning = out
        .stderr
        .lines()
        .find(|l| l.contains("stopped acknowledging renewals"))
        .unwrap_or_else(|| panic!("no warning: {}", out.stderr));
    let within = warning
        .strip_prefix(
            "redlock: warning: the replicas stopped acknowledging renewals of lock 'job': only \
             0 of 1 replica(s) acknowledged the renewal within ",
        )
        .and_then(|rest| {
            rest.strip_suffix(" (--min-replicas); the lease is not extended until they do")
        });
    assert!(
        within.is_some_and(|w| !w.is_empty() && !w.contains(' ')),
        "{warning}"
    );
}

/// A contender takes the lock on the promoted server; the holder, done, must have been stopped
/// for want of replica acknowledgements, and its command must never overlap the contender's.
fn contend_after_the_failover(contender: Redlock, dir: &TempDir, holder: Proc) {
    let started = dir.join("b.start");
    contender
        .key("job")
        .wait("20s")
        .sh(&stamp_script(&started))
        .status(0)
        .output();
    let out = holder.finish();
    eprintln!("holder:\n{}", out.stderr);
    assert_stopped_for_replicas(&out);
    assert_no_overlap(dir, "a", &started);
}

/// Main's failure, replayed: the replica stops following while the lock is held and renewed;
/// the master keeps accepting the renewals, then dies, and the replica is promoted with the
/// expiry of the last write it received. The holder stopped counting its lease at the last
/// renewal the replica acknowledged, so its command is gone before that copy expires.
#[test]
fn a_promoted_replica_that_stopped_following_never_gives_the_lock_away_early() {
    let mut master = RedisServer::start();
    let replica = replica_of(&master);
    let dir = TempDir::new();
    let holder = Redlock::run(&master)
        .key("job")
        .ttl("3s")
        .args(["--min-replicas", "1"])
        .sh(&deaf_heartbeat(&dir))
        .spawn();
    wait_for_file(&dir.join("a.ready"));
    wait_until(PATIENCE, "the replica to have the lock", || {
        replica.get(&lock_key("job")).is_some()
    });
    replicaof(&replica, Some(free_port()));
    wait_until(
        PATIENCE,
        "a renewal the replica did not acknowledge",
        || holder.stderr_so_far().contains("stopped acknowledging"),
    );
    master.kill();
    replicaof(&replica, None);
    contend_after_the_failover(Redlock::run(&replica), &dir, holder);
}

/// The same through Sentinel. A sentinel puts back a replica that follows the wrong master,
/// but only after its failover-timeout (10 s here) with the master up: the replica stays
/// pointed away for the seconds this takes. Then the master dies and the sentinels promote
/// that replica, the only one; the holder's renewals may even reach it, and extend the key
/// there, but it has no replicas to acknowledge them.
#[test]
fn through_sentinel_a_promoted_replica_that_stopped_following_never_gives_the_lock_away_early() {
    let mut setup = SentinelSetup::start();
    let dir = TempDir::new();
    let url = setup.url();
    let holder = Redlock::run_at(&url)
        .key("job")
        .ttl("3s")
        .args(["--min-replicas", "1"])
        .sh(&deaf_heartbeat(&dir))
        .spawn();
    wait_for_file(&dir.join("a.ready"));
    wait_until(PATIENCE, "the replica to have the lock", || {
        setup.replica.get(&lock_key("job")).is_some()
    });
    replicaof(&setup.replica, Some(free_port()));
    wait_until(
        PATIENCE,
        "a renewal the replica did not acknowledge",
        || holder.stderr_so_far().contains("stopped acknowledging"),
    );
    setup.master.kill();
    let promoted = setup.replica.port();
    for s in &setup.sentinels {
        wait_until(PATIENCE, "the sentinels to promote the replica", || {
            let named: redis::RedisResult<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(SERVICE)
                .query(&mut s.conn());
            matches!(named, Ok((_, port)) if port == promoted)
                && info(&setup.replica, "replication").contains("role:master")
        });
    }
    contend_after_the_failover(Redlock::run_at(&url), &dir, holder);
}

/// The acquire script's INCR of the fencing counter is a write like the lock's own, so the
/// acquire's WAIT covers it: the command starts only once a replica has the new token. Here
/// the replica lags (paused) while a holder takes the lock, and the command kills the master
/// the moment it starts; the replica, promoted, hands out a higher token, never the same.
#[test]
fn a_failover_to_an_acknowledging_replica_never_repeats_a_fencing_token() {
    let master = RedisServer::start();
    let replica = replica_of(&master);
    let dir = TempDir::new();
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let out = Redlock::run(&master)
            .key("job")
            .args(["--min-replicas", "1"])
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
            .output();
        tokens.push(out.stdout.trim().parse::<i64>().unwrap());
    }
    replica.pause();
    let script = format!(
        "echo $REDLOCK_FENCING_TOKEN > {fence}; kill -9 {master}; touch {ready}",
        fence = dir.sh("a.fence"),
        master = master.pid(),
        ready = dir.sh("a.ready"),
    );
    let holder = Redlock::run(&master)
        .key("job")
        .ttl("10s")
        .args(["--min-replicas", "1"])
        .sh(&script)
        .spawn();
    // The holder took the lock and waits for the paused replica (WAIT blocks it).
    wait_until(PATIENCE, "the holder's WAIT", || {
        master.info_field("blocked_clients") >= 1
    });
    assert!(!dir.join("a.ready").exists(), "ran before a replica had it");
    replica.resume();
    wait_for_file(&dir.join("a.ready"));
    tokens.push(wait_for_line(&dir.join("a.fence")).parse().unwrap());
    replicaof(&replica, None);
    let out = Redlock::run(&replica)
        .key("job")
        .wait("20s")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    let after: i64 = out.stdout.trim().parse().unwrap();
    let holder = holder.finish();
    eprintln!("holder:\n{}", holder.stderr);
    holder.assert_code(0);
    eprintln!("tokens before the failover {tokens:?}, after {after}");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(
        after > *tokens.last().unwrap(),
        "token {after} handed out again after the failover: {tokens:?}"
    );
}

/// With several `--url`, `--min-replicas` applies per node: each master must have that many of
/// its own replicas acknowledge its acquire and renewals, and a renewal counts when a majority
/// of nodes extended the lease and were acknowledged. One node's replica stopping does not
/// stop the command; a second one does (76).
#[test]
fn on_a_quorum_min_replicas_applies_per_node() {
    let masters = start_servers(3);
    let replicas: Vec<RedisServer> = masters.iter().map(replica_of).collect();
    let dir = TempDir::new();
    let (mut holder, token) = Redlock::run_quorum(&masters)
        .key("job")
        .ttl("1500ms")
        .args(["--min-replicas", "1", "-vv"])
        .hold(&dir, "a");
    for replica in &replicas {
        wait_until(PATIENCE, "every replica to have the lock", || {
            replica.get(&lock_key("job")).as_deref() == Some(&*token)
        });
    }
    replicaof(&replicas[0], Some(free_port()));
    let renewed = |p: &Proc| p.stderr_so_far().matches("renewed lock").count();
    let before = renewed(&holder);
    wait_until(
        PATIENCE,
        "two renewals with one node unacknowledged",
        || renewed(&holder) >= before + 2 || !holder.running(),
    );
    assert!(holder.running(), "{}", holder.stderr_so_far());
    assert!(!holder.stderr_so_far().contains("stopped acknowledging"));
    replicaof(&replicas[1], Some(free_port()));
    let out = holder.finish();
    eprintln!("holder:\n{}", out.stderr);
    out.assert_code(76);
    out.assert_stderr_prefixed();
    // A node's WAIT is held up to half its time limit (ttl/50, 100 ms at least): on a loaded
    // machine the reply of a node whose replica is gone can come past the limit, and that node
    // counts as silent instead of unacknowledged. Either way only one node renewed.
    let unacknowledged = out
        .stderr
        .contains("1 of 3 Redis nodes renewed the lock with their replicas acknowledging")
        && out
            .stderr
            .contains("its replicas stopped acknowledging the renewals (--min-replicas)");
    let late = out
        .stderr
        .contains("only 1 of 3 Redis nodes renewed the lock (a majority is 2): no answer")
        && out.stderr.contains("before its lease ran low");
    assert!(unacknowledged || late, "{}", out.stderr);
}
