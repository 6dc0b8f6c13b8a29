//! Waiting for a busy lock: a release wakes a waiter at once, waiting costs Redis almost
//! nothing (one connection per waiter, an acquire and a BLPOP per period), one release wakes
//! one waiter (no herd), and a waiter that dies, gives up or is stopped does not hold up the
//! rest; on a quorum, the node a waiter blocks on wakes it even when that node let it in.
//! `--fair` is in `fair.rs`, with the helpers here.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;

/// A waiter that missed its wake-up would retry only after 20 s (WAKE_CAP) with a ttl this long,
/// so anything much faster than that was woken by the release.
pub(super) const LONG_TTL: &str = "60s";
pub(super) const WOKEN_WITHIN: Duration = Duration::from_secs(5);

/// A command that appends `i` to `order` and stamps its start in `<i>.start`.
pub(super) fn log_script(dir: &TempDir, i: usize) -> String {
    format!(
        "echo {i} >> {order}; date +%s%N > {start}",
        order = dir.sh("order"),
        start = dir.sh(&format!("{i}.start"))
    )
}

/// Like [`hold_script`], and stamps its end in `<tag>.end` when let go.
pub(super) fn hold_then_stamp(dir: &TempDir, tag: &str) -> String {
    format!(
        "{}; date +%s%N > {end}",
        hold_script(dir, tag),
        end = dir.sh(&format!("{tag}.end"))
    )
}

pub(super) fn lines(dir: &TempDir, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

pub(super) fn gap(dir: &TempDir, before: &str, after: &str) -> Duration {
    let ns = read_stamps(&dir.join(after))[0] - read_stamps(&dir.join(before))[0];
    Duration::from_nanos(u64::try_from(ns).expect("started before the holder ended"))
}

pub(super) fn zcard(redis: &RedisServer, key: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query(&mut redis.conn())
        .unwrap()
}

pub(super) fn queue_key(name: &str) -> String {
    format!("{}:queue", lock_key(name))
}

/// A holder of `key` (with `ttl` and `args`; touching `KEY.go` in `dir` lets it go) and a
/// waiter with the same, `--wait 60s`, blocked behind it; the waiter runs `log_script(dir, 0)`.
fn a_waiter_blocked_behind_a_holder(
    redis: &RedisServer,
    dir: &TempDir,
    key: &str,
    ttl: &str,
    args: &[&str],
) -> (Proc, Proc) {
    let (holder, _) = Redlock::run(redis)
        .key(key)
        .ttl(ttl)
        .args(args)
        .hold(dir, key);
    let waiter = Redlock::run(redis)
        .key(key)
        .ttl(ttl)
        .args(args)
        .wait("60s")
        .sh(&log_script(dir, 0))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });
    (holder, waiter)
}

/// One command MONITOR saw: the client that sent it (`127.0.0.1:PORT`, or `lua` inside a
/// script) and its words, unquoted (escapes left as they are).
struct Seen {
    client: String,
    words: Vec<String>,
}

/// Every command the server runs from now on, as MONITOR reports them.
fn monitor(redis: &RedisServer) -> mpsc::Receiver<Seen> {
    let mut conn = redis.conn();
    redis::cmd("MONITOR").exec(&mut conn).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // `1700000000.123456 [0 127.0.0.1:4321] "EVALSHA" "abc" "7" ...`, until the server goes.
        while let Ok(redis::Value::SimpleString(line)) = conn.recv_response() {
            let Some((client, rest)) = line
                .split_once(" [")
                .and_then(|(_, rest)| rest.split_once("] "))
            else {
                continue;
            };
            let client = client.split_once(' ').map_or(client, |(_, c)| c).to_owned();
            let words = rest
                .split("\" \"")
                .map(|w| w.trim_matches('"').to_owned())
                .collect();
            if tx.send(Seen { client, words }).is_err() {
                return;
            }
        }
    });
    rx
}

