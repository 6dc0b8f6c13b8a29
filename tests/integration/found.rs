//! What a hostile tester with only the binary and the docs broke, one test each: fencing
//! tokens past 2^53 and at the counter's end, a semaphore holder's end after the record's ring
//! moved on, a quorum's recorded token and a node that never granted the lock, a release
//! whose reply was lost while a waiter moved in, a request cut short by SIGTSTP and SIGCONT,
//! a holder's host name with control characters in `status`, and a negative database number.

use std::time::Duration;

use nix::sys::signal::Signal;
use redis::Commands;

use crate::common::*;

/// The tokens the commands of `runs` runs of `key` saw, in order.
fn tokens(redis: &RedisServer, key: &str, runs: usize, dir: &TempDir) -> Vec<u64> {
    let file = dir.join(&format!("{key}.tokens"));
    for _ in 0..runs {
        Redlock::run(redis)
            .key(key)
            .sh(&format!(
                "echo $REDLOCK_FENCING_TOKEN >> {}",
                shell_quote(&file)
            ))
            .status(0)
            .output();
    }
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("not a token: {l}")))
        .collect()
}

/// A negative counter (a whole number redlock did not write, below the clock) is taken as an
/// older one: the run goes ahead and its token is the server's clock, above it.
/// The holders' details of a semaphore replaced, while a holder runs, by a key of another
/// kind (not redlock's): its release still gives its place up, says nothing of a failure,
/// exits with the command's status, and records the run as it ended.
#[test]
fn a_foreign_holders_key_does_not_spoil_a_release() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Redlock::run(&redis)
        .key("h3")
        .args(["--limit", "3"])
        .sh(&format!("touch {}; sleep 1", dir.sh("ready")))
        .spawn();
    wait_for_file(&dir.join("ready"));
    let holders = format!("{}:holders", lock_key("h3"));
    redis.del(&holders);
    let _: () = redis.conn().set(&holders, "junk").unwrap();
    let out = holder.finish();
    out.assert_code(0);
    assert_eq!(out.stderr, "", "a release that worked said otherwise");
    assert_eq!(redis.get(&lock_key("h3")), None);
    Redlock::admin("history", &redis)
        .key("h3")
        .stdout_contains("success (exit 0)")
        .output();
}

#[test]
fn a_negative_counter_is_passed_by_the_clock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let _: () = redis.conn().set(fence_key("neg"), "-99").unwrap();
    let got = tokens(&redis, "neg", 2, &dir);
    let clock = (now_ns() / 1000) as u64;
    assert!(got[0] > clock - 60_000_000 && got[1] > got[0], "{got:?}");
}

#[test]
fn tokens_past_2_to_the_53_stay_exact_and_a_counter_at_its_end_is_refused() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let _: () = redis
        .conn()
        .set(fence_key("big"), "9007199254740990")
        .unwrap();
    let got = tokens(&redis, "big", 4, &dir);
    assert_eq!(
        got,
        [
            9007199254740991,
            9007199254740992,
            9007199254740993,
            9007199254740994
        ]
    );
    // A counter at the largest 64-bit integer has no next token: refused, said so (not Redis's
    // raw "increment or decrement would overflow"), nothing runs.
    let _: () = redis
        .conn()
        .set(fence_key("end"), i64::MAX.to_string())
        .unwrap();
    let said = "holds 9223372036854775807 (the largest 64-bit integer, which no token can follow)";
    Redlock::run(&redis)
        .key("end")
        .sh(&format!("touch {}", dir.sh("ran")))
        .status(69)
        .stderr_contains(said)
        .output();
    assert!(!dir.join("ran").exists());
    assert_eq!(redis.pttl(&lock_key("end")), -2, "left taken");
    // A forced release of a lock whose counter is there removes the lock, says that the
    // counter was left as it is, and exits 0 (it used to exit 69 after removing it).
    let _: () = redis.conn().set(lock_key("end"), "someone").unwrap();
    Redlock::admin("release", &redis)
        .key("end")
        .args(["--force"])
        .status(0)
        .stdout_contains(said)
        .output();
    assert_eq!(redis.pttl(&lock_key("end")), -2, "still taken");
    // A counter that is not a whole number is not one redlock wrote: said, and left as it is;
    // also one that Rust would parse but Redis's INCRBY refuses (a `+`, leading zeros).
    for (key, value) in [
        ("text", "5x"),
        ("plus", "+5"),
        ("zeros", "0099999999999999999"),
    ] {
        let _: () = redis.conn().set(fence_key(key), value).unwrap();
        Redlock::run(&redis)
            .key(key)
            .sh(&format!("touch {}", dir.sh("ran")))
            .status(69)
            .stderr_contains("which redlock did not write")
            .output();
        assert!(!dir.join("ran").exists(), "{value}");
        assert_eq!(redis.get(&fence_key(key)).as_deref(), Some(value));
        assert_eq!(redis.pttl(&lock_key(key)), -2, "left taken: {value}");
    }
}

