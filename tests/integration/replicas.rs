//! --min-replicas at the take: a take too few replicas acknowledge is given back and, within
//! `--wait`, tried again as an unreachable server is, said once; without a wait, or once it
//! ends, 69 with the same line. However many takes a wait gave back, the run is one run in the
//! record of runs, counted once.

use std::time::Duration;

use super::snapshots::assert_snapshot;
use super::topology::*;
use crate::common::*;

/// The WAIT calls `master` answered so far: one per take under `--min-replicas`.
fn waits(master: &RedisServer) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut master.conn())
        .unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

/// The runs `redlock history --key k --json` lists, newest first: its objects (none holds a
/// brace).
fn history(master: &RedisServer) -> Vec<String> {
    let out = Redlock::admin("history", master)
        .key("k")
        .arg("--json")
        .status(0)
        .any_stdout()
        .output();
    let inner = out
        .stdout
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if inner.is_empty() {
        return Vec::new();
    }
    inner.split("},{").map(str::to_owned).collect()
}

/// The record of runs' counter `name` for lock 'k' (0 when there is none).
fn counted(master: &RedisServer, name: &str) -> i64 {
    redis::cmd("HGET")
        .arg(format!("{}:counts", lock_key("k")))
        .arg(name)
        .query::<Option<i64>>(&mut master.conn())
        .unwrap()
        .unwrap_or(0)
}

/// What a take says when the master's only replica does not acknowledge it (`--ttl 3s`: WAIT
/// waits 300 ms).
const UNACKNOWLEDGED: &str = "redlock: cannot take lock 'k': only 0 of 1 replica(s) \
                              acknowledged the lock within 300ms (--min-replicas); released it";

/// A master whose only replica is stopped (SIGSTOP): it takes writes, and nobody acknowledges
/// them.
fn master_without_its_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let replica = replica_of(&master);
    replica.pause();
    (master, replica)
}

#[test]
fn a_waiter_tries_again_until_a_replica_acknowledges_the_lock() {
    let (master, replica) = master_without_its_replica();
    let dir = TempDir::new();
    // A run before, without --min-replicas: the wait must not push it out.
    Redlock::run(&master).key("k").sh("true").status(0).output();
    let before = waits(&master);
    let waiter = Redlock::run(&master)
        .key("k")
        .ttl("3s")
        .wait("30s")
        .args(["--min-replicas", "1"])
        .sh(&marker_script(&dir))
        .spawn();
    // Four takes given back (300 ms of WAIT each, and the pauses between): about 2 s.
    wait_until(PATIENCE, "four takes no replica acknowledged", || {
        waits(&master) >= before + 4
    });
    assert!(!dir.join("marker").exists(), "ran without a replica");
    replica.resume();
    let out = waiter.finish();
    out.assert_code(0);
    out.assert_stderr_prefixed();
    assert!(dir.join("marker").exists());
    // One run for the waiter, however many takes it gave back, counted once: no run of its
    // takes given back is left, nor counted unavailable.
    let runs = history(&master);
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert!(
        runs.iter().all(|r| r.contains(r#""outcome":"success""#)),
        "{runs:#?}"
    );
    assert_eq!(counted(&master, "success"), 2);
    assert_eq!(counted(&master, "unavailable"), 0);
    // Each take given back gave its number back too: the waiter's run is the second, and the
    // ring lost no earlier run to its takes.
    let head: Option<String> = redis::cmd("HGET")
        .arg(format!("{}:counts", lock_key("k")))
        .arg("head")
        .query(&mut master.conn())
        .unwrap();
    assert_eq!(head.as_deref(), Some("2 "));
    // One warning for every take given back, not one each.
    let warning = format!(
        "{}; retrying until the wait ends (--wait 30s)",
        UNACKNOWLEDGED.replacen("redlock: ", "redlock: warning: ", 1)
    );
    assert_eq!(out.stderr, format!("{warning}\n"), "in {:?}", out.elapsed);
    assert_eq!(master.get(&lock_key("k")), None);
}

#[test]
fn too_few_replicas_is_69_at_once_without_a_wait_and_at_its_end_with_one() {
    let (master, _replica) = master_without_its_replica();
    let dir = TempDir::new();
    let run = || {
        Redlock::run(&master)
            .key("k")
            .ttl("3s")
            .args(["--min-replicas", "1"])
            .sh(&marker_script(&dir))
            .status(69)
    };
    // No --wait: the one take, given back, is the end (300 ms of WAIT).
    let at_once = run().stderr(&format!("{UNACKNOWLEDGED}\n")).output();
    assert!(at_once.elapsed < Duration::from_secs(2), "{at_once:?}");
    let unavailable = r#""outcome":"unavailable","exit_status":69"#;
    let runs = history(&master);
    assert!(
        runs.len() == 1 && runs[0].contains(unavailable),
        "{runs:#?}"
    );
    assert_eq!(counted(&master, "unavailable"), 1);
    // --wait 2s: tried again to the end of the wait, said once, then the same line.
    let waited = run()
        .wait("2s")
        .stderr_prefixed()
        .stderr_lines(2)
        .stderr_contains("warning: cannot take lock 'k': only 0 of 1 replica(s)")
        .output();
    assert_eq!(
        waited.stderr.lines().last(),
        Some(UNACKNOWLEDGED),
        "{waited:?}"
    );
    // As docs/messages.md quotes it.
    assert_snapshot("min-replicas-wait.stderr", &waited.stderr, &[]);
    assert!(
        (Duration::from_secs(2)..Duration::from_secs(10)).contains(&waited.elapsed),
        "{waited:?}"
    );
    assert!(!dir.join("marker").exists());
    assert_eq!(master.get(&lock_key("k")), None);
    // The wait's many takes are one run, unavailable, counted once.
    let runs = history(&master);
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert!(runs.iter().all(|r| r.contains(unavailable)), "{runs:#?}");
    assert_eq!(counted(&master, "unavailable"), 2);
}

/// A quorum whose nodes have no replica at all, under `--min-replicas 1`: no node's take is
/// acknowledged, so no attempt reaches a majority, and each is undone on every node. A quorum
/// records no run for an attempt that fell short: the wait's many attempts leave none on any
/// node, and move no counter.
#[test]
fn a_quorum_wait_through_too_few_replicas_leaves_no_run_on_any_node() {
    let servers = start_servers(3);
    let dir = TempDir::new();
    let before: Vec<u64> = servers.iter().map(waits).collect();
    Redlock::run_quorum(&servers)
        .key("k")
        .ttl("3s")
        .wait("2s")
        .args(["--min-replicas", "1"])
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    assert!(!dir.join("marker").exists());
    for (server, before) in servers.iter().zip(before) {
        // Tried again and again, on every node.
        assert!(waits(server) >= before + 3, "{}", server.url());
        assert_eq!(history(server), Vec::<String>::new(), "{}", server.url());
        assert_eq!(counted(server, "unavailable"), 0, "{}", server.url());
    }
}

/// A semaphore's place is given back the same way: a `--limit` run whose wait runs out through
/// too few replicas is one unavailable run too.
#[test]
fn a_semaphore_wait_through_too_few_replicas_is_one_run() {
    let (master, _replica) = master_without_its_replica();
    Redlock::run(&master)
        .key("k")
        .ttl("3s")
        .wait("2s")
        .args(["--limit", "2", "--min-replicas", "1"])
        .sh("true")
        .status(69)
        .any_stderr()
        .output();
    let runs = history(&master);
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert!(runs[0].contains(r#""outcome":"unavailable","exit_status":69"#));
    assert_eq!(counted(&master, "unavailable"), 1);
}
