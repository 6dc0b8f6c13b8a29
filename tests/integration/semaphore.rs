//! More than one holder: `--limit N` (a semaphore) and `--shared` (readers and a writer).
//! N at once and no more, each with its own token and fencing token; a freed slot wakes a
//! waiter; a crashed holder's slot frees when its lease ends; clients that disagree on how a
//! lock is held are refused with 64 and run nothing; shared holders overlap, an exclusive one
//! is alone and not starved; the same through Sentinel and on a Cluster.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redis::Commands;

use super::topology::*;
use crate::common::*;

/// Members of the lock's sorted set (the holders' tokens), when several hold it.
fn holders(redis: &RedisServer, name: &str) -> Vec<String> {
    redis
        .conn()
        .zrange(lock_key(name), 0, -1)
        .expect("ZRANGE on the lock key")
}

/// The keys of lock `name` still in Redis, but its fencing counter, a wake-up that lingers a
/// few seconds for a waiter that may come, and the record of its runs (by design). A released
/// semaphore leaves no set, no kind and no holders' details behind.
fn left_behind(redis: &RedisServer, name: &str) -> Vec<String> {
    let keep = [
        fence_key(name),
        format!("{}:wake", lock_key(name)),
        format!("{}:runs", lock_key(name)),
        format!("{}:counts", lock_key(name)),
    ];
    redis
        .all_keys()
        .into_iter()
        .map(|k| k.trim_start_matches("db0:").to_owned())
        .filter(|k| !keep.contains(k))
        .collect()
}

/// A command that appends `+ <ns> <fence>` when it starts and `- <ns> <fence>` when it ends to
/// `log`, running `secs` in between.
fn logged(dir: &TempDir, secs: &str) -> String {
    let log = dir.sh("log");
    format!(
        "echo \"+ $(date +%s%N) $REDLOCK_FENCING_TOKEN\" >> {log}; sleep {secs}; \
         echo \"- $(date +%s%N) $REDLOCK_FENCING_TOKEN\" >> {log}"
    )
}

/// The log's events in time order: (ns, starting, fence).
fn events(dir: &TempDir) -> Vec<(i128, bool, i64)> {
    let mut events: Vec<_> = read(&dir.join("log"))
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f[1].parse().unwrap(), f[0] == "+", f[2].parse().unwrap())
        })
        .collect();
    events.sort();
    events
}

/// The most commands running at once in the log.
fn most_at_once(events: &[(i128, bool, i64)]) -> i32 {
    let mut running = 0;
    let mut most = 0;
    for (_, starting, _) in events {
        running += if *starting { 1 } else { -1 };
        most = most.max(running);
    }
    most
}

#[test]
fn limit_lets_n_in_and_turns_the_next_away() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let hold = |tag: &str| {
        Redlock::run(&redis)
            .key("dumps")
            .args(["--limit", "3"])
            .hold(&dir, tag)
    };
    let (a, ta) = hold("a");
    let (b, tb) = hold("b");
    let (c, tc) = hold("c");
    let mut tokens = holders(&redis, "dumps");
    tokens.sort();
    let mut want = vec![ta, tb, tc.clone()];
    want.sort();
    assert_eq!(tokens, want, "each holder's token is a member of the set");
    let fences: Vec<i64> = ["a", "b", "c"]
        .iter()
        .map(|t| fencing_token(&wait_for_line(&dir.join(&format!("{t}.fence")))))
        .collect();
    // One fencing token per holder, in order.
    assert_increasing(&fences);

    // The fourth is turned away at once and runs nothing.
    Redlock::run(&redis)
        .key("dumps")
        .args(["--limit", "3", "-v"])
        .sh(&marker_script(&dir))
        .status(75)
        .stderr_contains("lock 'dumps' has all 3 slots held by other runs (--limit 3); gave up at once (no --wait)")
        .output();
    assert!(!dir.join("marker").exists(), "a fourth ran beside three");

    // A freed slot takes the next one, with the next fencing token.
    touch(&dir.join("c.go"));
    c.finish().assert_code(0);
    assert!(!holders(&redis, "dumps").contains(&tc), "c's slot is freed");
    let (d, _) = hold("d");
    let next = fencing_token(&wait_for_line(&dir.join("d.fence")));
    assert_increasing(&[fences[2], next]);
    for (p, tag) in [(a, "a"), (b, "b"), (d, "d")] {
        touch(&dir.join(&format!("{tag}.go")));
        p.finish().assert_code(0);
    }
    assert_eq!(
        left_behind(&redis, "dumps"),
        Vec::<String>::new(),
        "nothing left but the counter"
    );
}

