//! A quorum of independent masters (several --url): a minority down or paused still locks, a
//! majority down exits 69 and runs nothing, a node restarted empty under a hold is ridden out,
//! contenders never overlap and get strictly increasing fencing tokens, releases leave no lock
//! keys, a release wakes a waiter (blocked on one node, one connection to each), a stop while
//! waiting is heard at once, and the combinations that make no sense are usage errors. The
//! admin commands on a quorum are in quorum_admin.rs.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// The keys of `name` left on `server`, without its fencing counter and its wake list (which
/// lingers a few seconds after a release, by design).
pub(super) fn lock_keys_left(server: &RedisServer) -> Vec<String> {
    server
        .all_keys()
        .into_iter()
        // The fencing counter, a lingering wake-up and the record of runs stay, by design.
        .filter(|k| {
            !k.ends_with(":fence")
                && !k.ends_with(":wake")
                && !k.ends_with(":runs")
                && !k.ends_with(":counts")
        })
        .collect()
}

#[test]
fn a_minority_down_or_paused_still_locks() {
    for (n, killed, paused) in [(3, 1, 0), (5, 1, 1)] {
        let mut servers = start_servers(n);
        for server in &mut servers[..killed] {
            server.kill();
        }
        for server in &servers[killed..killed + paused] {
            server.pause();
        }
        let out = Redlock::run_quorum(&servers)
            .key("q")
            .ttl("2s")
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
            .output();
        let fence: i64 = out.stdout.trim().parse().expect("a fencing token");
        assert!(fence >= 1, "{fence}");
        for server in &servers[killed + paused..] {
            assert_eq!(lock_keys_left(server), Vec::<String>::new());
            assert_eq!(server.get(&fence_key("q")), Some(fence.to_string()));
        }
        for server in &servers[killed..killed + paused] {
            server.resume();
        }
    }
}

#[test]
fn a_majority_down_exits_69_and_runs_nothing() {
    let dir = TempDir::new();
    for (n, down) in [(3, 2), (5, 3)] {
        let mut servers = start_servers(n);
        for server in &mut servers[..down] {
            server.kill();
        }
        Redlock::run_quorum(&servers)
            .key("q")
            .ttl("2s")
            .sh(&marker_script(&dir))
            .status(69)
            .stderr_lines(1)
            .stderr_contains(&format!("only {} of {n} Redis nodes", n - down))
            .output();
        assert!(!dir.join("marker").exists(), "the command ran");
        // The live nodes granted the lock and were told to let go of it at once.
        for server in &servers[down..] {
            assert_eq!(lock_keys_left(server), Vec::<String>::new());
        }
    }
}

/// The README's exit table says it: with several --url, a node that found the lock held makes a
/// failed attempt busy (75), even when the others are down; only when none found it held is it
/// 69. One node held by another client, one down, one free: a split vote, 75 without --wait.
#[test]
fn a_split_vote_is_busy_not_unavailable() {
    let dir = TempDir::new();
    let mut servers = start_servers(3);
    let (holder, _) = Redlock::run(&servers[0]).key("q").hold(&dir, "a");
    servers[2].kill();
    Redlock::run_quorum(&servers)
        .key("q")
        .ttl("2s")
        .sh(&marker_script(&dir))
        .status(75)
        .stderr("")
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    // The free node's key went back at once.
    assert_eq!(lock_keys_left(&servers[1]), Vec::<String>::new());
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
}

#[test]
fn a_node_restarted_empty_under_a_hold_is_ridden_out() {
    let dir = TempDir::new();
    let mut servers = start_servers(3);
    let (holder, _) = Redlock::run_quorum(&servers)
        .key("q")
        .ttl("1s")
        .hold(&dir, "a");
    let first: i64 = wait_for_line(&dir.join("a.fence")).parse().unwrap();
    servers[0].restart();
    assert_eq!(servers[0].get(&lock_key("q")), None);
    // Renewals go on with two of three: the lease on the others keeps being extended well past
    // the 1 s ttl while the restarted node stays empty.
    for _ in 0..3 {
        wait_until(PATIENCE, "a renewal", || {
            servers[1].pttl(&lock_key("q")) > 800
        });
        wait_until(PATIENCE, "the lease to run down a little", || {
            servers[1].pttl(&lock_key("q")) <= 800
        });
    }
    assert_eq!(servers[0].get(&lock_key("q")), None);
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    // The next holder's token is still higher: the majority it reads includes a node that kept
    // the counter. The write-back catches the restarted node up.
    let out = Redlock::run_quorum(&servers)
        .key("q")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    let second: i64 = out.stdout.trim().parse().unwrap();
    assert!(second > first, "{second} after {first}");
    for server in &servers {
        assert_eq!(server.get(&fence_key("q")), Some(second.to_string()));
        assert_eq!(lock_keys_left(server), Vec::<String>::new());
    }

    // Two of three restarted empty: the majority is gone, the holder stops its command (76).
    let (holder, _) = Redlock::run_quorum(&servers)
        .key("q")
        .ttl("1s")
        .hold(&dir, "b");
    servers[0].restart();
    servers[1].restart();
    let out = holder.finish();
    out.assert_code(76);
    assert!(out.stderr.contains("lost lock 'q'"), "{}", out.stderr);
}

