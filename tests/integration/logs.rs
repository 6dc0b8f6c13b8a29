//! Diagnostics: the -v lifecycle lines, and `--log-format json`: one JSON object per line on
//! stderr with stable event names, errors included, exit statuses unchanged.

use nix::sys::signal::Signal;

use crate::common::*;

/// The stderr lines, each checked to be one flat JSON object with ts, level and event.
fn json_lines(stderr: &str) -> Vec<String> {
    let lines: Vec<String> = stderr.lines().map(str::to_owned).collect();
    for line in &lines {
        assert!(
            line.starts_with(r#"{"ts":""#) && line.ends_with('}'),
            "not a JSON line: {line:?}"
        );
        let ts = &line[7..31];
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
        assert!(
            line.contains(r#","level":""#) && line.contains(r#","event":""#),
            "{line}"
        );
        assert_eq!(line.matches("\"msg\":").count(), 1, "{line}");
    }
    lines
}

fn event(line: &str) -> &str {
    let start = line.find(r#""event":""#).unwrap() + 9;
    let len = line[start..].find('"').unwrap();
    &line[start..start + len]
}

#[test]
fn json_lifecycle_events_in_order() {
    let redis = RedisServer::start();
    let out = Redlock::run(&redis)
        .key(r#"q"uote"#)
        .args(["--log-format", "json", "-vv"])
        .ttl("300ms")
        .sh("sleep 0.5")
        .status(0)
        .any_stderr()
        .output();
    let lines = json_lines(&out.stderr);
    let events: Vec<&str> = lines.iter().map(|l| event(l)).collect();
    assert_eq!(events.first(), Some(&"acquired"), "{events:?}");
    assert_eq!(
        &events[events.len() - 2..],
        ["exited", "released"],
        "{events:?}"
    );
    assert!(events.contains(&"renewed"), "{events:?}");
    let acquired = &lines[0];
    for want in [
        r#""level":"info""#,
        r#""key":"q\"uote""#,
        r#""waited_ms":"#,
        &format!(r#""fence":{},"#, fence_of(&redis, "q\"uote")),
    ] {
        assert!(acquired.contains(want), "{want} missing: {acquired}");
    }
    assert!(
        lines[lines.len() - 2].contains(r#""status":0,"#),
        "{}",
        lines[lines.len() - 2]
    );
}

#[test]
fn json_errors_are_one_line_with_the_same_status() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A usage error found by clap, with the format from the environment and from the flag.
    let out = Redlock::run(&redis)
        .key("k")
        .ttl("abc")
        .env("REDLOCK_LOG_FORMAT", "json")
        .sh(&marker_script(&dir))
        .status(64)
        .any_stderr()
        .output();
    let lines = json_lines(&out.stderr);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains(r#""level":"error""#), "{}", lines[0]);
    // The lock's name, given on the line, is in the error's "key" as in every other event.
    assert!(lines[0].contains(r#""key":"k""#), "{}", lines[0]);
    let out = Redlock::run(&redis)
        .key("k")
        .arg("--log-format=json")
        .wait("x")
        .sh("true")
        .status(64)
        .any_stderr()
        .output();
    assert_eq!(json_lines(&out.stderr).len(), 1);
    assert!(out.stderr.contains(r#""key":"k""#), "{}", out.stderr);
    // Redis unreachable, for run and for an admin command.
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let out = Redlock::sub("run")
        .args(["--log-format", "json"])
        .url(&url)
        .key("k")
        .command(["true"])
        .status(69)
        .any_stderr()
        .output();
    assert_eq!(json_lines(&out.stderr).len(), 1, "{}", out.stderr);
    let out = Redlock::sub("status")
        .args(["--log-format", "json"])
        .url(&url)
        .key("k")
        .status(69)
        .any_stderr()
        .output();
    assert_eq!(json_lines(&out.stderr).len(), 1, "{}", out.stderr);
    assert!(!dir.join("marker").exists());
}

#[test]
fn forwarded_signals_and_busy_locks_are_logged() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // The shell reports its `sleep` killed by the forwarded USR1 on stderr: not ours to check.
    let script = format!(
        "exec 2>/dev/null; trap 'touch {got}' USR1; {}",
        hold_script(&dir, "h"),
        got = dir.sh("got")
    );
    let holder = Redlock::run(&redis)
        .key("sig")
        .args(["-v", "--log-format", "json"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    holder.signal(Signal::SIGUSR1);
    wait_for_file(&dir.join("got"));

    Redlock::run(&redis)
        .key("sig")
        .arg("-v")
        .sh("true")
        .status(75)
        .stderr_prefixed()
        .stderr_contains("is held by another run (on this host or another); gave up at once")
        .output();

    touch(&dir.join("h.go"));
    let out = holder.finish();
    out.assert_code(0);
    let lines = json_lines(&out.stderr);
    assert!(
        lines
            .iter()
            .any(|l| event(l) == "signal_forwarded" && l.contains(r#""signal":"SIGUSR1""#)),
        "{}",
        out.stderr
    );
}

#[test]
fn verbose_text_says_how_long_the_acquire_waited() {
    let redis = RedisServer::start();
    Redlock::run(&redis)
        .key("text")
        .arg("-v")
        .sh("true")
        .status(0)
        .stderr_prefixed()
        .stderr_contains("acquired lock 'text' after ")
        .stderr_contains("released lock 'text'")
        .output();
    Redlock::run(&redis)
        .key("text")
        .sh("true")
        .stderr("")
        .output();
}
