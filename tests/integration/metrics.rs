//! `--metrics-file`: the textfile-collector file written on every exit path, atomically, with
//! the last success carried over from the previous file.

use std::path::Path;

use crate::common::*;

/// The value of the series starting with `head` (name and labels).
fn value(text: &str, head: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(head)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

fn metrics_of(path: &Path) -> String {
    let text = read(path);
    // Every sample line is `name{labels} value`, after its HELP and TYPE lines.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, v) = line.rsplit_once(' ').unwrap();
        assert!(series.contains("{key=\""), "{line}");
        v.parse::<f64>()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
    }
    text
}

fn no_temp_files(dir: &TempDir) {
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
}

#[test]
fn every_exit_path_writes_the_file_and_keeps_the_last_success() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("job.prom");
    let file = prom.to_str().unwrap();
    let key = r#"job "a"\b"#;
    let k = r#"{key="job \"a\"\\b""#;

    Redlock::run(&redis)
        .key(key)
        .args(["--metrics-file", file])
        .ttl("300ms")
        .sh("sleep 0.5")
        .status(0)
        // A renewal slow on a loaded machine (50 ms allowed here) warns; nothing else is said.
        .stderr_prefixed()
        .output();
    let text = metrics_of(&prom);
    assert_eq!(
        value(&text, &format!("redlock_exit_status{k}}}")),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        value(&text, &format!("redlock_outcome{k},outcome=\"success\"}}")),
        Some(1.0),
        "{text}"
    );
    assert!(
        value(&text, &format!("redlock_renewals{k}}}")).unwrap() >= 1.0,
        "{text}"
    );
    assert!(
        value(&text, &format!("redlock_held_seconds{k}}}")).unwrap() > 0.0,
        "{text}"
    );
    let success = value(
        &text,
        &format!("redlock_last_success_timestamp_seconds{k}}}"),
    )
    .unwrap();
    let now = now_ns() as f64 / 1e9;
    assert!(
        success <= now && success > now - 600.0,
        "{success} vs {now}"
    );

    // A failure keeps the previous success.
    Redlock::run(&redis)
        .key(key)
        .env("REDLOCK_METRICS_FILE", file)
        .sh("exit 3")
        .status(3)
        .output();
    let text = metrics_of(&prom);
    assert_eq!(
        value(&text, &format!("redlock_exit_status{k}}}")),
        Some(3.0),
        "{text}"
    );
    assert!(text.contains(",outcome=\"failed\"} 1"), "{text}");
    assert_eq!(
        value(
            &text,
            &format!("redlock_last_success_timestamp_seconds{k}}}")
        ),
        Some(success)
    );

    // A conflict, and an error after parsing (a bad URL), write it too.
    let (holder, _) = Redlock::run(&redis).key(key).hold(&dir, "h");
    Redlock::run(&redis)
        .key(key)
        .args(["--metrics-file", file])
        .sh("true")
        .status(75)
        .output();
    let text = metrics_of(&prom);
    assert!(text.contains(",outcome=\"busy\"} 1"), "{text}");
    assert_eq!(
        value(&text, &format!("redlock_exit_status{k}}}")),
        Some(75.0)
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);

    Redlock::run_at("http://nope")
        .key(key)
        .args(["--metrics-file", file])
        .command(["true"])
        .status(64)
        .stderr_lines(1)
        .output();
    let text = metrics_of(&prom);
    assert!(text.contains(",outcome=\"usage\"} 1"), "{text}");
    assert_eq!(
        value(
            &text,
            &format!("redlock_last_success_timestamp_seconds{k}}}")
        ),
        Some(success)
    );
    no_temp_files(&dir);
}

#[test]
fn a_min_interval_skip_reports_the_fleet_wide_last_success() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("skip.prom");
    let file = prom.to_str().unwrap();
    let fleet = || {
        Redlock::run(&redis)
            .key("fleet")
            .args(["--min-interval", "1h"])
            .sh("true")
    };
    fleet().status(0).output();
    fleet().args(["--metrics-file", file]).status(75).output();
    let text = metrics_of(&prom);
    assert!(text.contains(",outcome=\"skipped\"} 1"), "{text}");
    let success = value(
        &text,
        "redlock_last_success_timestamp_seconds{key=\"fleet\"}",
    )
    .expect(&text);
    let now = now_ns() as f64 / 1e9;
    assert!(
        success <= now + 1.0 && success > now - 600.0,
        "{success} vs {now}"
    );
}

#[test]
fn a_metrics_file_in_a_missing_directory_is_a_usage_error() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let missing = dir.join("no/such/dir/x.prom");
    Redlock::run(&redis)
        .key("m")
        .args(["--metrics-file", missing.to_str().unwrap()])
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    assert!(redis.all_keys().is_empty());
}

/// A directory redlock cannot write in (here a read-only file system, as a read-only mount or
/// a directory of another user is) is refused at start in one line: nothing runs, nothing is
/// locked, and no warning comes at the end.
#[test]
fn a_metrics_file_in_a_directory_redlock_cannot_write_is_a_usage_error() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let mount = format!(
        "mount -t tmpfs -o ro tmpfs {} && exec \"$0\" \"$@\"",
        shell_quote(&ro)
    );
    let file = ro.join("x.prom");
    let out = Redlock::run(&redis)
        .through(["unshare", "--mount", "sh", "-c", &mount])
        .key("m")
        .args(["--metrics-file", file.to_str().unwrap()])
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_lines(1)
        .output();
    // As docs/operating.md quotes it.
    let (file, ro) = (file.to_string_lossy(), ro.to_string_lossy());
    super::snapshots::assert_snapshot(
        "metrics-read-only.stderr",
        &out.stderr,
        &[(&file, "/x/y.prom"), (&ro, "/x")],
    );
    assert!(!dir.join("marker").exists());
    assert!(redis.all_keys().is_empty());
}