#[test]
fn a_silent_majority_under_a_hold_stops_the_command() {
    let dir = TempDir::new();
    let servers = start_servers(3);
    let (holder, _) = Redlock::run_quorum(&servers)
        .key("q")
        .ttl("1s")
        .hold(&dir, "a");
    let pid = wait_for_pid(&dir.join("a.pid"));
    // One node still renews, which is not a majority: the command is stopped before the lease
    // could run out, and redlock says the lock is lost.
    servers[0].pause();
    servers[1].pause();
    let out = holder.finish();
    servers[0].resume();
    servers[1].resume();
    out.assert_code(76);
    assert!(!pid_alive(pid), "the command outlived its lease");
    assert!(out.stderr.contains("only 1 of 3"), "{}", out.stderr);
}

#[test]
fn contenders_never_overlap_and_fencing_tokens_increase() {
    // All nodes up, then one down: with two of three left, contenders split votes often.
    for down in [0, 1] {
        let dir = TempDir::new();
        let mut servers = start_servers(3);
        for server in &mut servers[..down] {
            server.kill();
        }
        // Inside the lock: mkdir fails if another holder is inside too; the token is appended
        // in the order the holders ran.
        let script = format!(
            "mkdir {inside} || echo overlap >> {overlap}; echo $REDLOCK_FENCING_TOKEN >> {tokens}; \
             sleep 0.05; rmdir {inside}",
            inside = dir.sh("inside"),
            overlap = dir.sh("overlap"),
            tokens = dir.sh("tokens"),
        );
        let contenders: Vec<Proc> = (0..6)
            .map(|_| {
                Redlock::run_quorum(&servers)
                    .key("q")
                    .ttl("2s")
                    .wait("15s")
                    .sh(&script)
                    .spawn()
            })
            .collect();
        for contender in contenders {
            contender.finish().assert_code(0);
        }
        assert!(!dir.join("overlap").exists(), "two holders at once");
        let tokens: Vec<i64> = read(&dir.join("tokens"))
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(tokens.len(), 6);
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "tokens not increasing: {tokens:?}"
        );
        for server in &servers[down..] {
            assert_eq!(lock_keys_left(server), Vec::<String>::new());
        }
    }
}

#[test]
fn fencing_tokens_increase_across_different_majorities() {
    let servers = start_servers(3);
    // The counters disagree: node 0 has seen many more acquisitions than the others.
    redis::cmd("SET")
        .arg(fence_key("q"))
        .arg(10)
        .exec(&mut servers[0].conn())
        .unwrap();
    let token = |servers: &[RedisServer]| {
        // --wait: a request to a paused node lands when it resumes, and its key (already
        // released elsewhere) may linger there until it expires.
        let out = Redlock::run_quorum(servers)
            .key("q")
            .ttl("2s")
            .wait("10s")
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
            .output();
        out.stdout.trim().parse::<i64>().unwrap()
    };
    // A runs on nodes 0 and 1 (node 2 silent), B on nodes 1 and 2 (node 0 silent): B never
    // talks to the node that gave A its high token, and must still get a higher one.
    servers[2].pause();
    let a = token(&servers);
    servers[2].resume();
    servers[0].pause();
    let b = token(&servers);
    servers[0].resume();
    assert!(a > 10, "{a}");
    assert!(b > a, "B got {b} after A's {a}");
}