#[test]
fn a_freed_slot_wakes_a_waiter_at_once() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let limit = |r: Redlock| r.key("slots").args(["--limit", "2"]);
    let (a, _) = limit(Redlock::run(&redis)).hold(&dir, "a");
    let (b, _) = limit(Redlock::run(&redis)).hold(&dir, "b");
    // A 60 s ttl: without a wake-up the waiter would try again only after 20 s.
    let waiter = limit(Redlock::run(&redis))
        .ttl("60s")
        .wait("60s")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });
    let released = Instant::now();
    touch(&dir.join("a.go"));
    a.finish().assert_code(0);
    waiter.finish().assert_code(0);
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "the waiter got the freed slot after {took:?}: not woken"
    );
    touch(&dir.join("b.go"));
    b.finish().assert_code(0);
}

#[test]
fn many_contenders_never_exceed_the_limit_and_fencing_only_grows() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let procs: Vec<Proc> = (0..10)
        .map(|_| {
            Redlock::run(&redis)
                .key("pool")
                .args(["--limit", "3"])
                .ttl("5s")
                .wait("60s")
                .sh(&logged(&dir, "0.3"))
                .spawn()
        })
        .collect();
    for p in procs {
        p.finish().assert_code(0);
    }
    let events = events(&dir);
    assert_eq!(events.len(), 20, "every contender ran once");
    let most = most_at_once(&events);
    assert!(most <= 3, "{most} ran at once with --limit 3");
    assert!(
        most >= 2,
        "never more than {most} at once: no semaphore at work"
    );
    let fences: Vec<i64> = events.iter().filter(|e| e.1).map(|e| e.2).collect();
    let mut sorted = fences.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 10, "fencing tokens {fences:?}");
    for fence in &fences {
        fencing_token(&fence.to_string());
    }
    assert_eq!(left_behind(&redis, "pool"), Vec::<String>::new());
}

#[test]
fn clients_that_disagree_are_refused_with_64_and_run_nothing() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let refused = |kind: &[&str], held_as: &str| {
        Redlock::run(&redis)
            .key("k")
            .args(kind)
            .wait("5s")
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains(held_as)
            .stderr_lines(1)
            .output();
        assert!(!dir.join("marker").exists(), "ran with {kind:?}");
    };

    // A semaphore of 3 holds it: a plain lock, another N and --shared are refused.
    let (sem, token) = Redlock::run(&redis)
        .key("k")
        .args(["--limit", "3"])
        .hold(&dir, "s");
    refused(&[], "held as a semaphore of 3 (--limit 3)");
    refused(&["--limit", "2"], "asks for a semaphore of 2 (--limit 2)");
    refused(&["--shared"], "held as a semaphore of 3");
    assert_eq!(
        holders(&redis, "k"),
        [token],
        "the holder's set was touched"
    );
    touch(&dir.join("s.go"));
    sem.finish().assert_code(0);

    // A plain lock holds it: a semaphore is refused (--shared waits for it instead).
    let (plain, token) = Redlock::run(&redis).key("k").hold(&dir, "p");
    refused(&["--limit", "1"], "held as an exclusive lock");
    assert_eq!(redis.get(&lock_key("k")), Some(token));
    touch(&dir.join("p.go"));
    plain.finish().assert_code(0);

    // Shared holders: a semaphore is refused.
    let (shared, _) = Redlock::run(&redis)
        .key("k")
        .arg("--shared")
        .hold(&dir, "r");
    refused(&["--limit", "4"], "held as shared (--shared)");
    touch(&dir.join("r.go"));
    shared.finish().assert_code(0);

    // Nobody holds it any more: any kind may take it.
    Redlock::run(&redis)
        .key("k")
        .args(["--limit", "2"])
        .sh("true")
        .status(0)
        .output();
}