#[test]
fn a_release_wakes_the_waiter_long_before_its_fallback_retry() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Redlock::run(&redis)
        .key("wake")
        .ttl(LONG_TTL)
        .sh(&hold_then_stamp(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let waiter = Redlock::run(&redis)
        .key("wake")
        .ttl(LONG_TTL)
        .wait("60s")
        .sh(&log_script(&dir, 0))
        .spawn();
    wait_until(PATIENCE, "the waiter to block on its wake list", || {
        redis.info_field("blocked_clients") == 1
    });

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    let gap = gap(&dir, "h.end", "0.start");
    assert!(
        gap < WOKEN_WITHIN,
        "the waiter started {gap:?} after the release"
    );
}

#[test]
fn waiting_costs_almost_nothing_and_a_release_wakes_one_waiter() {
    const N: usize = 10;
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("herd").hold(&dir, "h");
    // Each waiter holds the lock until `go` exists, so the next one can be counted.
    let go = dir.sh("go");
    let waiters: Vec<Proc> = (0..N)
        .map(|i| {
            let script = format!(
                "{}; while [ ! -e {go} ]; do sleep 0.02; done",
                log_script(&dir, i)
            );
            Redlock::run(&redis)
                .key("herd")
                .wait("forever")
                .sh(&script)
                .spawn()
        })
        .collect();
    wait_until(PATIENCE, "every waiter to block", || {
        redis.info_field("blocked_clients") == N as u64
    });

    // Waiting: no requests at all from ten blocked waiters (the holder may renew once).
    redis.reset_stats();
    std::thread::sleep(Duration::from_secs(3));
    let idle_calls = redis.client_calls();
    assert!(
        idle_calls <= 1,
        "{idle_calls} requests in 3 s from {N} waiting redlocks"
    );

    // A release: the holder's release, one waiter's wake-up and acquire; the others sleep on.
    redis.reset_stats();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    wait_until(PATIENCE, "a waiter to take the lock", || {
        lines(&dir, "order").len() == 1
    });
    std::thread::sleep(Duration::from_millis(500));
    let release_calls = redis.client_calls();
    assert!(
        release_calls <= 4,
        "{release_calls} requests for one release with {N} waiters"
    );
    assert_eq!(redis.info_field("blocked_clients"), N as u64 - 1);
    assert_eq!(lines(&dir, "order").len(), 1, "two waiters ran at once");

    // Each release hands over to the next waiter straight away: the chain takes nowhere near
    // the 20 s per hop a missed wake-up would cost.
    let started = Instant::now();
    touch(&dir.join("go"));
    for waiter in waiters {
        waiter.finish().assert_code(0);
    }
    let mut order = lines(&dir, "order");
    order.sort();
    order.dedup();
    assert_eq!(order.len(), N, "every waiter ran once");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{N} hand-overs took {:?}",
        started.elapsed()
    );
}

/// The whole cost of a blocked waiter, seen by MONITOR: one attempt (EVALSHA) and one BLPOP,
/// over the same connection, the BLPOP for 20 s: at most 0.1 requests a second. Then nothing.
#[test]
fn a_waiter_sends_an_acquire_and_a_20_s_blpop_over_one_connection() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // The default 30 s ttl, renewed every 10 s: a waiter always sees at least 20 s left.
    let (holder, _) = Redlock::run(&redis).key("cost").hold(&dir, "h");
    let seen = monitor(&redis);
    let waiter = Redlock::run(&redis)
        .key("cost")
        .wait("forever")
        .sh("true")
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });
    std::thread::sleep(Duration::from_secs(3));

    let seen: Vec<Seen> = seen.try_iter().collect();
    let pid = waiter.pid().to_string();
    let requests: Vec<&Seen> = seen
        .iter()
        .filter(|s| ["EVALSHA", "EVAL", "BLPOP"].contains(&s.words[0].to_uppercase().as_str()))
        .collect();
    let blpop = requests
        .iter()
        .find(|s| s.words[0].eq_ignore_ascii_case("BLPOP"))
        .expect("no BLPOP seen");
    let from_waiter: Vec<&str> = requests
        .iter()
        .filter(|s| s.client == blpop.client)
        .map(|s| s.words[0].as_str())
        .collect();
    assert_eq!(
        from_waiter
            .iter()
            .map(|w| w.to_uppercase())
            .collect::<Vec<_>>(),
        ["EVALSHA", "BLPOP"],
        "the waiter's requests in 3 s"
    );
    // Its acquire (which carries its pid) came over the connection it blocks on.
    let acquires: Vec<&str> = requests
        .iter()
        .filter(|s| s.words.contains(&pid))
        .map(|s| s.client.as_str())
        .collect();
    assert_eq!(acquires, [blpop.client.as_str()], "the waiter's acquires");
    let timeout: f64 = blpop.words.last().unwrap().parse().unwrap();
    assert!(
        (20.0..21.0).contains(&timeout),
        "BLPOP for {timeout} s: two requests per period cost {:.3} a second",
        2.0 / timeout
    );

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
}