/// Tokens go on rising past 2^53, where a Lua number is no longer exact: every node's counter
/// set there (by hand, or after a long life of its own), each run gets a larger token than
/// the last, and the last possible one is the largest 64-bit integer.
#[test]
fn quorum_fencing_tokens_rise_past_2_to_the_53() {
    let servers = start_servers(3);
    let token = || -> Option<i64> {
        let out = Redlock::run_quorum(&servers)
            .key("big")
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
            .any_status()
            .any_stderr()
            .output();
        out.stdout.trim().parse::<i64>().ok()
    };
    let set_counters = |value: i64| {
        for server in &servers {
            redis::cmd("SET")
                .arg(fence_key("big"))
                .arg(value)
                .exec(&mut server.conn())
                .unwrap();
        }
    };
    for start in [
        5_000_000_000_000_000_000,
        36_028_797_018_963_969,
        (1 << 53) + 1,
    ] {
        set_counters(start);
        let tokens: Vec<i64> = (0..3).map(|_| token().unwrap()).collect();
        assert!(tokens[0] > start, "{start}: {tokens:?}");
        assert!(
            tokens.windows(2).all(|w| w[1] > w[0]),
            "{start}: {tokens:?}"
        );
    }
    // At the last token but one, the last is given once; then none can follow.
    set_counters(i64::MAX - 2);
    assert_eq!(token(), Some(i64::MAX));
    assert_eq!(token(), None);
    // One node's take reaches the last token, the others' do not: the majority's token would
    // be past it. Refused, saying why, with nothing left taken.
    for server in &servers {
        server.del(&fence_key("big"));
    }
    redis::cmd("SET")
        .arg(fence_key("big"))
        .arg(i64::MAX - 1)
        .exec(&mut servers[0].conn())
        .unwrap();
    Redlock::run_quorum(&servers)
        .key("big")
        .sh("echo ran")
        .status(69)
        .stderr_contains("which no token can follow); not running the command")
        .output();
    for server in &servers {
        assert_eq!(server.get(&lock_key("big")), None);
    }
}

#[test]
fn a_release_wakes_a_quorum_waiter_and_costs_4_requests_a_node() {
    let dir = TempDir::new();
    let servers = start_servers(3);
    let (holder, _) = Redlock::run_quorum(&servers)
        .key("q")
        .ttl("30s")
        .hold(&dir, "a");
    // Without a wake-up the waiter would try again only after min(ttl, 20s), past its --wait.
    let waiter = Redlock::run_quorum(&servers)
        .key("q")
        .ttl("30s")
        .wait("10s")
        .sh("echo woken")
        .spawn();
    // It blocks on one node (every release wakes a waiter on each), keeping one connection
    // to every node and no more.
    wait_until(PATIENCE, "the waiter to block on one node", || {
        servers
            .iter()
            .map(|s| s.info_field("blocked_clients"))
            .sum::<u64>()
            == 1
    });
    for server in &servers {
        assert_eq!(tcp_connections(waiter.pid(), server.port()), 1);
    }
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    let out = waiter.finish();
    out.assert_code(0);
    assert_eq!(out.stdout, "woken\n");

    // The cost of a non-waiting run, per node, with the scripts cached: acquire, read the
    // fencing counter, raise it, release.
    for server in &servers {
        server.reset_stats();
    }
    Redlock::run_quorum(&servers)
        .key("q")
        .sh("true")
        .status(0)
        .output();
    for server in &servers {
        assert_eq!(server.client_calls(), 4);
    }
}

/// A stop while a quorum waiter blocks (on one node) is heard at once; it leaves every node.
#[test]
fn a_quorum_waiter_stopped_while_blocked_exits_at_once() {
    let dir = TempDir::new();
    let servers = start_servers(3);
    let (holder, _) = Redlock::run_quorum(&servers).key("qs").hold(&dir, "a");
    let mut waiter = Redlock::run_quorum(&servers)
        .key("qs")
        .wait("forever")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        servers
            .iter()
            .map(|s| s.info_field("blocked_clients"))
            .sum::<u64>()
            == 1
    });
    let sent = Instant::now();
    waiter.signal(Signal::SIGTERM);
    waiter.wait_timeout(PATIENCE);
    let took = sent.elapsed();
    waiter.finish().assert_signal(15);
    assert!(took < Duration::from_secs(1), "exited {took:?} after TERM");
    assert!(!dir.join("marker").exists(), "the command ran");
    for server in &servers {
        assert_eq!(server.info_field("blocked_clients"), 0);
    }
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
}

#[test]
fn quorum_urls_from_the_variable_and_min_interval() {
    let servers = start_servers(3);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let run = |script: &str| {
        Redlock::sub("run")
            .env("REDLOCK_URL", format!(" {}\n", urls.join(" \t")))
            .key("cron")
            .args(["--min-interval", "1h"])
            .sh(script)
    };
    run("echo ran").status(0).stdout("ran\n").output();
    run("echo ran").status(75).stdout("").output();
    for server in &servers {
        assert!(server.get("redlock:{cron}:done").is_some());
        assert_eq!(server.get(&lock_key("cron")), None);
    }
}

