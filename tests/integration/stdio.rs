//! redlock's own standard streams closed, or read by someone who left: the run still happens,
//! the lock is still released, the status is the command's, and nothing panics.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

/// Spawn `redlock` with `stream` ("stdout" or "stderr") a pipe whose reader is closed at once,
/// and return its exit code and what it wrote to the other stream.
fn with_reader_gone(redlock: Redlock, stream: &str) -> (Option<i32>, String) {
    let mut cmd = redlock.into_command();
    let dir = TempDir::new();
    let other = std::fs::File::create(dir.join("other")).unwrap();
    if stream == "stderr" {
        cmd.stderr(Stdio::piped()).stdout(other);
    } else {
        cmd.stdout(Stdio::piped()).stderr(other);
    }
    let mut child = cmd.spawn().expect("spawning redlock");
    drop(child.stderr.take());
    drop(child.stdout.take());
    let give_up = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for redlock") {
            break status;
        }
        assert!(
            Instant::now() < give_up,
            "redlock still running after {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code(),
        std::fs::read_to_string(dir.join("other")).unwrap(),
    )
}

#[test]
fn verbose_run_whose_stderr_reader_left_still_runs_releases_and_keeps_the_status() {
    let redis = RedisServer::start();
    // -v writes lines before the command starts and after it ends: both hit the closed pipe.
    let redlock = Redlock::run(&redis)
        .key("stderr-gone")
        .arg("-v")
        .sh("sleep 0.3; echo ran; exit 3");
    let (code, stdout) = with_reader_gone(redlock, "stderr");
    assert_eq!(code, Some(3), "stdout: {stdout}");
    assert_eq!(stdout, "ran\n");
    assert_eq!(
        redis.get(&lock_key("stderr-gone")),
        None,
        "lock left behind"
    );
}

#[test]
fn list_into_a_pipe_whose_reader_left_exits_0_quietly() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Redlock::run(&redis)
        .key("listed")
        .sh(&format!("touch {}; sleep 30", dir.sh("ready")))
        .spawn();
    wait_for_file(&dir.join("ready"));
    for args in [&[][..], &["--json"][..]] {
        let (code, stderr) = with_reader_gone(Redlock::admin("list", &redis).args(args), "stdout");
        assert_eq!(code, Some(0), "list {args:?}: {stderr}");
        assert_eq!(stderr, "", "list {args:?}");
    }
    let (code, stderr) = with_reader_gone(Redlock::admin("status", &redis).key("listed"), "stdout");
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    holder.finish().assert_signal(15);
}

#[test]
fn closed_stdio_is_reopened_on_dev_null_for_redlock_and_the_command() {
    let redis = RedisServer::start();
    // A descriptor redlock opens (a pipe, the Redis socket) must never become the command's
    // stdout: the command sees /dev/null there, and its echo succeeds.
    let script = r#"test "$(readlink /proc/$$/fd/1)" = /dev/null && echo into-the-void"#;
    Redlock::run(&redis)
        .key("closed")
        .sh(script)
        .through(["sh", "-c", r#"exec "$0" "$@" <&- >&-"#])
        .status(0)
        .output();
    assert_eq!(redis.get(&lock_key("closed")), None);
}