#[test]
fn bad_limit_and_shared_options_are_usage_errors() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let servers = start_servers(3);
    for (args, says) in [
        (&["--limit", "0"][..], "--limit"),
        (&["--limit", "-1"], "--limit"),
        (&["--limit", "many"], "--limit"),
        (&["--limit", "2", "--shared"], "cannot be used with"),
        (&["--shared", "--fair"], "--shared does not take --fair"),
    ] {
        Redlock::run(&redis)
            .key("u")
            .args(args)
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains(says)
            .output();
    }
    for args in [&["--limit", "3"][..], &["--shared"]] {
        Redlock::run_quorum(&servers)
            .key("u")
            .args(args)
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains("do not work with several --url")
            .stderr_lines(1)
            .output();
    }
    assert!(!dir.join("marker").exists());
    assert_eq!(redis.all_keys(), Vec::<String>::new());
    assert!(servers.iter().all(|s| s.all_keys().is_empty()));
}

/// A holder killed outright (redlock and its command) releases nothing: its slot frees when its
/// lease ends, by the server's clock, and a waiter gets it then, not at its next retry.
#[test]
fn a_crashed_holders_slot_frees_when_its_lease_ends() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let limit = |r: Redlock| r.key("crash").args(["--limit", "2"]);
    let (crashed, _) = limit(Redlock::run(&redis)).ttl("2s").hold(&dir, "a");
    let (b, _) = limit(Redlock::run(&redis)).hold(&dir, "b");
    // A 60 s ttl: left to itself the waiter would retry only after 20 s.
    let waiter = limit(Redlock::run(&redis))
        .ttl("60s")
        .wait("60s")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });
    let command = wait_for_pid(&dir.join("a.pid"));
    kill(Pid::from_raw(crashed.pid()), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    // Its watchdog kills its command; nothing releases the slot.
    wait_pid_dead(command, PATIENCE);
    crashed.finish().assert_signal(9);
    assert_eq!(
        holders(&redis, "crash").len(),
        2,
        "the dead holder's slot is still counted"
    );
    waiter.finish().assert_code(0);
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "the waiter got the dead holder's slot {took:?} after the kill (lease 2s)"
    );
    touch(&dir.join("b.go"));
    b.finish().assert_code(0);
}

#[test]
fn a_holder_renews_its_slot_and_stops_its_command_when_the_slot_is_gone() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // Renewed past its ttl.
    Redlock::run(&redis)
        .key("renew")
        .args(["--limit", "2"])
        .ttl("900ms")
        .sh("sleep 2")
        .status(0)
        // A renewal slow on a loaded machine warns; nothing else is said.
        .stderr_prefixed()
        .output();
    // Its place removed (as release --force --token does): the next renewal finds it gone.
    let (holder, token) = Redlock::run(&redis)
        .key("renew")
        .args(["--limit", "2"])
        .ttl("1s")
        .hold(&dir, "h");
    let removed: i32 = redis.conn().zrem(lock_key("renew"), &token).unwrap();
    assert_eq!(removed, 1);
    let command = wait_for_pid(&dir.join("h.pid"));
    let out = holder.finish_within(PATIENCE);
    out.assert_code(76);
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
    assert!(!pid_alive(command), "the command outlived its slot");
}

/// A semaphore holder removed by `release --force --token` while another still holds the key
/// is told its place is gone, not the key (which it said, the key still there).
#[test]
fn a_semaphore_holder_removed_by_force_is_told_its_place_is_gone() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (a, token) = Redlock::run(&redis)
        .key("pool2")
        .args(["--limit", "2"])
        .ttl("1s")
        .hold(&dir, "a");
    let (b, _) = Redlock::run(&redis)
        .key("pool2")
        .args(["--limit", "2"])
        .ttl("1s")
        .hold(&dir, "b");
    Redlock::admin("release", &redis)
        .key("pool2")
        .args(["--force", "--token", &token])
        .status(0)
        .stdout_contains("1 holder(s) left")
        .output();
    let out = a.finish_within(PATIENCE);
    out.assert_code(76);
    assert!(
        out.stderr.contains(
            "redlock: lost lock 'pool2': its place in the semaphore is gone (removed, or its \
             lease ended); stopping the command\n"
        ),
        "{}",
        out.stderr
    );
    touch(&dir.join("b.go"));
    b.finish().assert_code(0);
}