#[test]
fn quorum_usage_errors() {
    let dir = TempDir::new();
    let servers = start_servers(2);
    let (a, b) = (servers[0].url(), servers[1].url());
    let cases: [(&str, Vec<&str>, &str); 4] = [
        ("run", vec!["--url", &a, "--url", &b, "--fair"], "--fair"),
        ("run", vec!["--url", &a, "--url", &a], "twice"),
        ("status", vec!["--url", &a, "--url", &a], "twice"),
        ("list", vec!["--url", &a, "--url", &a], "twice"),
    ];
    for (sub, opts, says) in cases {
        let mut redlock = Redlock::sub(sub).args(&opts);
        if sub != "list" {
            redlock = redlock.key("q");
        }
        if sub == "run" {
            redlock = redlock.sh(&marker_script(&dir));
        }
        redlock
            .status(64)
            .stderr_contains(says)
            .stderr_lines(1)
            .output();
    }
    assert!(!dir.join("marker").exists());
    for server in &servers {
        assert!(server.all_keys().is_empty());
    }
}

/// One server under several names (`127.0.0.1`, `localhost`) is one node, not two: the run is
/// refused with 64 naming them, and nothing is written to any node, since each connection's
/// set-up asks the server's `run_id` (INFO server, beside ROLE) and the acquire connects to
/// every node before it writes to any. Distinct servers under those names run as before, with
/// no more round trips: one set-up and one acquire per node.
#[test]
fn one_server_under_several_names_is_refused() {
    let dir = TempDir::new();
    let servers = start_servers(2);
    let (a, b) = (&servers[0], &servers[1]);
    let at = |host: &str, server: &RedisServer| format!("redis://{host}:{}", server.port());
    for server in &servers {
        server.reset_stats();
    }
    let out = Redlock::sub("run")
        .url(&at("127.0.0.1", a))
        .url(&at("localhost", a))
        .url(&at("127.0.0.1", b))
        .key("k")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_lines(1)
        .output();
    let port = format!(":{}", a.port());
    assert!(
        out.stderr.contains(&format!(
            "127.0.0.1{port} and localhost{port} are one Redis server"
        )),
        "{}",
        out.stderr
    );
    assert_snapshot(
        "same-server-quorum.stderr",
        out.stderr.trim(),
        &[(&port, ":6379")],
    );
    assert!(!dir.join("marker").exists());
    for server in &servers {
        // Asked what it is, nothing more (this reads the stats before anything else does).
        let asked: Vec<_> = server
            .command_calls()
            .into_iter()
            .filter(|(name, _)| name != "role")
            .collect();
        assert!(asked.is_empty(), "{asked:?}");
        assert!(server.all_keys().is_empty(), "{:?}", server.all_keys());
    }
    // Three names of one server and nothing else: the same.
    Redlock::sub("run")
        .url(&at("127.0.0.1", b))
        .url(&at("localhost", b))
        .url(&format!("redis://[::1]:{}", b.port()))
        .key("k")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains("are one Redis server")
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    // Two servers, each under another name: a quorum of two distinct nodes, which runs.
    for server in &servers {
        server.reset_stats();
    }
    Redlock::sub("run")
        .url(&at("localhost", a))
        .url(&at("127.0.0.1", b))
        .key("k")
        .sh(&marker_script(&dir))
        .output();
    assert!(dir.join("marker").exists());
    for server in &servers {
        // One connection, whose set-up asked ROLE and INFO server once (this INFO is the
        // test's first since the reset, and counts itself only once it has answered).
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut server.conn())
            .unwrap();
        let calls = |name: &str| {
            stats
                .lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
                .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        assert_eq!((calls("role"), calls("info")), (1, 1), "{stats}");
    }
}

/// A silent node (paused: it accepts connections and never answers) costs a run little: the
/// per-node time limit is small against the ttl (a fiftieth: 200 ms at 10 s), for the acquire
/// and for the release, and `-v` says how long the acquire really took.
#[test]
fn a_silent_node_delays_the_start_and_the_exit_by_little() {
    let servers = start_servers(3);
    servers[2].pause();
    let dir = TempDir::new();
    let before = now_ns();
    let out = Redlock::run_quorum(&servers)
        .key("slow")
        .ttl("10s")
        .arg("-v")
        .sh(&format!("date +%s%N > {}", dir.sh("at")))
        .status(0)
        .stderr_prefixed()
        .output();
    let after = now_ns();
    let ran: i128 = read(&dir.join("at")).trim().parse().unwrap();
    let ms = |ns: i128| Duration::from_millis((ns / 1_000_000) as u64);
    let (start_delay, exit_after) = (ms(ran - before), ms(after - ran));
    // Before: 2 s to start (a tenth of the ttl, twice) and 1 s to exit.
    assert!(
        start_delay < Duration::from_millis(1500),
        "started after {start_delay:?}"
    );
    assert!(
        exit_after < Duration::from_millis(800),
        "exited {exit_after:?} after the command"
    );
    let waited: u64 = out
        .stderr
        .split("acquired lock 'slow' after ")
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(
        waited >= 150,
        "the acquire took {waited}ms, not the node's time limit: {}",
        out.stderr
    );
    servers[2].resume();
}
