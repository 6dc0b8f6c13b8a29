//! `--fair`: waiters run in arrival order, a newcomer does not jump the queue, a waiter that
//! gives up passes its turn on at once, a dead one is forgotten within 5 s, and
//! `release --force` clears a stuck queue.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::waiting::{
    LONG_TTL, WOKEN_WITHIN, gap, hold_then_stamp, lines, log_script, queue_key, zcard,
};
use crate::common::*;

#[test]
fn fair_waiters_run_in_arrival_order() {
    const N: usize = 5;
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("fifo").hold(&dir, "h");
    let waiters: Vec<Proc> = (0..N)
        .map(|i| {
            let waiter = Redlock::run(&redis)
                .key("fifo")
                .arg("--fair")
                .wait("forever")
                .sh(&log_script(&dir, i))
                .spawn();
            wait_until(PATIENCE, "the waiter to join the queue", || {
                zcard(&redis, &queue_key("fifo")) == i as u64 + 1
            });
            waiter
        })
        .collect();

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    for waiter in waiters {
        waiter.finish().assert_code(0);
    }
    let want: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert_eq!(lines(&dir, "order"), want);
    assert!(
        redis.all_keys().iter().all(|k| !k.contains(":queue")),
        "queue left behind: {:?}",
        redis.all_keys()
    );
}

#[test]
fn a_fair_newcomer_does_not_jump_the_queue() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // Someone else's lock, with 2 s left.
    redis::cmd("SET")
        .arg(lock_key("queue"))
        .arg("someone")
        .arg("PX")
        .arg(2000)
        .exec(&mut redis.conn())
        .unwrap();
    let waiter = Redlock::run(&redis)
        .key("queue")
        .arg("--fair")
        .wait("20s")
        .sh(&log_script(&dir, 0))
        .spawn();
    wait_until(PATIENCE, "the waiter to join the queue", || {
        zcard(&redis, &queue_key("queue")) == 1
    });
    // Freed without a release, so nobody is woken: the waiter is asleep when the newcomer comes.
    redis.del(&lock_key("queue"));
    Redlock::run(&redis)
        .key("queue")
        .arg("--fair")
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    assert!(
        !dir.join("marker").exists(),
        "the newcomer jumped the queue"
    );

    waiter.finish().assert_code(0);
    assert_eq!(lines(&dir, "order"), ["0"]);
}