#[test]
fn shared_holders_overlap_and_an_exclusive_one_is_alone_and_not_starved() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let shared = || Redlock::run(&redis).key("data").arg("--shared");
    let (r1, _) = shared().hold(&dir, "r1");
    let (r2, _) = shared().hold(&dir, "r2");
    assert_eq!(
        holders(&redis, "data").len(),
        2,
        "two shared holders at once"
    );
    // An exclusive client is turned away while they hold it.
    Redlock::run(&redis)
        .key("data")
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    assert!(!dir.join("marker").exists());
    // An exclusive waiter queues; a newcomer that shares no longer gets in ahead of it.
    let writer = Redlock::run(&redis)
        .key("data")
        .wait("60s")
        .sh(&logged(&dir, "0.5"))
        .spawn();
    wait_until(PATIENCE, "the exclusive waiter to queue", || {
        redis
            .conn()
            .zcard::<_, u64>("redlock:{data}:queue")
            .unwrap()
            == 1
    });
    shared()
        .sh(&marker_script(&dir))
        .status(75)
        .stderr_contains("promised to an exclusive waiter")
        .arg("-v")
        .output();
    assert!(
        !dir.join("marker").exists(),
        "a reader got in ahead of a waiting writer"
    );
    // Readers that wait go in after it, together.
    let readers: Vec<Proc> = (0..3)
        .map(|_| shared().wait("60s").sh(&logged(&dir, "0.5")).spawn())
        .collect();
    touch(&dir.join("r1.go"));
    touch(&dir.join("r2.go"));
    r1.finish().assert_code(0);
    r2.finish().assert_code(0);
    writer.finish().assert_code(0);
    for r in readers {
        r.finish().assert_code(0);
    }
    let events = events(&dir);
    assert_eq!(events.len(), 8);
    // The writer (the first in) ended before any reader started, and the readers overlapped.
    let writer_fence = events[0].2;
    assert!(
        events[0].1 && events[1] == (events[1].0, false, writer_fence),
        "{events:?}"
    );
    assert_eq!(
        most_at_once(&events[2..]),
        3,
        "the readers did not share: {events:?}"
    );
    assert_eq!(left_behind(&redis, "data"), Vec::<String>::new());
}

#[test]
fn fair_semaphore_waiters_go_in_arrival_order() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let fair = || {
        Redlock::run(&redis)
            .key("q")
            .args(["--limit", "2", "--fair"])
    };
    let (a, _) = fair().hold(&dir, "a");
    let (b, _) = fair().hold(&dir, "b");
    let mut waiters = Vec::new();
    for i in 0..4u64 {
        let log = dir.sh("order");
        waiters.push(
            fair()
                .wait("60s")
                .sh(&format!("echo {i} >> {log}; sleep 0.2"))
                .spawn(),
        );
        wait_until(PATIENCE, "the waiter to queue", || {
            redis.conn().zcard::<_, u64>("redlock:{q}:queue").unwrap() == i + 1
        });
    }
    touch(&dir.join("a.go"));
    touch(&dir.join("b.go"));
    a.finish().assert_code(0);
    b.finish().assert_code(0);
    for w in waiters {
        w.finish().assert_code(0);
    }
    // Two slots: the first two start in either order, then the next two.
    let order: Vec<String> = read(&dir.join("order"))
        .lines()
        .map(str::to_owned)
        .collect();
    let (first, then) = order.split_at(2);
    let mut first = first.to_vec();
    first.sort();
    let mut then = then.to_vec();
    then.sort();
    assert_eq!(
        (first, then),
        (vec!["0".into(), "1".into()], vec!["2".into(), "3".into()])
    );
}