/// The `qbuf=` (bytes waiting in the query buffer) of each client blocked in a BLPOP, from
/// CLIENT LIST.
fn blocked_query_buffers(redis: &RedisServer) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut redis.conn())
        .unwrap();
    list.lines()
        .filter(|l| l.contains(" cmd=blpop "))
        .map(|l| {
            let qbuf = l.split(' ').find_map(|f| f.strip_prefix("qbuf="));
            qbuf.expect("CLIENT LIST gives qbuf").parse().unwrap()
        })
        .collect()
}

/// A plain waiter's next attempt waits in Redis behind its BLPOP (the same request), so that
/// the wake-up is followed by the take at once, without a round trip; a `--fair` waiter's
/// goes after the wake-up. Either way the release hands over, and the record has both runs.
#[test]
fn a_plain_waiters_attempt_waits_behind_its_blpop_in_redis() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for (key, opts) in [("plain", vec![]), ("fair", vec!["--fair"])] {
        let (holder, waiter) = a_waiter_blocked_behind_a_holder(&redis, &dir, key, "30s", &opts);
        let behind = blocked_query_buffers(&redis);
        assert_eq!(behind.len(), 1, "{key}: one blocked client");
        if key == "plain" {
            // The EVALSHA of the take, with its KEYS and ARGV: a few hundred bytes.
            assert!(
                behind[0] > 100,
                "{key}: nothing behind the BLPOP ({behind:?})"
            );
        } else {
            assert_eq!(behind[0], 0, "{key}: a request behind the BLPOP");
        }
        touch(&dir.join(&format!("{key}.go")));
        holder.finish().assert_code(0);
        waiter.finish().assert_code(0);
        assert_eq!(lines(&dir, "order"), ["0"], "{key}: the waiter ran once");
        std::fs::remove_file(dir.join("order")).unwrap();
        let successes: Option<u64> = redis::cmd("HGET")
            .arg(format!("{}:counts", lock_key(key)))
            .arg("success")
            .query(&mut redis.conn())
            .unwrap();
        assert_eq!(successes, Some(2), "{key}: both runs recorded");
    }
}

/// A waiter frozen behind its block: the release wakes it, and Redis runs the attempt queued
/// behind the BLPOP for it, so it takes the lock while it cannot run anything. Its lease runs
/// out; once continued it takes the lock anew and runs. The record says what happened: the
/// first take vanished (a lease that ended without a release), then one success, and nothing
/// is left open (before, the lapsed take stayed a run that never ended).
#[test]
fn a_waiter_frozen_behind_its_block_leaves_a_vanished_run_and_then_runs() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, waiter) = a_waiter_blocked_behind_a_holder(&redis, &dir, "frozen", "1s", &[]);
    waiter.signal(Signal::SIGSTOP);
    touch(&dir.join("frozen.go"));
    holder.finish().assert_code(0);
    // The attempt behind the block took the lock for the frozen waiter; it lapses.
    wait_until(PATIENCE, "the frozen waiter's lease to run out", || {
        redis.get(&lock_key("frozen")).is_none()
    });
    waiter.signal(Signal::SIGCONT);
    let out = waiter.finish();
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(lines(&dir, "order"), ["0"]);
    let counts = format!("{}:counts", lock_key("frozen"));
    let count = |field: &str| -> Option<u64> {
        redis::cmd("HGET")
            .arg(&counts)
            .arg(field)
            .query(&mut redis.conn())
            .unwrap()
    };
    assert_eq!(
        count("success"),
        Some(2),
        "the holder's run and the waiter's"
    );
    assert_eq!(count("vanished"), Some(1), "the lapsed take");
    let head: String = redis::cmd("HGET")
        .arg(&counts)
        .arg("head")
        .query(&mut redis.conn())
        .unwrap();
    assert!(head.ends_with(' '), "a run left open: head {head:?}");
}

