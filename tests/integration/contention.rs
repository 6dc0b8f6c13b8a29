//! Several redlocks after one name: the busy exit and --conflict-exit-code, --wait handing the
//! lock over, --wait running out, and many contenders never overlapping.

use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn busy_lock_exits_75_without_running_the_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis).key("busy").hold(&dir, "h");

    let out = Redlock::run(&redis)
        .key("busy")
        .sh(&marker_script(&dir))
        .status(75)
        .stderr_prefixed()
        .output();
    assert!(
        out.elapsed < Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
    assert!(!dir.join("marker").exists(), "command ran without the lock");
    assert_eq!(
        redis.get(&lock_key("busy")),
        Some(token),
        "the holder's key was touched"
    );

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn conflict_exit_code_option_and_env() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("conflict").hold(&dir, "h");

    for code in ["0", "3", "255"] {
        Redlock::run(&redis)
            .key("conflict")
            .args(["--conflict-exit-code", code])
            .sh(&marker_script(&dir))
            .status(code.parse().unwrap())
            .output();
    }
    Redlock::run(&redis)
        .key("conflict")
        .env("REDLOCK_CONFLICT_EXIT_CODE", "9")
        .sh(&marker_script(&dir))
        .status(9)
        .output();
    assert!(!dir.join("marker").exists(), "command ran without the lock");

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn other_names_are_not_busy() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("one").hold(&dir, "h");
    Redlock::run(&redis)
        .key("two")
        .sh("exit 0")
        .status(0)
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// A waiter started while the lock is held runs once the holder finishes, and not before.
/// `waiting` adds the waiter's --wait, as an option or a variable.
fn wait_hands_over(waiting: impl FnOnce(Redlock) -> Redlock) {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder_script = format!(
        "{}; date +%s%N > {end}",
        hold_script(&dir, "h"),
        end = dir.sh("h.end")
    );
    let holder = Redlock::run(&redis)
        .key("handover")
        .sh(&holder_script)
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let holder_fence: u64 = wait_for_line(&dir.join("h.fence")).parse().unwrap();

    let waiter_script = format!(
        "date +%s%N > {start}; echo $REDLOCK_FENCING_TOKEN > {fence}",
        start = dir.sh("w.start"),
        fence = dir.sh("w.fence")
    );
    let mut waiter = waiting(Redlock::run(&redis).key("handover"))
        .sh(&waiter_script)
        .spawn();
    // The waiter is talking to Redis, i.e. trying, before the holder lets go.
    wait_until(PATIENCE, "the waiter to connect to redis", || {
        has_tcp_connection(waiter.pid(), redis.port())
    });
    assert!(
        waiter.running(),
        "waiter gave up: {}",
        waiter.stderr_so_far()
    );
    assert!(
        !dir.join("w.start").exists(),
        "waiter ran while the lock was held"
    );

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    let out = waiter.finish();
    out.assert_code(0);

    let holder_end = read_stamps(&dir.join("h.end"))[0];
    let waiter_start = read_stamps(&dir.join("w.start"))[0];
    assert!(
        waiter_start > holder_end,
        "waiter started {}ns before the holder ended",
        holder_end - waiter_start
    );
    let waiter_fence: u64 = wait_for_line(&dir.join("w.fence")).parse().unwrap();
    assert!(waiter_fence > holder_fence);
    assert_eq!(redis.get(&lock_key("handover")), None);
}

#[test]
fn wait_gets_the_lock_when_the_holder_finishes() {
    wait_hands_over(|redlock| redlock.wait("20s"));
}

#[test]
fn wait_forever_from_env_gets_the_lock() {
    wait_hands_over(|redlock| redlock.env("REDLOCK_WAIT", "forever"));
}

#[test]
fn wait_runs_out_with_75_in_about_the_wait_time() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis).key("waitout").hold(&dir, "h");

    let out = Redlock::run(&redis)
        .key("waitout")
        .wait("1500ms")
        .sh(&marker_script(&dir))
        .status(75)
        .stderr_prefixed()
        .output();
    assert!(
        out.elapsed >= Duration::from_millis(1400) && out.elapsed < Duration::from_millis(3500),
        "--wait 1500ms gave up after {:?}",
        out.elapsed
    );

    let out = Redlock::run(&redis)
        .key("waitout")
        .wait("500ms")
        .args(["--conflict-exit-code", "12"])
        .sh(&marker_script(&dir))
        .status(12)
        .output();
    assert!(
        out.elapsed >= Duration::from_millis(450),
        "gave up after {:?}",
        out.elapsed
    );

    assert!(!dir.join("marker").exists(), "command ran without the lock");
    assert_eq!(redis.get(&lock_key("waitout")), Some(token));
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn many_waiting_contenders_never_overlap() {
    const N: usize = 24;
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let started = Instant::now();
    let procs: Vec<Proc> = (0..N)
        .map(|i| {
            let script = format!(
                "date +%s%N > {s}; echo $REDLOCK_FENCING_TOKEN > {f}; sleep 0.02; date +%s%N > {e}",
                s = dir.sh(&format!("{i}.start")),
                f = dir.sh(&format!("{i}.fence")),
                e = dir.sh(&format!("{i}.end")),
            );
            Redlock::run(&redis)
                .key("crowd")
                .wait("60s")
                .ttl("2s")
                .sh(&script)
                .spawn()
        })
        .collect();
    for (i, p) in procs.into_iter().enumerate() {
        let out = p.finish_within(Duration::from_secs(70));
        assert_eq!(
            out.code(),
            0,
            "contender {i} exited {}: {}",
            out.code(),
            out.stderr
        );
    }
    eprintln!("{N} contenders done in {:?}", started.elapsed());

    let mut runs: Vec<(i128, i128, u64)> = (0..N)
        .map(|i| {
            let s = read_stamps(&dir.join(&format!("{i}.start")));
            let e = read_stamps(&dir.join(&format!("{i}.end")));
            assert!(
                s.len() == 1 && e.len() == 1,
                "contender {i} did not run once"
            );
            let f = read(&dir.join(&format!("{i}.fence")))
                .trim()
                .parse()
                .unwrap();
            (s[0], e[0], f)
        })
        .collect();
    runs.sort();
    for w in runs.windows(2) {
        assert!(
            w[0].1 < w[1].0,
            "overlap: one ran {}..{}, another started at {}",
            w[0].0,
            w[0].1,
            w[1].0
        );
        assert!(w[0].2 < w[1].2, "fencing tokens out of order: {runs:?}");
    }
    // The counter is the last holder's token.
    assert_eq!(
        fence_of(&redis, "crowd") as u64,
        runs.iter().map(|r| r.2).max().unwrap()
    );
    assert_eq!(redis.get(&lock_key("crowd")), None);
}