#[test]
fn a_fair_waiter_that_gives_up_passes_its_turn_on_at_once() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Redlock::run(&redis)
        .key("leave")
        .ttl(LONG_TTL)
        .sh(&hold_then_stamp(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let fair_waiter = || {
        Redlock::run(&redis)
            .key("leave")
            .arg("--fair")
            .wait("forever")
            .ttl(LONG_TTL)
    };
    let first = fair_waiter().sh(&log_script(&dir, 0)).spawn();
    wait_until(PATIENCE, "the first waiter to queue", || {
        zcard(&redis, &queue_key("leave")) == 1
    });
    let second = fair_waiter().sh(&log_script(&dir, 1)).spawn();
    wait_until(PATIENCE, "the second waiter to queue", || {
        zcard(&redis, &queue_key("leave")) == 2
    });

    first.signal(Signal::SIGTERM);
    first.finish().assert_signal(15);
    assert_eq!(zcard(&redis, &queue_key("leave")), 1, "the entry stayed");

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    second.finish().assert_code(0);
    assert_eq!(lines(&dir, "order"), ["1"]);
    let gap = gap(&dir, "h.end", "1.start");
    assert!(
        gap < WOKEN_WITHIN,
        "the second waiter started {gap:?} after the release"
    );
}

/// A `--fair` waiter that dies (SIGKILL: no chance to leave) is forgotten within 5 s: `status`
/// stops counting it, the next waiter takes the lock, and meanwhile `status` explains the wait.
#[test]
fn a_dead_fair_waiter_is_forgotten_within_5_s() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("dead").ttl("30s").hold(&dir, "h");
    let fair_waiter = || {
        Redlock::run(&redis)
            .key("dead")
            .arg("--fair")
            .wait("forever")
    };
    let first = fair_waiter().sh(&log_script(&dir, 0)).spawn();
    wait_until(PATIENCE, "the first waiter to queue", || {
        zcard(&redis, &queue_key("dead")) == 1
    });
    let second = fair_waiter().sh(&log_script(&dir, 1)).spawn();
    wait_until(PATIENCE, "the second waiter to queue", || {
        zcard(&redis, &queue_key("dead")) == 2
    });
    Redlock::admin("status", &redis)
        .key("dead")
        .status(0)
        .stdout_contains("fair queue: 2 waiting")
        .output();
    // The lock is held: a --fair newcomer that does not wait hears that.
    Redlock::run(&redis)
        .key("dead")
        .args(["--fair", "-v"])
        .sh("true")
        .status(75)
        .stderr_contains(
            "is held by another run (on this host or another); gave up at once (no --wait)",
        )
        .output();

    // SIGKILL: its entry stays at the head until it lapses. The lock is released meanwhile, so
    // the wake-up goes to the dead head, as it would in a fleet.
    first.signal(Signal::SIGKILL);
    let killed = Instant::now();
    first.finish().assert_signal(9);
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    wait_until(PATIENCE, "status to forget the dead waiter", || {
        Redlock::admin("status", &redis)
            .key("dead")
            .any_stdout()
            .output()
            .stdout
            .contains("fair queue: 1 waiting")
            || dir.join("1.start").exists()
    });
    let forgotten = killed.elapsed();
    second.finish().assert_code(0);
    let ran = killed.elapsed();
    assert_eq!(lines(&dir, "order"), ["1"]);
    assert_eq!(zcard(&redis, &queue_key("dead")), 0);
    // The entry lapses 5 s after the dead waiter's last refresh, which was at most a beat
    // (1.5 s) before it died; the next waiter's own beat then finds it gone.
    assert!(
        forgotten < Duration::from_millis(5_500),
        "forgotten after {forgotten:?}"
    );
    assert!(
        ran < Duration::from_secs(8),
        "the next waiter ran after {ran:?}"
    );
}

/// `release --force` on a free lock clears a stuck `--fair` queue; live waiters join it again.
#[test]
fn release_force_clears_the_fair_queue_of_a_free_lock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("q").ttl("30s").hold(&dir, "h");
    let waiter = Redlock::run(&redis)
        .key("q")
        .arg("--fair")
        .wait("forever")
        .sh(&log_script(&dir, 0))
        .spawn();
    wait_until(PATIENCE, "the waiter to queue", || {
        zcard(&redis, &queue_key("q")) == 1
    });
    // A dead waiter's entry, as a SIGKILLed fair waiter leaves it, ahead of the live one.
    let _: () = redis::cmd("ZADD")
        .arg(queue_key("q"))
        .arg(0)
        .arg("ghost")
        .query(&mut redis.conn())
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("redlock:{q}:alive")
        .arg(i64::MAX / 2)
        .arg("ghost")
        .query(&mut redis.conn())
        .unwrap();
    // Held: release --force breaks the lock and leaves the queue alone.
    Redlock::admin("release", &redis)
        .key("q")
        .args(["--force", "--json"])
        .status(0)
        .stdout_contains(r#""result":"released""#)
        .stdout_contains(r#""queue_cleared":0"#)
        .output();
    // Its lock was broken: gone at its release, 76.
    holder.signal(Signal::SIGTERM);
    holder.finish().assert_code(76);
    assert_eq!(zcard(&redis, &queue_key("q")), 2);
    // Free, but promised to the ghost at the head: a --fair newcomer hears why it cannot have it.
    Redlock::run(&redis)
        .key("q")
        .args(["--fair", "-v"])
        .sh("true")
        .status(75)
        .stderr_contains("lock 'q' is free but promised to --fair waiters ahead of this one")
        .output();
    // release --force clears the queue; the live waiter joins it again and takes the lock.
    Redlock::admin("release", &redis)
        .key("q")
        .arg("--force")
        .status(0)
        .stdout_contains("cleared its --fair queue of 2 waiter(s)")
        .output();
    waiter.finish().assert_code(0);
    assert_eq!(lines(&dir, "order"), ["0"]);
}
