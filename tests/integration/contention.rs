//! Several redlocks after one name: the busy exit and --conflict-exit-code, --wait handing the
//! lock over, --wait running out, and many contenders never overlapping.

use std::time::{Duration, Instant};

use crate::common::*;

/// Starts a holder of `key` and waits until its command runs; returns it and its token.
fn hold(redis: &RedisServer, dir: &TempDir, key: &str, tag: &str) -> (Proc, String) {
    let proc = Proc::spawn(run_sh(redis, key, &[], &hold_script(dir, tag)));
    wait_for_file(&dir.join(&format!("{tag}.ready")));
    let token = wait_for_line(&dir.join(&format!("{tag}.token")));
    (proc, token)
}

#[test]
fn busy_lock_exits_75_without_running_the_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = hold(&redis, &dir, "busy", "h");

    let out = run_timeout(run_sh(&redis, "busy", &[], &marker_script(&dir)), PATIENCE);
    out.assert_code(75);
    out.assert_stderr_prefixed();
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
    let (holder, _) = hold(&redis, &dir, "conflict", "h");

    for code in ["0", "3", "255"] {
        let out = run_timeout(
            run_sh(
                &redis,
                "conflict",
                &["--conflict-exit-code", code],
                &marker_script(&dir),
            ),
            PATIENCE,
        );
        out.assert_code(code.parse().unwrap());
    }
    let mut cmd = run_sh(&redis, "conflict", &[], &marker_script(&dir));
    cmd.env("REDLOCK_CONFLICT_EXIT_CODE", "9");
    run_timeout(cmd, PATIENCE).assert_code(9);
    assert!(!dir.join("marker").exists(), "command ran without the lock");

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn other_names_are_not_busy() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = hold(&redis, &dir, "one", "h");
    run_timeout(run_sh(&redis, "two", &[], "exit 0"), PATIENCE).assert_code(0);
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// A waiter started while the lock is held runs once the holder finishes, and not before.
fn wait_hands_over(wait_args: &[&str], wait_env: Option<(&str, &str)>) {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder_script = format!(
        "{}; date +%s%N > {end}",
        hold_script(&dir, "h"),
        end = dir.sh("h.end")
    );
    let holder = Proc::spawn(run_sh(&redis, "handover", &[], &holder_script));
    wait_for_file(&dir.join("h.ready"));
    let holder_fence: u64 = wait_for_line(&dir.join("h.fence")).parse().unwrap();

    let waiter_script = format!(
        "date +%s%N > {start}; echo $REDLOCK_FENCING_TOKEN > {fence}",
        start = dir.sh("w.start"),
        fence = dir.sh("w.fence")
    );
    let mut cmd = run_sh(&redis, "handover", wait_args, &waiter_script);
    if let Some((k, v)) = wait_env {
        cmd.env(k, v);
    }
    let mut waiter = Proc::spawn(cmd);
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
    wait_hands_over(&["--wait", "20s"], None);
}

#[test]
fn wait_forever_from_env_gets_the_lock() {
    wait_hands_over(&[], Some(("REDLOCK_WAIT", "forever")));
}

#[test]
fn wait_runs_out_with_75_in_about_the_wait_time() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = hold(&redis, &dir, "waitout", "h");

    let out = run_timeout(
        run_sh(
            &redis,
            "waitout",
            &["--wait", "1500ms"],
            &marker_script(&dir),
        ),
        PATIENCE,
    );
    out.assert_code(75);
    assert!(
        out.elapsed >= Duration::from_millis(1400) && out.elapsed < Duration::from_millis(3500),
        "--wait 1500ms gave up after {:?}",
        out.elapsed
    );
    out.assert_stderr_prefixed();

    let out = run_timeout(
        run_sh(
            &redis,
            "waitout",
            &["--wait", "500ms", "--conflict-exit-code", "12"],
            &marker_script(&dir),
        ),
        PATIENCE,
    );
    out.assert_code(12);
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
            Proc::spawn(run_sh(
                &redis,
                "crowd",
                &["--wait", "60s", "--ttl", "2s"],
                &script,
            ))
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
    assert_eq!(redis.get(&fence_key("crowd")), Some(N.to_string()));
    assert_eq!(redis.get(&lock_key("crowd")), None);
}

#[test]
fn wait_outlasts_a_crashed_holder() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Proc::spawn(run_sh(
        &redis,
        "crash",
        &["--ttl", "1s"],
        &hold_script(&dir, "h"),
    ));
    wait_for_file(&dir.join("h.ready"));
    let holder_pid = wait_for_pid(&dir.join("h.pid"));
    let mut waiter = Proc::spawn(run_sh(
        &redis,
        "crash",
        &["--wait", "15s"],
        &format!("touch {}", dir.sh("w.ran")),
    ));
    wait_until(PATIENCE, "the waiter to connect to redis", || {
        has_tcp_connection(waiter.pid(), redis.port())
    });
    assert!(waiter.running(), "waiter ended: {}", waiter.stderr_so_far());

    let killed = Instant::now();
    holder.signal(nix::sys::signal::Signal::SIGKILL);
    drop(holder);
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
    let mut waiter = Proc::spawn(run_sh(
        &redis,
        "restart",
        &["--wait", "20s", "--ttl", "2s"],
        &format!("touch {}", dir.sh("w.ran")),
    ));
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
    assert_eq!(redis.get(&fence_key("restart")).as_deref(), Some("1"));
}