/// `release --force` reports the fencing counter as Redis holds it, past 2^53 too (it went
/// through a Lua number: 12345678901234567 came back as ...568, and 2^63 - 2 as -2^63).
#[test]
fn a_forced_release_reports_a_counter_past_2_to_the_53_exactly() {
    let redis = RedisServer::start();
    for value in ["12345678901234567", "9223372036854775806"] {
        let _: () = redis.conn().set(fence_key("big"), value).unwrap();
        Redlock::admin("release", &redis)
            .key("big")
            .args(["--force", "--json"])
            .status(0)
            .stdout_contains(&format!("\"fence\":{value},"))
            .output();
        Redlock::admin("release", &redis)
            .key("big")
            .args(["--force"])
            .status(0)
            .stdout_contains(&format!("(fencing counter {value})"))
            .output();
    }
}

#[test]
fn a_semaphore_holders_end_is_recorded_after_the_ring_moved_on() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let slot = || Redlock::run(&redis).key("s").args(["--limit", "2"]);
    // Removed by hand after 21 other runs: lost, and the last run to end.
    let (long, token) = slot().hold(&dir, "long");
    for _ in 0..21 {
        slot().sh("true").status(0).output();
    }
    Redlock::admin("release", &redis)
        .key("s")
        .args(["--force", "--token", &token])
        .any_stdout()
        .any_stderr()
        .output();
    touch(&dir.join("long.go"));
    long.finish().assert_code(76);
    Redlock::admin("check", &redis)
        .key("s")
        .args(["--max-age", "1h"])
        .status(1)
        .stdout_contains("WARNING: ")
        .output();
    // Killed with its watchdog after 21 other runs: vanished, counted by the next acquire.
    let held = slot()
        .ttl("1s")
        .sh(&format!("touch {}; sleep 30", dir.sh("v.ready")))
        .spawn();
    wait_for_file(&dir.join("v.ready"));
    for _ in 0..21 {
        slot().sh("true").status(0).output();
    }
    let watchdog = watchdog_of(held.pid());
    held.signal(Signal::SIGKILL);
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(watchdog), Signal::SIGKILL);
    std::thread::sleep(Duration::from_millis(1200));
    slot().sh("true").status(0).output();
    let counts: Option<String> = redis
        .conn()
        .hget(format!("{}:counts", lock_key("s")), "vanished")
        .unwrap();
    assert_eq!(counts.as_deref(), Some("1"));
}

#[test]
fn a_quorum_records_the_token_its_command_got_and_a_node_that_never_granted_counts_nothing() {
    let nodes = start_servers(3);
    let dir = TempDir::new();
    // The third node's key is held by someone else: it never grants the lock.
    let _: () = redis::cmd("SET")
        .arg(lock_key("q"))
        .arg("someone")
        .arg("PX")
        .arg(30_000)
        .query(&mut nodes[2].conn())
        .unwrap();
    let file = dir.join("token");
    for _ in 0..2 {
        Redlock::run_quorum(&nodes)
            .key("q")
            .sh(&format!(
                "echo $REDLOCK_FENCING_TOKEN > {}",
                shell_quote(&file)
            ))
            .status(0)
            .output();
    }
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    let history = Redlock::admin_quorum("history", &nodes)
        .key("q")
        .arg("--json")
        .status(0)
        .any_stdout()
        .output();
    assert!(
        history.stdout.starts_with("[{") && history.stdout.contains(&format!("\"fence\":{token},")),
        "{token}: {}",
        history.stdout
    );
    let lost: Option<String> = nodes[2]
        .conn()
        .hget(format!("{}:counts", lock_key("q")), "lock_lost")
        .unwrap();
    assert_eq!(
        lost, None,
        "a node that never granted the lock counted it lost"
    );
}

