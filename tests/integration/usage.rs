//! Bad command lines and environment values: exit 64 with one `redlock: ` line on stderr, the
//! command not run, nothing locked. --help and --version exit 0; valid spellings are accepted.

use crate::common::*;

/// One bad invocation: arguments after `run` (the marker command is appended unless
/// `no_command`), plus environment variables.
struct Case<'a> {
    args: Vec<String>,
    env: &'a [(&'a str, &'a str)],
    no_command: bool,
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Runs every case against a live server and collects all deviations from the contract.
/// A password that appears in some bad URLs and must never be printed.
const SECRET: &str = "hunter2-secret";

fn assert_usage_errors(cases: Vec<Case>) {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let mut failures = Vec::new();
    for case in &cases {
        let mut redlock = Redlock::new()
            .env("REDLOCK_URL", redis.url())
            .args(&case.args);
        if !case.no_command {
            redlock = redlock.sh(&marker_script(&dir));
        }
        for (k, v) in case.env {
            redlock = redlock.env(k, v);
        }
        // Checked below, every case's problems gathered in one failure.
        let out = redlock.any_status().any_stdout().any_stderr().output();
        let mut problems = Vec::new();
        let lines: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        if out.status.code() != Some(64) {
            problems.push(format!("exit {:?}, want 64", out.status));
        }
        if lines.len() != 1 || !lines[0].starts_with("redlock: ") {
            problems.push("stderr is not one `redlock: ` line".to_string());
        }
        if !out.stdout.is_empty() {
            problems.push(format!("wrote to stdout {:?}", out.stdout));
        }
        if out.stderr.contains(SECRET) {
            problems.push("printed the password".to_string());
        }
        if dir.join("marker").exists() {
            problems.push("ran the command".to_string());
            let _ = std::fs::remove_file(dir.join("marker"));
        }
        let keys = redis.all_keys();
        if !keys.is_empty() {
            problems.push(format!("left keys {keys:?}"));
            redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();
        }
        if !problems.is_empty() {
            failures.push(format!(
                "args {:?} env {:?}: {}; stderr {:?}",
                case.args,
                case.env,
                problems.join(", "),
                out.stderr
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad invocations mishandled:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn run_case(a: &[&str]) -> Case<'static> {
    let mut v = vec!["run".to_string()];
    v.extend(args(a));
    Case {
        args: v,
        env: &[],
        no_command: false,
    }
}

#[test]
fn missing_or_empty_key() {
    assert_usage_errors(vec![
        run_case(&[]),
        run_case(&["--key", ""]),
        run_case(&["--ttl", "5s"]),
    ]);
}

#[test]
fn missing_command() {
    assert_usage_errors(vec![
        Case {
            args: args(&["run", "--key", "k"]),
            env: &[],
            no_command: true,
        },
        Case {
            args: args(&["run", "--key", "k", "--"]),
            env: &[],
            no_command: true,
        },
    ]);
}

#[test]
fn bad_ttl() {
    assert_usage_errors(
        ["0", "0s", "abc", "-5s", "99999999999h", "", "5 parsecs"]
            .iter()
            .map(|t| run_case(&["--key", "k", "--ttl", t]))
            .collect(),
    );
}

#[test]
fn bad_wait() {
    assert_usage_errors(
        ["garbage", "-1s", "", "for ever"]
            .iter()
            .map(|w| run_case(&["--key", "k", "--wait", w]))
            .collect(),
    );
}

#[test]
fn bad_conflict_exit_code() {
    assert_usage_errors(
        ["256", "-1", "abc", "", "1000"]
            .iter()
            .map(|c| run_case(&["--key", "k", "--conflict-exit-code", c]))
            .collect(),
    );
}

#[test]
fn bad_stop_signal() {
    assert_usage_errors(
        ["NOPE", "SIGNOPE", "", "0", "99", "-15"]
            .iter()
            .map(|s| run_case(&["--key", "k", "--stop-signal", s]))
            .collect(),
    );
}

/// --kill-after is any duration: longer than the ttl is fine (the lease is renewed during the
/// grace after a stop request; after the loss of the lease, the grace is cut to what is left).
#[test]
fn kill_after_must_be_a_duration_and_may_outlast_the_ttl() {
    assert_usage_errors(vec![
        run_case(&["--key", "k", "--kill-after", "soon"]),
        run_case(&["--key", "k", "--kill-after", "-1s"]),
    ]);
    let redis = RedisServer::start();
    Redlock::run(&redis)
        .key("k")
        .ttl("1s")
        .args(["--kill-after", "1h"])
        .command(["true"])
        .status(0)
        .stderr("")
        .output();
}

#[test]
fn bad_max_runtime() {
    assert_usage_errors(vec![
        run_case(&["--key", "k", "--max-runtime", "abc"]),
        run_case(&["--key", "k", "--max-runtime", "-3s"]),
    ]);
}

#[test]
fn unknown_flags_and_subcommands() {
    assert_usage_errors(vec![
        run_case(&["--key", "k", "--bogus"]),
        run_case(&["--key", "k", "-x"]),
        Case {
            args: args(&["frobnicate", "--key", "k"]),
            env: &[],
            no_command: false,
        },
        Case {
            args: args(&["--bogus"]),
            env: &[],
            no_command: true,
        },
    ]);
}

#[test]
fn bad_docs_subcommands() {
    let case = |a: &[&str]| Case {
        args: args(a),
        env: &[],
        no_command: true,
    };
    assert_usage_errors(vec![
        case(&["completions", "nosh"]),
        case(&["completions", ""]),
        case(&["completions"]),
        case(&["completions", "bash", "zsh"]),
        case(&["man", "extra"]),
        case(&["man", "--bogus"]),
    ]);
}

#[test]
fn bad_urls() {
    assert_usage_errors(
        [
            "redis://127.0.0.1:99999",
            "redis://127.0.0.1:notaport",
            "foo://127.0.0.1:6379",
            "http://127.0.0.1:6379",
            "not a url",
            "",
            "redis://:hunter2-secret@127.0.0.1:99999",
            "redis://alice:hunter2-secret@127.0.0.1:6379/notadb",
            "ftp://alice:hunter2-secret@127.0.0.1",
            "redis+unix:///nonexistent.sock?db=x&pass=hunter2-secret",
        ]
        .iter()
        .map(|u| run_case(&["--key", "k", "--url", u]))
        .collect(),
    );
}

#[test]
fn bad_environment_values() {
    let env_case = |env| Case {
        args: args(&["run", "--key", "k"]),
        env,
        no_command: false,
    };
    assert_usage_errors(vec![
        env_case(&[("REDLOCK_TTL", "abc")]),
        env_case(&[("REDLOCK_TTL", "0")]),
        env_case(&[("REDLOCK_WAIT", "garbage")]),
        env_case(&[("REDLOCK_CONFLICT_EXIT_CODE", "300")]),
        env_case(&[("REDLOCK_STOP_SIGNAL", "NOPE")]),
        env_case(&[("REDLOCK_KILL_AFTER", "later")]),
        env_case(&[("REDLOCK_MAX_RUNTIME", "abc")]),
        env_case(&[("REDLOCK_URL", "foo://127.0.0.1:1")]),
    ]);
}

#[test]
fn help_and_version_exit_0() {
    for (a, needle) in [
        (&["--help"][..], "run"),
        (&["run", "--help"][..], "--key"),
        (&["run", "--help"][..], "--wait"),
        (&["--help"][..], "completions"),
        (&["completions", "--help"][..], "powershell"),
        (&["man", "--help"][..], "man -l -"),
        (&["--version"][..], env!("CARGO_PKG_VERSION")),
        (&["-V"][..], env!("CARGO_PKG_VERSION")),
    ] {
        Redlock::new()
            .args(a)
            .status(0)
            .stdout_contains(needle)
            .output();
    }
}

#[test]
fn valid_spellings_are_accepted() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let cases: &[&[&str]] = &[
        &["--ttl", "1500ms"],
        &["--ttl", "2s", "--kill-after", "1s"],
        &["--wait", "forever"],
        &["--wait", "0"],
        &["--wait", "2s"],
        &["--stop-signal", "TERM"],
        &["--stop-signal", "SIGTERM"],
        &["--stop-signal", "15"],
        &["--stop-signal", "INT"],
        &["--stop-signal", "SIGHUP"],
        &["--conflict-exit-code", "0"],
        &["--conflict-exit-code", "255"],
        &["--max-runtime", "1m"],
        &["--prefix", "x:"],
        &["-v"],
        &["-q"],
    ];
    for (i, opts) in cases.iter().enumerate() {
        let marker = dir.join(&format!("m{i}"));
        let script = format!("touch {}", shell_quote(&marker));
        let redlock = Redlock::run(&redis).key("valid").args(*opts).sh(&script);
        // -v: its lifecycle lines; every other spelling is silent.
        let redlock = if opts.contains(&"-v") {
            redlock
                .stderr_prefixed()
                .stderr_contains("acquired lock 'valid'")
        } else {
            redlock
        };
        redlock.status(0).output();
        assert!(marker.exists(), "{opts:?}: command not run");
    }
}

/// A value that starts with '-' is the option's value, refused as a value: clap's "unexpected
/// argument '-1' found; to pass '-1' as a value, use '-- -1'" names the wrong value, and its
/// advice would make -1 the command.
#[test]
fn a_value_starting_with_a_dash_is_the_options_value() {
    let mut failures = Vec::new();
    for (option, value) in [
        ("--stop-signal", "-15"),
        ("--stop-signal", "-TERM"),
        ("--conflict-exit-code", "-1"),
        ("--min-replicas", "-1"),
        ("--limit", "-1"),
        ("--ttl", "-5s"),
        ("--wait", "-1s"),
        ("--kill-after", "-1s"),
        ("--max-runtime", "-1s"),
        ("--min-interval", "-1s"),
        ("--splay", "-1s"),
    ] {
        let out = Redlock::sub("run")
            .env("REDLOCK_URL", "redis://127.0.0.1:1")
            .args(["--key", "k", option, value])
            .command(["true"])
            .status(64)
            .any_stderr()
            .output();
        let want = format!("redlock: invalid value '{value}' for '{option} <");
        if !out.stderr.starts_with(&want) || out.stderr.lines().count() != 1 {
            failures.push(format!("{option} {value}: {:?}", out.stderr));
        }
    }
    let out = Redlock::sub("check")
        .env("REDLOCK_URL", "redis://127.0.0.1:1")
        .args(["--key", "k", "--max-age", "-1s"])
        .status(3)
        .any_stdout()
        .any_stderr()
        .output();
    if !out.stdout.contains("invalid value '-1s' for '--max-age <") {
        failures.push(format!("--max-age -1s: {:?}", out.stdout));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