#[test]
fn wait_outlasts_a_crashed_holder() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("crash").ttl("1s").hold(&dir, "h");
    let holder_pid = wait_for_pid(&dir.join("h.pid"));
    let mut waiter = Redlock::run(&redis)
        .key("crash")
        .wait("15s")
        .sh(&format!("touch {}", dir.sh("w.ran")))
        .spawn();
    wait_until(PATIENCE, "the waiter to connect to redis", || {
        has_tcp_connection(waiter.pid(), redis.port())
    });
    assert!(waiter.running(), "waiter ended: {}", waiter.stderr_so_far());

    let killed = Instant::now();
    holder.signal(nix::sys::signal::Signal::SIGKILL);
    holder.finish().assert_signal(9);
    wait_pid_dead(holder_pid, Duration::from_secs(2));
    // Nobody releases the lock: the waiter gets it once the 1 s lease runs out.
    let out = waiter.finish();
    out.assert_code(0);
    assert!(dir.join("w.ran").exists());
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "waiter took {:?} after the holder's lease ran out",
        killed.elapsed()
    );
    assert_eq!(redis.get(&lock_key("crash")), None);
}

#[test]
fn wait_rides_out_a_redis_restart() {
    let mut redis = RedisServer::start();
    let dir = TempDir::new();
    // Someone else holds the lock for a minute.
    redis::cmd("SET")
        .arg(lock_key("restart"))
        .arg("someone-else")
        .arg("PX")
        .arg(60_000)
        .exec(&mut redis.conn())
        .unwrap();
    let mut waiter = Redlock::run(&redis)
        .key("restart")
        .wait("20s")
        .ttl("2s")
        .sh(&format!("touch {}", dir.sh("w.ran")))
        .spawn();
    wait_until(PATIENCE, "the waiter to connect to redis", || {
        has_tcp_connection(waiter.pid(), redis.port())
    });
    // Redis goes away for a while and comes back empty: the waiter keeps trying, then runs.
    redis.kill();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        waiter.running(),
        "waiter gave up while Redis was down: {}",
        waiter.stderr_so_far()
    );
    assert!(!dir.join("w.ran").exists(), "ran while Redis was down");
    redis.restart();
    let out = waiter.finish();
    out.assert_code(0);
    assert!(dir.join("w.ran").exists(), "the waiter never ran");
    // The restarted Redis is empty: the waiter's token comes from its clock.
    fence_of(&redis, "restart");
}