#[test]
fn a_release_whose_reply_was_lost_while_a_waiter_moved_in_is_still_a_success() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port());
    let dir = TempDir::new();
    // Once first, so that the server has the scripts and the lost reply is the release's own.
    Redlock::run_at(&proxy.url())
        .key("r")
        .sh("true")
        .status(0)
        .output();
    let holder = Redlock::run_at(&proxy.url())
        .key("r")
        .ttl("5s")
        .sh(&format!("touch {}; sleep 0.5", dir.sh("h.ready")))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let waiter = Redlock::run(&redis)
        .key("r")
        .wait("10s")
        .sh("sleep 1")
        .spawn();
    std::thread::sleep(Duration::from_millis(100));
    // Only the release's request carries the run's ending.
    proxy.lose_reply_to(br#""outcome":"success""#);
    let out = holder.finish();
    assert!(proxy.lost_a_reply(), "no reply was lost");
    out.assert_code(0);
    waiter.finish().assert_code(0);
    let history = stdout_of("history", &redis, &["--key", "r", "--json"]);
    assert!(!history.contains("lock_lost"), "{history}");
}

#[test]
fn a_request_cut_short_by_job_control_signals_is_tried_again() {
    let redis = RedisServer::start();
    // The acquire waits on a frozen server while redlock is stopped and continued.
    redis.pause();
    let run = Redlock::run(&redis).key("j").sh("true").spawn();
    std::thread::sleep(Duration::from_millis(300));
    run.signal(Signal::SIGTSTP);
    std::thread::sleep(Duration::from_millis(100));
    run.signal(Signal::SIGCONT);
    std::thread::sleep(Duration::from_millis(200));
    redis.resume();
    let out = run.finish();
    out.assert_code(0);
}

#[test]
fn a_holders_host_with_control_characters_is_escaped_by_status() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("h").hold(&dir, "h");
    let _: () = redis
        .conn()
        .hset(format!("{}:holder", lock_key("h")), "host", "h\tx\n\x1b[2J")
        .unwrap();
    let out = Redlock::admin("status", &redis)
        .key("h")
        .status(0)
        .any_stdout()
        .output();
    assert!(
        !out.stdout.contains('\x1b') && !out.stdout.contains('\t'),
        "{:?}",
        out.stdout
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn a_negative_database_number_is_a_usage_error() {
    Redlock::run_at("redis://127.0.0.1:1/-1")
        .key("k")
        .sh("true")
        .status(64)
        .stderr(
            "redlock: invalid Redis URL 'redis://127.0.0.1:1/-1': a database number is 0 or more\n",
        )
        .output();
}

/// What status and list show of a lock stays exact and readable whatever the record or the
/// counter holds: a counter past 2^53 as its digits, and a record field of megabytes (not one
/// redlock wrote) left out rather than making the lock unreadable.
#[test]
fn status_shows_a_big_counter_exactly_and_a_huge_record_field_does_not_hide_the_lock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let _: () = redis
        .conn()
        .set(fence_key("big"), "9007199254740994")
        .unwrap();
    let (holder, _) = Redlock::run(&redis).key("big").hold(&dir, "big");
    let token = std::fs::read_to_string(dir.join("big.fence")).unwrap();
    let token = token.trim();
    assert_eq!(token, "9007199254740995");
    let _: () = redis
        .conn()
        .hset(
            format!("{}:counts", lock_key("big")),
            "last_success",
            "x".repeat(5 << 20),
        )
        .unwrap();
    let json = stdout_of("status", &redis, &["--key", "big", "--json"]);
    assert!(json.contains(&format!("\"fence\":{token},")), "{json:.300}");
    let list = stdout_of("list", &redis, &[]);
    assert!(list.starts_with("big\t") && list.contains(token), "{list}");
    touch(&dir.join("big.go"));
    holder.finish().assert_code(0);
}
