//! `--splay`: a random wait before the first attempt, so that a fleet started by one crontab
//! line spreads out. Its spread, what `-v` and the JSON log say of it, a signal ending it, the
//! `--min-interval` check after it, and bad values.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;

/// The `splay_ms` a JSON log reported.
fn chosen(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(r#""event":"splay""#))
        .unwrap_or_else(|| panic!("no splay event in {stderr}"));
    line.split(r#""splay_ms":"#)
        .nth(1)
        .and_then(|r| r.split([',', '}']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no splay_ms in {line}"))
}

#[test]
fn starts_spread_over_the_splay_and_each_waits_what_it_says() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let launched = now_ns();
    let procs: Vec<Proc> = (0..6)
        .map(|i| {
            Redlock::run(&redis)
                .key(format!("s{i}"))
                .args(["--splay", "1s", "-v", "--log-format", "json"])
                .sh(&format!("date +%s%N > {}", dir.sh(&format!("start.{i}"))))
                .spawn()
        })
        .collect();
    let mut waited = Vec::new();
    for (i, proc) in procs.into_iter().enumerate() {
        let out = proc.finish();
        out.assert_code(0);
        let splay = chosen(&out.stderr);
        assert!(splay < 1000, "{splay} ms is not below --splay 1s");
        let start: i128 = wait_for_line(&dir.join(&format!("start.{i}")))
            .parse()
            .unwrap();
        let delay = ((start - launched) / 1_000_000) as u64;
        assert!(
            delay >= splay && delay < splay + 1000,
            "run {i} chose {splay} ms and started after {delay} ms"
        );
        waited.push(splay);
    }
    let spread = waited.iter().max().unwrap() - waited.iter().min().unwrap();
    // Six uniform draws over 1 s all within 100 ms of each other: about 3 in 100,000.
    assert!(spread > 100, "six splays within {spread} ms: {waited:?}");
    // The text line at -v says it too, before the lock is taken.
    let out = Redlock::run(&redis)
        .key("text")
        .env("REDLOCK_SPLAY", "300ms")
        .arg("-v")
        .sh("true")
        .status(0)
        .any_stderr()
        .output();
    let first = out.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("redlock: waiting ") && first.ends_with("(--splay 300ms)"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_signal_ends_the_splay_and_nothing_runs() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("splayed")
        .args(["--splay", "1h", "-v"])
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the splay line", || {
        proc.stderr_so_far().contains("before the first attempt")
    });
    let sent = Instant::now();
    proc.signal(Signal::SIGTERM);
    let out = proc.finish_within(Duration::from_secs(5));
    out.assert_signal(15);
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert!(!dir.join("marker").exists(), "the command ran");
    assert!(redis.all_keys().is_empty(), "{:?}", redis.all_keys());
}

#[test]
fn min_interval_is_checked_after_the_splay() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // Until a splay long enough to run another host's job inside it comes up (4 in 5 do).
    for _ in 0..10 {
        let late = Redlock::run(&redis)
            .key("daily")
            .args([
                "--splay",
                "5s",
                "--min-interval",
                "1h",
                "-v",
                "--log-format",
                "json",
            ])
            .sh(&marker_script(&dir))
            .spawn();
        wait_until(PATIENCE, "the splay event", || {
            proc_says_splay(&late.stderr_so_far())
        });
        let started = Instant::now();
        let splay = Duration::from_millis(chosen(&late.stderr_so_far()));
        if splay < Duration::from_secs(1) {
            late.finish().assert_code(0);
            std::fs::remove_file(dir.join("marker")).unwrap();
            // Its success counts for --min-interval: both its records go.
            redis.del(&format!("{}:done", lock_key("daily")));
            redis.del(&format!("{}:counts", lock_key("daily")));
            continue;
        }
        // Another host runs the job while this one splays...
        Redlock::run(&redis)
            .key("daily")
            .args(["--min-interval", "1h"])
            .sh("true")
            .status(0)
            .output();
        assert!(started.elapsed() < splay, "the other run took too long");
        // ...and this one, once its splay is over, skips.
        let out = late.finish();
        out.assert_code(75);
        assert!(
            out.stderr.contains(r#""event":"skipped""#),
            "{}",
            out.stderr
        );
        assert!(!dir.join("marker").exists(), "the command ran");
        return;
    }
    panic!("ten splays of --splay 5s all under 1 s");
}

fn proc_says_splay(stderr: &str) -> bool {
    stderr.contains(r#""event":"splay""#)
}

#[test]
fn a_bad_splay_is_a_usage_error_and_nothing_runs() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for (flag, env) in [
        (Some("-1s"), None),
        (Some("soon"), None),
        (Some(""), None),
        (None, Some("2 0s")),
    ] {
        let mut run = Redlock::run(&redis).key("bad");
        if let Some(value) = flag {
            run = run.args(["--splay", value]);
        }
        if let Some(value) = env {
            run = run.env("REDLOCK_SPLAY", value);
        }
        run.sh(&marker_script(&dir))
            .status(64)
            .stderr_lines(1)
            .stderr_prefixed()
            .stderr_contains("--splay")
            .output();
    }
    assert!(!dir.join("marker").exists());
    assert!(redis.all_keys().is_empty());
}
