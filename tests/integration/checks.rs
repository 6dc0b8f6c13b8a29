//! `check`, the dead man's switch over the record of runs: its four statuses (OK, WARNING,
//! CRITICAL, UNKNOWN) with Redis up and down, and the monitored cron recipe packaging/ ships.

use std::time::Duration;

use super::records::host;
use crate::common::*;

fn check(url: &str, max_age: &str, status: i32, word: &str) -> Output {
    let out = Redlock::admin_at("check", url)
        .key("nightly")
        .args(["--max-age", max_age])
        .status(status)
        .any_stdout()
        .any_stderr()
        .output();
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    assert!(
        out.stdout.starts_with(&format!("{word}: ")),
        "{}",
        out.stdout
    );
    out
}

/// The fields of `check --json`'s object, as docs/operating.md lists them.
const FIELDS: [&str; 9] = [
    "status",
    "code",
    "key",
    "message",
    "max_age_ms",
    "last_success_age_ms",
    "last_run",
    "last_success",
    "counts",
];

/// `json` has each of [`FIELDS`], in that order.
#[track_caller]
fn has_the_documented_fields(json: &str) {
    let mut rest = json;
    for field in FIELDS {
        let name = format!(r#""{field}":"#);
        let at = rest
            .find(&name)
            .unwrap_or_else(|| panic!("no {name} (in order) in {json}"));
        rest = &rest[at + name.len()..];
    }
}

/// The record's last success unreadable (hand-edited past what a time can be): `check` judges
/// by the newest success it keeps, and its JSON shows that one too, not null beside a line
/// that names it.
#[test]
fn an_unreadable_last_success_gives_way_to_the_newest_kept_in_line_and_json() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("nightly").sh("true").output();
    let bad = r#"{"token":"x","host":"h","pid":"1","started":"1","fence":"1","n":"1","ended":"100000000000000000000","outcome":"success","status":"0"}"#;
    redis::cmd("HSET")
        .arg(format!("{}:counts", lock_key("nightly")))
        .arg("last_success")
        .arg(bad)
        .exec(&mut redis.conn())
        .unwrap();
    let json = Redlock::admin("check", &redis)
        .key("nightly")
        .args(["--max-age", "1h", "--json"])
        .status(0)
        .any_stdout()
        .output()
        .stdout;
    assert!(
        json.contains(r#""message":"OK: lock 'nightly' last succeeded"#),
        "{json}"
    );
    assert!(!json.contains(r#""last_success":null"#), "{json}");
    assert!(!json.contains(r#""last_success_age_ms":null"#), "{json}");
    has_the_documented_fields(&json);
}

#[test]
fn check_says_ok_warning_critical_or_unknown() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let run = |redis: &RedisServer, script: &str, status: i32| {
        Redlock::run(redis)
            .key("nightly")
            .sh(script)
            .status(status)
            .output();
    };
    let out = check(&url, "1h", 2, "CRITICAL");
    assert_eq!(
        out.stdout,
        format!(
            "CRITICAL: lock 'nightly' has no recorded run at 127.0.0.1:{} under prefix \
             'redlock:' (runs with another --url or --prefix are not seen there)\n",
            redis.port()
        )
    );
    assert_eq!(out.stderr, "");
    run(&redis, "exit 4", 4);
    let out = check(&url, "1h", 2, "CRITICAL");
    assert!(
        out.stdout
            .contains("has no recorded success; the last run started"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("failed (exit 4)"), "{}", out.stdout);
    run(&redis, "true", 0);
    let out = check(&url, "1h", 0, "OK");
    assert!(
        out.stdout
            .contains(&format!("last succeeded 0s ago on {} pid ", host())),
        "{}",
        out.stdout
    );
    assert_eq!(out.stderr, "");
    run(&redis, "exit 5", 5);
    let out = check(&url, "1h", 1, "WARNING");
    assert!(
        out.stdout.contains("but a later run did not") && out.stdout.contains("exit 5"),
        "{}",
        out.stdout
    );
    // JSON keeps the status.
    let json = Redlock::admin_at("check", &url)
        .key("nightly")
        .args(["--max-age", "1h", "--json"])
        .status(1)
        .any_stdout()
        .output()
        .stdout;
    assert!(
        json.starts_with(r#"{"status":"WARNING","code":1,"key":"nightly","message":"WARNING: "#),
        "{json}"
    );
    assert!(json.contains(r#""max_age_ms":3600000"#), "{json}");
    has_the_documented_fields(&json);
    // Older than --max-age.
    std::thread::sleep(Duration::from_millis(50));
    let out = check(&url, "10ms", 2, "CRITICAL");
    assert!(
        out.stdout
            .contains("longer ago than --max-age 10ms; the last run started"),
        "{}",
        out.stdout
    );
    // Bad arguments: UNKNOWN, not 64; nothing read.
    for bad in [&["--max-age", "soon"][..], &["--max-age", "-1h"], &[]] {
        let out = Redlock::admin_at("check", &url)
            .key("nightly")
            .args(bad)
            .status(3)
            .stderr_lines(1)
            .stderr_prefixed()
            .any_stdout()
            .output();
        assert!(
            out.stdout.starts_with("UNKNOWN: "),
            "{bad:?}: {}",
            out.stdout
        );
    }
    // Redis down: UNKNOWN, with why.
    redis.kill();
    let out = check(&url, "1h", 3, "UNKNOWN");
    assert!(
        out.stdout
            .contains("cannot read the runs of lock 'nightly'"),
        "{}",
        out.stdout
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let json = Redlock::admin_at("check", &url)
        .key("nightly")
        .args(["--max-age", "1h", "--json"])
        .status(3)
        .any_stdout()
        .stderr_lines(1)
        .output()
        .stdout;
    assert!(
        json.starts_with(r#"{"status":"UNKNOWN","code":3,"key":"nightly","message":"UNKNOWN: "#),
        "{json}"
    );
    // The documented object, null where nothing is known.
    has_the_documented_fields(&json);
    assert!(
        json.ends_with(
            r#"","max_age_ms":3600000,"last_success_age_ms":null,"last_run":null,"last_success":null,"counts":null}
"#
        ),
        "{json}"
    );
    Redlock::admin_at("history", &url)
        .key("nightly")
        .status(69)
        .stderr_lines(1)
        .any_stdout()
        .output();
}

#[test]
fn the_monitored_cron_recipe_checks_as_documented() {
    let redis = RedisServer::start();
    let file = read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/cron/backup-monitored"),
    );
    let line = file
        .lines()
        .rev()
        .find_map(|l| {
            l.split_once("/usr/bin/redlock check ")
                .map(|(_, rest)| rest)
        })
        .expect("a check line");
    let options: Vec<&str> = line
        .split(" >")
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let check = || Redlock::admin("check", &redis).args(&options);
    check()
        .status(2)
        .stdout_contains("CRITICAL: lock 'backup' has no recorded run")
        .output();
    Redlock::run(&redis)
        .key("backup")
        .sh("true")
        .status(0)
        .output();
    check()
        .status(0)
        .stdout_contains("OK: lock 'backup' last succeeded")
        .output();
}