/// Blocked waiters, plain and `--fair`, hold one connection each, not two: Redis's
/// `maxclients` (10,000 by default) caps a fleet of waiters at that many, not half.
#[test]
fn a_blocked_waiter_holds_one_connection() {
    const N: usize = 4;
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let mut holders = Vec::new();
    let mut waiters = Vec::new();
    for (key, opts) in [("plain", vec![]), ("fair", vec!["--fair"])] {
        holders.push(Redlock::run(&redis).key(key).hold(&dir, key).0);
        for _ in 0..N {
            waiters.push(
                Redlock::run(&redis)
                    .key(key)
                    .args(&opts)
                    .wait("forever")
                    .sh("true")
                    .spawn(),
            );
        }
    }
    wait_until(PATIENCE, "every waiter to block", || {
        redis.info_field("blocked_clients") == 2 * N as u64
    });
    // Each holds one connection. (Polled, not read once: on a loaded machine a --fair waiter's
    // 1.5 s BLPOP can be answered past its read timeout, and the connection is then replaced.)
    for waiter in &waiters {
        let mut seen = 0;
        wait_until(PATIENCE, "each waiter to hold one connection", || {
            seen = tcp_connections(waiter.pid(), redis.port());
            seen == 1
        });
        assert_eq!(seen, 1);
    }
    // The server's count too: the waiters, the two holders and the connection asking.
    wait_until(Duration::from_secs(5), "2N + 3 clients", || {
        redis.info_field("connected_clients") == 2 * N as u64 + 3
    });

    for key in ["plain", "fair"] {
        touch(&dir.join(&format!("{key}.go")));
    }
    for proc in holders.into_iter().chain(waiters) {
        proc.finish().assert_code(0);
    }
}

/// A stop while blocked on the wake list is heard at once, although the BLPOP's connection is
/// the waiter's only one; and the wake-up the waiter passes on as it leaves reaches the next
/// waiter, not its own BLPOP, which has blocked longest (else the next would sit ~20 s).
#[test]
fn a_waiter_stopped_while_blocked_exits_at_once_and_passes_the_wake_up_on() {
    for fair in [false, true] {
        let redis = RedisServer::start();
        let dir = TempDir::new();
        let key = "stop";
        // Someone else's lock, for a minute: only a wake-up lets a waiter in sooner than 20 s.
        redis::cmd("SET")
            .arg(lock_key(key))
            .arg("someone")
            .arg("PX")
            .arg(60_000)
            .exec(&mut redis.conn())
            .unwrap();
        let opts: &[&str] = if fair { &["--fair"] } else { &[] };
        let waiter = |i| {
            Redlock::run(&redis)
                .key(key)
                .args(opts)
                .wait("forever")
                .sh(&log_script(&dir, i))
                .spawn()
        };
        let first = waiter(0);
        wait_until(PATIENCE, "the first waiter to block", || {
            redis.info_field("blocked_clients") == 1
        });
        let second = waiter(1);
        wait_until(PATIENCE, "the second waiter to block", || {
            redis.info_field("blocked_clients") == 2
        });
        // Freed without a release: nobody is woken.
        redis.del(&lock_key(key));

        let mut first = first;
        let sent = Instant::now();
        first.signal(Signal::SIGTERM);
        first.wait_timeout(PATIENCE);
        let took = sent.elapsed();
        first.finish().assert_signal(15);
        assert!(
            took < Duration::from_secs(1),
            "fair {fair}: exited {took:?} after TERM"
        );
        let left = Instant::now();
        second.finish().assert_code(0);
        assert!(
            left.elapsed() < WOKEN_WITHIN,
            "fair {fair}: the next waiter ran {:?} after the first left",
            left.elapsed()
        );
        assert_eq!(lines(&dir, "order"), ["1"], "fair {fair}");
        assert_eq!(zcard(&redis, &queue_key(key)), 0, "fair {fair}");
    }
}

#[test]
fn a_holder_that_dies_hands_over_when_its_lease_runs_out() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, waiter) = a_waiter_blocked_behind_a_holder(&redis, &dir, "crash", "2s", &[]);

    let killed = now_ns();
    holder.signal(Signal::SIGKILL);
    holder.finish().assert_signal(9);
    waiter.finish().assert_code(0);
    let after = read_stamps(&dir.join("0.start"))[0] - killed;
    // Nobody released, so no wake-up: the waiter's own retry, bounded by the holder's
    // remaining lease (at most 2 s), takes over.
    assert!(
        after < 4_000_000_000,
        "took over {}ms after the holder died",
        after / 1_000_000
    );
}

