//! The exit-status table: the command's own code, 128+N for signal deaths, 126/127 for commands
//! that cannot run, 124 for --max-runtime; the lock is released in every case.

use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn command_exit_code_is_passed_through() {
    let redis = RedisServer::start();
    for code in [0, 1, 2, 3, 42, 64, 69, 75, 76, 124, 200, 255] {
        Redlock::run(&redis)
            .key("codes")
            .sh(&format!("exit {code}"))
            .status(code)
            .output();
        assert_eq!(
            redis.get(&lock_key("codes")),
            None,
            "lock held after exit {code}"
        );
    }
}

#[test]
fn signal_death_is_128_plus_n() {
    let redis = RedisServer::start();
    for (name, n) in [("HUP", 1), ("KILL", 9), ("USR1", 10), ("TERM", 15)] {
        // redlock dies of the command's signal, so its parent sees a signal death.
        Redlock::run(&redis)
            .key("sigdeath")
            .sh(&format!("kill -s {name} $$"))
            .signal(n)
            .output();
        // Through a shell, which shows 128+N.
        let line = format!(
            "{}; echo $?",
            Redlock::run(&redis)
                .key("sigdeath")
                .sh(&format!("kill -s {name} $$"))
                .shell_line()
        );
        let mut sh = std::process::Command::new("sh");
        clear_redlock_env(&mut sh);
        let out = sh.args(["-c", &line]).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", 128 + n)
        );
        assert_eq!(
            redis.get(&lock_key("sigdeath")),
            None,
            "lock held after SIG{name}"
        );
    }
}

#[test]
fn command_not_found_is_127_and_lock_released() {
    let redis = RedisServer::start();
    for program in [
        "/nonexistent/redlock-test-cmd",
        "redlock-no-such-command-xyz",
    ] {
        Redlock::run(&redis)
            .key("nf")
            .command([program])
            .status(127)
            .stderr_prefixed()
            .stderr_lines(1)
            .output();
        assert_eq!(
            redis.get(&lock_key("nf")),
            None,
            "lock held after {program}"
        );
    }
}

#[test]
fn command_not_executable_is_126_and_lock_released() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = dir.join("script.sh");
    write_file(
        &script,
        &format!("#!/bin/sh\ntouch {}\n", dir.sh("marker")),
        0o644,
    );
    for program in [script.clone(), dir.path().to_path_buf()] {
        Redlock::run(&redis)
            .key("nx")
            .command([&program])
            .status(126)
            .stderr_prefixed()
            .stderr_lines(1)
            .output();
        assert_eq!(
            redis.get(&lock_key("nx")),
            None,
            "lock held after {program:?}"
        );
    }
    assert!(!dir.join("marker").exists());
}

#[test]
fn max_runtime_stops_the_command_with_124() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "sleep 300 >/dev/null 2>&1 & echo $! > {bg}; {hb}",
        bg = dir.sh("bg"),
        hb = heartbeat_script(&dir, "w")
    );
    let out = Redlock::run(&redis)
        .key("maxrt")
        .args(["--max-runtime", "700ms"])
        .sh(&script)
        .status(124)
        .stderr("redlock: the command ran past --max-runtime; stopping it\n")
        .output();
    assert!(
        out.elapsed >= Duration::from_millis(700),
        "stopped after {:?}, before --max-runtime",
        out.elapsed
    );
    assert!(
        out.elapsed < Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
    let pid = wait_for_pid(&dir.join("w.pid"));
    let bg = wait_for_pid(&dir.join("bg"));
    wait_pid_dead(pid, Duration::from_secs(1));
    wait_pid_dead(bg, Duration::from_secs(1));
    assert!(
        !group_alive(pid),
        "group still alive: {:?}",
        group_members(pid)
    );
    assert_eq!(redis.get(&lock_key("maxrt")), None);
}

#[test]
fn max_runtime_kills_a_command_that_ignores_the_stop_signal() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("trap '' TERM; {}", heartbeat_script(&dir, "w"));
    let started = Instant::now();
    Redlock::run(&redis)
        .key("maxrt-kill")
        .args(["--kill-after", "300ms"])
        .env("REDLOCK_MAX_RUNTIME", "500ms")
        .sh(&script)
        .status(124)
        .stderr_prefixed()
        .stderr_contains("the command ran past --max-runtime; stopping it")
        .output();
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "exited after {:?}: did not wait --kill-after",
        started.elapsed()
    );
    let pid = wait_for_pid(&dir.join("w.pid"));
    wait_pid_dead(pid, Duration::from_secs(1));
    assert!(!group_alive(pid));
    assert_eq!(redis.get(&lock_key("maxrt-kill")), None);
}

#[test]
fn max_runtime_not_reached_keeps_the_commands_code() {
    let redis = RedisServer::start();
    let out = Redlock::run(&redis)
        .key("maxrt-ok")
        .args(["--max-runtime", "30s"])
        .sh("exit 7")
        .status(7)
        .output();
    assert!(out.elapsed < Duration::from_secs(10));
}
