//! Hostile input: every flag with malformed values (empty, negative, overflowing, not UTF-8,
//! huge), odd lock names, bad URLs, TLS against a plain port, and servers answering garbage.
//! Each gets one `redlock: ` line and its documented status, no panic, nothing run or locked;
//! odd lock names the rules allow work end to end.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::Duration;

use crate::common::*;
use crate::integration::fake::{Answer, FakeServer, Then};

fn os(s: &str) -> OsString {
    OsString::from(s)
}

/// Bytes that are not UTF-8.
fn not_utf8() -> OsString {
    OsString::from_vec(vec![b'k', 0xff, 0xfe, b'!'])
}

/// One hostile invocation: `run <args> -- sh -c <marker>` with `env`, expecting `want`.
struct Case {
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    want: i32,
}

fn case(want: i32, args: &[OsString]) -> Case {
    Case {
        args: args.to_vec(),
        env: Vec::new(),
        want,
    }
}

/// `--key k <flag> <value>` for every value, expecting `want`.
fn flag_cases(flag: &str, values: &[OsString], want: i32) -> Vec<Case> {
    values
        .iter()
        .map(|v| case(want, &[os("--key"), os("k"), os(flag), v.clone()]))
        .collect()
}

/// Runs every case against a live server; collects every deviation from the contract.
fn assert_cases(redis: &RedisServer, cases: Vec<Case>) {
    let dir = TempDir::new();
    let mut failures = Vec::new();
    for c in &cases {
        let mut redlock = Redlock::sub("run")
            .env("REDLOCK_URL", redis.url())
            .args(&c.args)
            .sh(&marker_script(&dir));
        for (k, v) in &c.env {
            redlock = redlock.env(k, v);
        }
        // Checked below, every case's problems gathered in one failure.
        let out = redlock.any_status().any_stdout().any_stderr().output();
        let mut problems = Vec::new();
        let lines: Vec<&str> = out.stderr.lines().collect();
        if out.status.code() != Some(c.want) {
            problems.push(format!("exit {:?}, want {}", out.status, c.want));
        }
        if lines.len() != 1 || !lines[0].starts_with("redlock: ") {
            problems.push("stderr is not one `redlock: ` line".into());
        }
        // A 100 KB value is not echoed whole: the line stays readable.
        if out.stderr.len() > 400 {
            problems.push(format!("a {}-byte line", out.stderr.len()));
        }
        if out.stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if !out.stdout.is_empty() {
            problems.push(format!("wrote to stdout {:?}", out.stdout));
        }
        if dir.join("marker").exists() {
            problems.push("ran the command".into());
            let _ = std::fs::remove_file(dir.join("marker"));
        }
        let keys = redis.all_keys();
        if !keys.is_empty() {
            problems.push(format!("left keys {keys:?}"));
            redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();
        }
        if !problems.is_empty() {
            let shown: Vec<String> = c.args.iter().map(|a| a.to_string_lossy().into()).collect();
            let shown = shown.join(" ");
            let shown = if shown.len() > 120 {
                format!("{}... ({} bytes)", &shown[..120], shown.len())
            } else {
                shown
            };
            failures.push(format!(
                "args [{shown}] env {:?}: {}; stderr {:?}",
                c.env,
                problems.join(", "),
                out.stderr.chars().take(300).collect::<String>()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} hostile invocations mishandled:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn every_flag_with_malformed_values() {
    let redis = RedisServer::start();
    let durations: Vec<OsString> = [
        "",
        " ",
        "-1s",
        "-0",
        "99999999999h",
        "18446744073709551616",
        "18446744073709551615s",
        "1e3",
        "0x10",
        "+5s",
        "١s",
        "5 parsecs",
        "366d",
        // humantime would take these as 10 s.
        "1 0s",
        "1\n0s",
        "1\t0s",
    ]
    .iter()
    .map(|s| os(s))
    .chain([not_utf8()])
    .collect();
    let mut cases = Vec::new();
    for flag in ["--ttl", "--wait", "--kill-after", "--max-runtime"] {
        let values: Vec<OsString> = durations
            .iter()
            // 0 is a valid --wait; "" and " " are errors everywhere.
            .filter(|v| !(flag == "--wait" && v.as_bytes() == b"0"))
            .cloned()
            .collect();
        cases.extend(flag_cases(flag, &values, 64));
    }
    cases.extend(flag_cases("--ttl", &[os("99ms"), os("0")], 64));
    cases.extend(flag_cases("--max-runtime", &[os("0"), os("0s")], 64));
    cases.extend(flag_cases("--wait", &[os("forever!"), os("never")], 64));
    cases.extend(flag_cases(
        "--conflict-exit-code",
        &[
            os(""),
            os("-1"),
            os("256"),
            os("99999999999999999999"),
            os("1.5"),
            not_utf8(),
        ],
        64,
    ));
    cases.extend(flag_cases(
        "--stop-signal",
        &[
            os(""),
            os("-9"),
            os("SIGSTOP"),
            os("9999999999"),
            not_utf8(),
        ],
        64,
    ));
    cases.extend(flag_cases("--prefix", &[os("{"), os("a}"), not_utf8()], 64));
    // Lock names the rules refuse: empty, starting with '}', longer than 1024 bytes, not UTF-8.
    for key in [
        os(""),
        os("}"),
        os("}a"),
        os(&"k".repeat(1025)),
        os(&"é".repeat(513)),
        os(&"k".repeat(100_000)),
        not_utf8(),
    ] {
        cases.push(case(64, &[os("--key"), key]));
    }
    cases.push(case(64, &[os("--key"), os("k"), os("-v"), os("-q")]));
    let mut eq = b"--key=".to_vec();
    eq.push(0xff);
    cases.push(case(64, &[OsString::from_vec(eq)]));
    // URLs: bad ports, unknown schemes, malformed, not UTF-8: usage errors.
    for url in [
        "",
        "redis://127.0.0.1:65536",
        "redis://127.0.0.1:-1",
        "redis://127.0.0.1:99999999999999999999",
        "redis://127.0.0.1:port",
        "redis://[::1",
        "redis://",
        "unix://",
        "redis+unix://",
        "valkey://127.0.0.1",
        "redis-sentinel://127.0.0.1:26379",
        "http://127.0.0.1:6379",
        "redis:/127.0.0.1",
        "redis://127.0.0.1:6379/0?protocol=resp9",
        "redis://127.0.0.1:6379\n/x",
    ] {
        cases.push(case(64, &[os("--key"), os("k"), os("--url"), os(url)]));
    }
    cases.push(case(64, &[os("--key"), os("k"), os("--url"), not_utf8()]));
    // URLs that parse but lead nowhere: Redis unavailable.
    let closed = free_port();
    for url in [
        format!("redis://127.0.0.1:{closed}"),
        "redis://127.0.0.1:0".to_owned(),
        "unix:///nonexistent/redis.sock".to_owned(),
        // TLS against a plain port.
        format!("rediss://127.0.0.1:{}", redis.port()),
        // A database Redis does not have: it answers with an error.
        format!("{}/99999", redis.url()),
    ] {
        cases.push(case(
            69,
            &[
                os("--key"),
                os("k"),
                os("--ttl"),
                os("1s"),
                os("--url"),
                os(&url),
            ],
        ));
    }
    // The same through the environment.
    for (name, value) in [
        ("REDLOCK_TTL", not_utf8()),
        ("REDLOCK_URL", not_utf8()),
        ("REDLOCK_WAIT", os("99999999999h")),
        ("REDLOCK_KILL_AFTER", os("-1s")),
        ("REDLOCK_PREFIX", os("{x}")),
        ("REDLOCK_STOP_SIGNAL", not_utf8()),
        ("REDLOCK_CONFLICT_EXIT_CODE", os("")),
        ("REDLOCK_MAX_RUNTIME", os("0")),
    ] {
        cases.push(Case {
            args: vec![os("--key"), os("k")],
            env: vec![(name, value)],
            want: 64,
        });
    }
    assert_cases(&redis, cases);
}

#[test]
fn non_utf8_values_name_the_flag_or_variable() {
    Redlock::sub("run")
        .key("k")
        .arg("--ttl")
        .arg(not_utf8())
        .command(["true"])
        .status(64)
        .stderr_contains("--ttl is not valid UTF-8")
        .output();
    Redlock::sub("run")
        .env("REDLOCK_WAIT", not_utf8())
        .key("k")
        .command(["true"])
        .status(64)
        .stderr_contains("REDLOCK_WAIT is not valid UTF-8")
        .output();
}

#[test]
fn odd_lock_names_the_rules_allow_work_end_to_end() {
    // Only empty names, names starting with '}' and names over 1024 bytes are refused; spaces,
    // newlines, braces and any Unicode are part of the name (the `{NAME}` hash tag is still the
    // first '{' ... first '}' span, so every key of one lock stays in one Cluster slot).
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let names = [
        "backup nightly".to_owned(),
        " leading and trailing ".to_owned(),
        "line\nbreak".to_owned(),
        "tab\there".to_owned(),
        "{}".to_owned(),
        "a{b}c".to_owned(),
        "x}".to_owned(),
        "{".to_owned(),
        "ключ 鍵 🔒".to_owned(),
        "k".repeat(1024),
        "é".repeat(512),
    ];
    for (i, name) in names.iter().enumerate() {
        let tag = format!("n{i}");
        let seen = dir.join(&format!("{tag}.key"));
        let script = format!(
            "printf %s \"$REDLOCK_KEY\" > {}; {}",
            shell_quote(&seen),
            hold_script(&dir, &tag)
        );
        let proc = Redlock::run(&redis).key(name).sh(&script).spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        let token = wait_for_line(&dir.join(&format!("{tag}.token")));
        assert_eq!(
            redis.get(&lock_key(name)).as_deref(),
            Some(token.as_str()),
            "name {name:?}: lock key not held with the command's token"
        );
        assert_eq!(read(&seen), *name, "REDLOCK_KEY differs from the name");
        touch(&dir.join(&format!("{tag}.go")));
        let out = proc.finish();
        out.assert_code(0);
        assert_eq!(
            redis.get(&lock_key(name)),
            None,
            "name {name:?} not released"
        );
        assert_eq!(
            redis
                .get(&fence_key(name))
                .map(|counter| fencing_token(&counter)),
            Some(fencing_token(&read(&dir.join(&format!("{tag}.fence"))))),
            "name {name:?}: fencing counter"
        );
    }
}

#[test]
fn non_utf8_command_arguments_pass_through_unchanged() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let out_file = dir.join("arg");
    let bytes = vec![0xffu8, 0xfe, b'\n', b'x'];
    Redlock::run(&redis)
        .key("k")
        .command([
            OsStr::new("sh"),
            OsStr::new("-c"),
            OsStr::new("printf %s \"$1\" > \"$2\""),
            OsStr::new("sh"),
            OsStr::from_bytes(&bytes),
            out_file.as_os_str(),
        ])
        .status(0)
        .output();
    assert_eq!(std::fs::read(&out_file).unwrap(), bytes);
}

#[test]
fn a_server_answering_garbage_exits_69_without_running_the_command() {
    let dir = TempDir::new();
    let mut noise = Vec::new();
    let mut x: u32 = 0x9e37_79b9;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let deep = "*1\r\n".repeat(200_000).into_bytes();
    let cases: Vec<(&str, Vec<u8>, Then)> = vec![
        ("not RESP", b"hello there\r\n".to_vec(), Then::Repeat),
        ("random bytes", noise, Then::Repeat),
        (
            "huge bulk length",
            b"$99999999999\r\n".to_vec(),
            Then::Close,
        ),
        ("truncated array", b"*2\r\n:1\r\n".to_vec(), Then::Hang),
        ("no reply, closed", Vec::new(), Then::Close),
        ("no reply, hung", Vec::new(), Then::Hang),
        ("wrong type", b"+OK\r\n".to_vec(), Then::Repeat),
        ("wrong values", b"*2\r\n:7\r\n:8\r\n".to_vec(), Then::Repeat),
        ("null array", b"*-1\r\n".to_vec(), Then::Repeat),
        (
            "integer overflow",
            b":99999999999999999999999\r\n".to_vec(),
            Then::Repeat,
        ),
        (
            "token not a number",
            b"*2\r\n:1\r\n$1\r\nx\r\n".to_vec(),
            Then::Repeat,
        ),
        (
            "NOSCRIPT forever",
            b"-NOSCRIPT no\r\n".to_vec(),
            Then::Repeat,
        ),
        ("deep nesting", deep, Then::Close),
    ];
    let mut failures = Vec::new();
    for (what, reply, then) in cases {
        let server = FakeServer::start(Answer::Reply { reply, then });
        let out = Redlock::run_at(&server.url())
            .key("k")
            .ttl("1s")
            .wait("2s")
            .sh(&marker_script(&dir))
            // Checked below, every reply's problems gathered in one failure.
            .any_status()
            .any_stderr()
            .output();
        let lines: Vec<&str> = out.stderr.lines().collect();
        let mut problems = Vec::new();
        if out.status.code() != Some(69) {
            problems.push(format!("exit {:?}, want 69", out.status));
        }
        // One line; or, for a server that does not answer (which a --wait rides out), the
        // warning that it is retried, then the line.
        let retried = lines.len() == 2 && lines[0].contains("; retrying until the wait ends");
        if !(lines.len() == 1 || retried) || lines.iter().any(|l| !l.starts_with("redlock: ")) {
            problems.push("stderr is not one `redlock: ` line".to_owned());
        }
        if dir.join("marker").exists() {
            problems.push("ran the command".to_owned());
            let _ = std::fs::remove_file(dir.join("marker"));
        }
        // Each request times out after ttl/3; a --wait of 2 s bounds the retries.
        if out.elapsed > Duration::from_secs(10) {
            problems.push(format!("took {:?}", out.elapsed));
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{what}: {}; stderr {:?}",
                problems.join(", "),
                out.stderr.chars().take(300).collect::<String>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A key of another kind where redlock keeps one of its own beside the lock (the fencing
/// counter, the holder's details, the fair queue, a waiter's deadline): the run is refused with
/// 69 and one line naming that key, nothing runs, and the lock is not left taken, though Redis
/// keeps what a script wrote before a command failed (each script undoes it: guard.lua). The
/// record of runs serves the operator, not the lock: a foreign key there stops nothing.
#[test]
fn a_foreign_key_beside_the_lock_is_named_and_leaves_the_lock_free() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let addr = format!("127.0.0.1:{}", redis.port());
    let foreign = |suffix: &str| {
        redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();
        redis::cmd("SADD")
            .arg(format!("{}{suffix}", lock_key("x")))
            .arg("member")
            .exec(&mut redis.conn())
            .unwrap();
    };
    for (suffix, flags) in [
        (":fence", &[][..]),
        (":fence", &["--limit", "2"][..]),
        (":fence", &["--shared"][..]),
        (":holder", &[][..]),
        (":queue", &["--fair"][..]),
        (":alive", &["--limit", "2"][..]),
    ] {
        foreign(suffix);
        Redlock::run(&redis)
            .key("x")
            .args(flags)
            .sh(&marker_script(&dir))
            .status(69)
            .stderr(&format!(
                "redlock: cannot take lock 'x': Redis at {addr} holds a set at \
                 redlock:{{x}}{suffix}, where redlock keeps a key of its own: delete that key \
                 if nothing else uses it\n"
            ))
            .output();
        assert_eq!(
            redis.pttl(&lock_key("x")),
            -2,
            "{suffix} {flags:?}: left taken"
        );
        assert!(!dir.join("marker").exists(), "{suffix} {flags:?}: it ran");
        let kept: String = redis::cmd("TYPE")
            .arg(format!("{}{suffix}", lock_key("x")))
            .query(&mut redis.conn())
            .unwrap();
        assert_eq!(kept, "set", "{suffix}: the foreign key was touched");
    }
    // What only the release touches, or only records: the run goes on and the release, done,
    // is not turned into a warning by the bookkeeping after it (a foreign :queue did: "could
    // not release", though the lock was deleted).
    for (suffix, flags) in [
        (":runs", &[][..]),
        (":counts", &[][..]),
        (":queue", &[][..]),
        (":queue", &["--limit", "2"][..]),
    ] {
        foreign(suffix);
        Redlock::run(&redis)
            .key("x")
            .args(flags)
            .sh(&marker_script(&dir))
            .output();
        assert!(dir.join("marker").exists(), "{suffix}: it did not run");
        std::fs::remove_file(dir.join("marker")).unwrap();
        assert_eq!(redis.pttl(&lock_key("x")), -2, "{suffix}: left taken");
    }
}

/// A field of the lock's counters that is not a number (something else wrote it) is not one
/// of redlock's: `status`, `history` and `check` read the rest as before (they said
/// "unexpected reply" with the whole record of runs in one line).
#[test]
fn a_counter_that_is_not_a_number_is_left_out() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("c").sh("true").output();
    redis::cmd("HSET")
        .arg(format!("{}:counts", lock_key("c")))
        .arg("busy")
        .arg("abc")
        .exec(&mut redis.conn())
        .unwrap();
    Redlock::admin("status", &redis)
        .key("c")
        .stdout_contains("counts:   0 busy, 0 skipped, 0 lost; runs ended: 1 success")
        .output();
    Redlock::admin("history", &redis)
        .key("c")
        .stdout_contains("success (exit 0)")
        .output();
    Redlock::admin("check", &redis)
        .key("c")
        .args(["--max-age", "1h"])
        .stdout_contains("OK: lock 'c' last succeeded")
        .output();
}

/// Control characters in a holder's command line and in a lock name are written escaped on
/// every line that shows them, as status and list do: `release --force`'s line about the
/// holder it removed (it printed the command raw, ESC sequences, tab and newline included), and
/// `check`'s UNKNOWN line (a newline became a space, ESC stayed raw).
#[test]
fn control_characters_are_escaped_by_release_force_and_check_unknown() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "{} #\u{1b}]0;TITLE\u{7}\u{1b}[2J\n# line2\ttab",
        hold_script(&dir, "h")
    );
    let holder = Redlock::run(&redis).key("ml").ttl("3s").sh(&script).spawn();
    wait_for_file(&dir.join("h.ready"));
    let out = Redlock::admin("release", &redis)
        .key("ml")
        .arg("--force")
        .status(0)
        .stdout_contains("\\u{1b}]0;TITLE\\u{7}\\u{1b}[2J\\n# line2\\ttab')")
        .output();
    let body = out.stdout.strip_suffix('\n').unwrap();
    assert!(!body.chars().any(char::is_control), "{:?}", out.stdout);
    touch(&dir.join("h.go"));
    holder.finish().assert_code(76);

    let out = Redlock::admin_at("check", "redis://127.0.0.1:1")
        .key("a\nb\u{1b}[2J")
        .args(["--max-age", "1h"])
        .status(3)
        .stdout_contains("lock 'a\\nb\\u{1b}[2J'")
        .any_stderr()
        .output();
    let body = out.stdout.strip_suffix('\n').unwrap();
    assert!(!body.chars().any(char::is_control), "{:?}", out.stdout);
}

/// A run in the record whose numbers redlock cannot read (a start that is not a number or is
/// negative, a fence past i64, a pid or an end of 20-odd digits) is left out like an entry that
/// is not JSON: `status` still shows the holder, `history` and `check` the readable runs (all
/// three failed with "unexpected reply").
#[test]
fn a_run_entry_with_unreadable_numbers_is_left_out() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    Redlock::run(&redis).key("fr2").sh("true").output();
    let (holder, token) = Redlock::run(&redis).key("fr2").ttl("5s").hold(&dir, "h");
    let runs = format!("{}:runs", lock_key("fr2"));
    for bad in [
        r#"{"token":"x","host":"h","pid":"1","started":"abc","fence":"5"}"#,
        r#"{"token":"x","host":"h","pid":"1","started":"-1","fence":"5"}"#,
        r#"{"token":"x","host":"h","pid":"1","started":"5","fence":"1e400"}"#,
        r#"{"token":"x","host":"h","pid":"12345678901234567890","started":"5","fence":"5"}"#,
        r#"{"token":"x","host":"h","pid":"1","started":"5","fence":"5","ended":"12345678901234567890123","outcome":"success","status":"0"}"#,
        r#"{"token":"x","host":"h","pid":"1","started":"5","fence":"5","ended":"6","outcome":"success","status":"99999999999"}"#,
    ] {
        redis::cmd("LPUSH")
            .arg(&runs)
            .arg(bad)
            .exec(&mut redis.conn())
            .unwrap();
        Redlock::admin("status", &redis)
            .key("fr2")
            .stdout_contains(&token)
            .stdout_contains("running")
            .output();
        Redlock::admin("history", &redis)
            .key("fr2")
            .stdout_contains("success (exit 0)")
            .stdout_contains("running")
            .output();
        Redlock::admin("check", &redis)
            .key("fr2")
            .args(["--max-age", "1h"])
            .stdout_contains("OK: lock 'fr2' last succeeded")
            .output();
    }
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}