#[test]
fn min_interval_max_runtime_metrics_and_json_logs_work_with_a_limit() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let metrics = dir.join("cron.prom");
    let limit = || Redlock::run(&redis).key("cron").args(["--limit", "2"]);
    limit()
        .args(["--min-interval", "1h", "--log-format", "json", "-v"])
        .sh("true")
        .status(0)
        .stderr_contains("\"event\":\"acquired\"")
        .stderr_contains("\"fence\":1")
        .output();
    limit()
        .args(["--min-interval", "1h"])
        .sh("echo ran")
        .status(75)
        .stdout("")
        .output();
    limit()
        .args(["--max-runtime", "300ms"])
        .arg("--metrics-file")
        .arg(&metrics)
        .sh("sleep 30")
        .status(124)
        .stderr("redlock: the command ran past --max-runtime; stopping it\n")
        .output();
    let text = read(&metrics);
    assert!(
        text.contains("redlock_exit_status{key=\"cron\"} 124"),
        "{text}"
    );
    assert_eq!(holders(&redis, "cron"), Vec::<String>::new());
}

#[test]
fn a_semaphore_through_sentinel_and_on_a_cluster() {
    let setup = SentinelSetup::start();
    let cluster = Cluster::start();
    let dir = TempDir::new();
    let key = "shared-pool";
    let slot = cluster.slot(&lock_key(key));
    let owner = cluster.owner(slot, 0);
    for (url, master, tag) in [
        (setup.url(), &setup.master, "s"),
        (
            cluster.url_of(&[(owner + 1) % 3]),
            &cluster.nodes[owner],
            "c",
        ),
    ] {
        let limit = || Redlock::run_at(&url).key(key).args(["--limit", "2"]);
        let (a, _) = limit().hold(&dir, &format!("{tag}a"));
        let (b, _) = limit().hold(&dir, &format!("{tag}b"));
        assert_eq!(holders(master, key).len(), 2, "both slots on the master");
        limit().sh(&marker_script(&dir)).status(75).output();
        let waiter = limit().wait("60s").ttl("60s").sh("true").spawn();
        wait_until(PATIENCE, "the waiter to block", || {
            master.info_field("blocked_clients") == 1
        });
        touch(&dir.join(&format!("{tag}a.go")));
        a.finish().assert_code(0);
        waiter.finish_within(Duration::from_secs(15)).assert_code(0);
        touch(&dir.join(&format!("{tag}b.go")));
        b.finish().assert_code(0);
        assert!(!dir.join("marker").exists());
        // Three acquisitions (a, b, the waiter): the counter is past both holders' tokens.
        let counter = fencing_token(&master.get(&fence_key(key)).unwrap());
        let held = |t: &str| fencing_token(&read(&dir.join(&format!("{tag}{t}.fence"))));
        assert_increasing(&[held("a"), held("b"), counter]);
    }
}

/// `--min-replicas` covers a slot as it covers a lock: taking it, and every renewal. A slot
/// no replica acknowledged is given back before the command could run (69), and a holder whose
/// renewals stop being acknowledged stops its command before its lease could end (76).
#[test]
fn min_replicas_covers_a_semaphores_slots() {
    let master = RedisServer::start();
    let replica = replica_of(&master);
    let dir = TempDir::new();
    let limit = || {
        Redlock::run(&master)
            .key("rep")
            .args(["--limit", "2", "--min-replicas", "1"])
            .ttl("1s")
    };
    // Renewed (and acknowledged) past its ttl.
    // A renewal slow on a loaded machine, or acknowledged late, warns; nothing else is said.
    limit().sh("sleep 2").stderr_prefixed().output();
    let (holder, token) = limit().hold(&dir, "h");
    wait_until(PATIENCE, "the slot on the replica", || {
        holders(&replica, "rep") == [token.clone()]
    });
    replica.pause();
    limit()
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("only 0 of 1 replica")
        .output();
    let left = holders(&master, "rep");
    let gone = holder.finish_within(PATIENCE);
    replica.resume();
    assert!(!dir.join("marker").exists(), "ran on a slot no replica had");
    // Only the holder's own place may be left (it may be stopped and gone by now).
    assert!(
        left.iter().all(|t| *t == token),
        "the unacknowledged slot was not given back: {left:?}"
    );
    gone.assert_code(76);
    assert!(gone.stderr.contains("--min-replicas"), "{}", gone.stderr);
}