/// The waiter ran (`echo woken`, exit 0) well before its fallback timer, min(ttl, 20 s), would
/// have tried again after `released`: it was woken.
#[track_caller]
fn ran_soon_after(waiter: Proc, released: Instant) {
    let out = waiter.finish();
    let took = released.elapsed();
    out.assert_code(0);
    assert_eq!(out.stdout, "woken\n");
    assert!(
        took < Duration::from_secs(8),
        "woken {took:?} after the release"
    );
}

/// The nodes of `servers` by name, as a quorum orders them.
fn by_name(servers: &[RedisServer]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..servers.len()).collect();
    order.sort_by_key(|&i| servers[i].url());
    order
}

/// A waiter that a node let in (the holder's key there was lost) and the others turned away
/// blocks on the first of those by name, and the holder's release wakes it: a release wakes
/// only a waiter it knows of, so the quorum's undo of that partial acquire records the waiter
/// as waiting on every node.
#[test]
fn a_quorum_waiter_blocks_on_a_node_that_turned_it_away_and_is_woken_there() {
    let dir = TempDir::new();
    let servers = start_servers(3);
    let order = by_name(&servers);
    let (holder, _) = Redlock::run_quorum(&servers)
        .key("q")
        .ttl(LONG_TTL)
        .hold(&dir, "a");
    // The first node loses the holder's key (restarted empty, say); the others keep a majority.
    servers[order[0]].del(&lock_key("q"));
    let waiter = Redlock::run_quorum(&servers)
        .key("q")
        .ttl(LONG_TTL)
        .wait("60s")
        .sh("echo woken")
        .spawn();
    wait_until(
        PATIENCE,
        "the waiter to block on the first node that turned it away",
        || servers[order[1]].info_field("blocked_clients") == 1,
    );
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    let released = Instant::now();
    ran_soon_after(waiter, released);
}

/// A quorum's release reaches its nodes one by one. A waiter woken by the first release to
/// land retries while the other nodes still hold the lock, and is turned away again; it must
/// then listen where the lock is still held, or the releases that follow there wake nobody
/// and it sits out its fallback timer (the ttl here, 60 s).
#[test]
fn a_quorum_waiter_woken_before_the_others_released_hears_their_release() {
    let servers = start_servers(3);
    let order = by_name(&servers);
    // Another owner holds the second and third node by name; the first is free.
    for &i in &order[1..] {
        redis::cmd("SET")
            .arg(lock_key("r"))
            .arg("someone")
            .arg("PX")
            .arg(60_000)
            .exec(&mut servers[i].conn())
            .unwrap();
    }
    let waiter = Redlock::run_quorum(&servers)
        .key("r")
        .ttl(LONG_TTL)
        .wait("60s")
        .sh("echo woken")
        .spawn();
    let blocked = || {
        servers
            .iter()
            .map(|s| s.info_field("blocked_clients"))
            .sum::<u64>()
    };
    wait_until(PATIENCE, "the waiter to block", || blocked() == 1);
    // The first node's release lands first: its wake-up, pushed as a release pushes it.
    let wake = format!("{}:wake", lock_key("r"));
    redis::cmd("RPUSH")
        .arg(&wake)
        .arg("1")
        .exec(&mut servers[order[0]].conn())
        .unwrap();
    // The waiter, if it listened there, took it, tried, and was turned away again.
    let first = &servers[order[0]];
    let llen = || -> u64 {
        redis::cmd("LLEN")
            .arg(&wake)
            .query(&mut first.conn())
            .unwrap()
    };
    wait_until(PATIENCE, "the waiter to block again", || {
        servers[order[1]].info_field("blocked_clients") == 1
            || (llen() == 0 && first.info_field("blocked_clients") == 1)
    });
    // Then the other nodes release, one after the other.
    let released = Instant::now();
    for &i in &order[1..] {
        Redlock::admin_at("release", &servers[i].url())
            .key("r")
            .arg("--force")
            .stdout_contains("released lock 'r'")
            .output();
    }
    ran_soon_after(waiter, released);
}
