//! Outputs as the docs show them, snapshot-tested so that a changed output fails with a diff to
//! accept or fix: every `--help`, `--version` and the usage errors (trycmd, one case per file in
//! tests/cmd/), and the messages docs/messages.md quotes and the `status` and `list` lines
//! docs/operating.md shows (the record of runs' lines are in `records`), which need a server (snapbox, one file each in
//! tests/integration/snapshots/). Then the docs are held to the snapshots: every message the
//! table quotes, and every line of the status example, is found in one.
//!
//! After an intended change, re-record and review the diff (docs/contributing.md):
//!     TRYCMD=overwrite SNAPSHOTS=overwrite cargo test --test integration -- snapshots:: messages::

use std::path::{Path, PathBuf};

use snapbox::Data;
use snapbox::assert::{Action, Assert};

use crate::common::*;

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/snapshots")
}

/// `actual` against the snapshot `name` (a file in tests/integration/snapshots/), after the
/// variable parts are replaced: each `(found, shown)` pair (a test's port by the documented one,
/// a temporary directory by `.`), then what [`redact`] hides. `SNAPSHOTS=overwrite` records.
#[track_caller]
pub fn assert_snapshot(name: &str, actual: &str, replace: &[(&str, &str)]) {
    let mut text = actual.to_owned();
    for (found, shown) in replace {
        text = text.replace(found, shown);
    }
    let expected = Data::read_from(&snapshot_dir().join(name), None);
    Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .eq(Data::text(redact(&text)), expected);
}

/// Hides what changes from run to run, as `[..]` (snapbox's wildcard, so that the docs' own
/// values match too): owner tokens, pids, this host's name, durations (`12m 4s`, `1ms`),
/// fencing tokens and the fencing counter's value.
pub fn redact(text: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let mut out = Vec::new();
    // A list line's fields are tab-separated: each is redacted alone.
    for line in text
        .lines()
        .flat_map(|line| line.split('\t').map(move |f| (f, line)))
    {
        let (line, whole) = line;
        if !out.is_empty() && whole.contains('\t') && !whole.starts_with(line) {
            out.push("\t".to_owned());
        } else if !out.is_empty() {
            out.push("\n".to_owned());
        }
        let mut words: Vec<String> = Vec::new();
        let mut after_pid = false;
        for word in line.split(' ') {
            let lead = &word[..word.len() - word.trim_start_matches('(').len()];
            let core = word[lead.len()..].trim_end_matches([',', ';', ':', ')']);
            let tail = &word[lead.len() + core.len()..];
            let hidden = after_pid
                || is_token(core)
                || is_duration(core)
                || is_timestamp(core)
                || (!host.is_empty() && core == host)
                || is_fence(core)
                || (line.trim_start().starts_with("fencing:") && core.parse::<u64>().is_ok());
            // The word after `pid` or `fence` (a run's fencing token) is a number that changes.
            after_pid = core == "pid" || core == "fence";
            let word = if hidden {
                format!("{lead}[..]{tail}")
            } else {
                word.to_owned()
            };
            // `12m 4s` is one duration: one wildcard.
            if word.starts_with("[..]") && words.last().is_some_and(|w| w == "[..]") && hidden {
                *words.last_mut().unwrap() = word;
            } else {
                words.push(word);
            }
        }
        out.push(words.join(" "));
    }
    let mut text = out.concat();
    text.push('\n');
    text
}

/// A fencing token: the server's clock in microseconds (or one past it), 16 digits this decade.
fn is_fence(word: &str) -> bool {
    word.len() >= 15 && word.bytes().all(|b| b.is_ascii_digit())
}

/// A UUID, as redlock's owner tokens are.
fn is_token(word: &str) -> bool {
    word.len() == 36
        && word.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `2026-12-01T03:00:07Z`: a moment, RFC 3339 to the second.
fn is_timestamp(word: &str) -> bool {
    word.len() == 20
        && word.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            19 => c == 'Z',
            _ => c.is_ascii_digit(),
        })
}

/// `1ms`, `21s`, `12m`, `3h`, `2d` (humantime's parts).
fn is_duration(word: &str) -> bool {
    let digits = word.chars().take_while(char::is_ascii_digit).count();
    // A tenth of a second (`1.5s`), as redlock rounds below a minute.
    let unit = match word[digits..].strip_prefix('.') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => &rest[1..],
        _ => &word[digits..],
    };
    digits > 0 && ["ms", "us", "ns", "s", "m", "h", "d"].contains(&unit)
}

/// Whether `quoted` (a message as a page shows it) matches one line of any snapshot, whose
/// `[..]` match anything.
pub(super) fn in_a_snapshot(quoted: &str, snapshots: &[String]) -> bool {
    let verify = Assert::new().action(Action::Verify);
    snapshots.iter().flat_map(|s| s.lines()).any(|line| {
        let line = line.trim();
        let line = line.strip_prefix("redlock: ").unwrap_or(line);
        if line.replace("[..]", "").trim().is_empty() {
            return false; // a blank line, or one that would match anything
        }
        // The quote is the line, or one field of a tab-separated `list` line, or the start of
        // the line (`..., then where to look`; a quote ending in `...` elides the rest).
        let mut patterns = vec![line.to_owned()];
        patterns.extend(line.split('\t').map(str::to_owned));
        let start = quoted.strip_suffix("...").unwrap_or(quoted);
        patterns.into_iter().any(|pattern| {
            verify
                .try_eq(None, Data::text(quoted), Data::text(pattern))
                .is_ok()
        }) || verify
            .try_eq(None, Data::text(line), Data::text(format!("{start}[..]")))
            .is_ok()
    })
}

pub(super) fn all_snapshots() -> Vec<String> {
    let mut texts: Vec<String> = std::fs::read_dir(snapshot_dir())
        .unwrap()
        .map(|entry| read(&entry.unwrap().path()))
        .collect();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cmd")).unwrap()
    {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "stderr") {
            texts.push(read(&path));
        }
    }
    texts
}

#[test]
fn help_texts_and_usage_errors_match_their_snapshots() {
    trycmd::TestCases::new()
        .register_bin("redlock", Path::new(BIN))
        .case("tests/cmd/*.toml");
}

#[test]
fn redact_hides_what_changes_and_keeps_the_rest() {
    assert_eq!(
        redact(
            "  holder:   web1 pid 4711, for 12m 4s, lease 21s 300ms left, token 0f4c2a8e-5d0b-4c1e-9a57-3e2b8d6f1c90: ./export.sh eu"
        ),
        "  holder:   web1 pid [..], for [..], lease [..] left, token [..]: ./export.sh eu\n"
    );
    assert_eq!(redact("  fencing:  118"), "  fencing:  [..]\n");
    assert_eq!(
        redact("2026-11-30T03:00:07Z\tdb1 pid 18842\t41m 3s\tsuccess (exit 0)\tfence 411"),
        "[..]\tdb1 pid [..]\t[..]\tsuccess (exit 0)\tfence [..]\n"
    );
    assert_eq!(
        redact("  last run: 2026-12-01T03:02:41Z (3s ago), db2"),
        "  last run: [..] ([..] ago), db2\n"
    );
    assert_eq!(
        redact("lock 'k' is held elsewhere; gave up after 1ms"),
        "lock 'k' is held elsewhere; gave up after [..]\n"
    );
    let snapshot = ["redlock: lock 'k' is held elsewhere; gave up after [..]\n".to_owned()];
    assert!(in_a_snapshot(
        "lock 'k' is held elsewhere; gave up after 1ms",
        &snapshot
    ));
    assert!(!in_a_snapshot("lock 'k' is held here", &snapshot));
    assert!(!in_a_snapshot("anything", &["\n[..]\n".to_owned()]));
}

/// The first `code span` of each row's last column in docs/messages.md's table: what redlock
/// says, as quoted.
fn quoted_messages() -> Vec<String> {
    let page = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/messages.md"));
    page.lines()
        .skip_while(|line| !line.starts_with("| when"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|row| {
            let said = row.trim_end_matches('|').rsplit(" | ").next()?;
            // The first quote that is a message, not a flag (`with `-v`: `...``).
            let quoted = said
                .split('`')
                .skip(1)
                .step_by(2)
                .find(|span| !span.starts_with('-') || span.contains(' '))?;
            Some(quoted.to_owned())
        })
        .collect()
}

#[test]
fn every_message_the_docs_quote_is_in_a_snapshot() {
    let snapshots = all_snapshots();
    let quoted = quoted_messages();
    assert!(quoted.len() >= 15, "{quoted:?}");
    let missing: Vec<&String> = quoted
        .iter()
        .filter(|q| !in_a_snapshot(q, &snapshots))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/messages.md quotes what no snapshot shows (update the page, or add a snapshot):\n{}",
        missing
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn every_line_of_the_status_example_is_in_a_snapshot() {
    let page = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operating.md"));
    let example: Vec<&str> = page
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("lock 'pool'"))
        .take_while(|line| line.starts_with("      "))
        .map(str::trim)
        .collect();
    assert!(example.len() >= 5, "{example:?}");
    let snapshots = all_snapshots();
    let missing: Vec<&&str> = example
        .iter()
        .filter(|line| !in_a_snapshot(line, &snapshots))
        .collect();
    assert!(missing.is_empty(), "not in a snapshot: {missing:#?}");
}

/// A script `NAME` in `dir` that stands for a job: it creates `dir/ARG.ready` and runs until
/// `dir/ARG.go` exists, so `status` shows it as `./NAME ARG`.
fn job_script(dir: &TempDir, name: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        "#!/bin/sh\nd=$(dirname \"$0\")\ntouch \"$d/$1.ready\"\nwhile [ ! -e \"$d/$1.go\" ]; do sleep 0.02; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

/// The temporary directory's path, to be shown as `.`.
fn dir_of(dir: &TempDir) -> String {
    dir.path().to_string_lossy().into_owned()
}

#[test]
fn an_unreachable_redis() {
    let port = free_port().to_string();
    let out = Redlock::run_at(&format!("redis://127.0.0.1:{port}"))
        .key("k")
        .command(["true"])
        .status(69)
        .any_stderr()
        .output();
    assert_snapshot(
        "unreachable.stderr",
        &out.stderr,
        &[(&format!("127.0.0.1:{port}"), "127.0.0.1:6379")],
    );
}

/// A server that floods a reply, and one that trickles it: each refused, naming the server.
#[test]
fn a_flooding_and_a_trickling_server() {
    use super::fake::{Answer, FakeServer};
    for (name, answer) in [
        ("flood.stderr", Answer::Flood),
        (
            "trickle.stderr",
            Answer::Trickle {
                every: std::time::Duration::from_millis(200),
            },
        ),
    ] {
        let server = FakeServer::start(answer);
        let out = Redlock::run_at(&server.url())
            .key("k")
            .ttl("1s")
            .command(["true"])
            .status(69)
            .any_stderr()
            .output();
        assert_snapshot(name, &out.stderr, &[(&server.addr(), "127.0.0.1:6379")]);
    }
}

#[test]
fn a_busy_lock_a_lock_held_another_way_and_a_semaphores_status_and_list() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let export = job_script(&dir, "export.sh");
    let path = dir_of(&dir);
    let shown = [(path.as_str(), ".")];
    let mut holders = Vec::new();
    for region in ["eu", "us"] {
        holders.push(
            Redlock::run(&redis)
                .key("pool")
                .args(["--limit", "3"])
                .command([export.as_str(), region])
                .spawn(),
        );
        wait_for_file(&dir.join(&format!("{region}.ready")));
    }
    let status = Redlock::admin("status", &redis)
        .key("pool")
        .any_stdout()
        .output();
    assert_snapshot("status-semaphore.stdout", &status.stdout, &shown);
    let list = Redlock::admin("list", &redis).any_stdout().output();
    assert_snapshot("list-semaphore.stdout", &list.stdout, &shown);
    for region in ["eu", "us"] {
        std::fs::write(dir.join(&format!("{region}.go")), "").unwrap();
    }
    for holder in holders {
        holder.finish().assert_code(0);
    }

    // A semaphore of 3 asked for as one of 2.
    let (holder, _) = Redlock::run(&redis)
        .key("k")
        .args(["--limit", "3"])
        .hold(&dir, "sem");
    let other = Redlock::run(&redis)
        .key("k")
        .args(["--limit", "2"])
        .command(["true"])
        .status(64)
        .any_stderr()
        .output();
    assert_snapshot("held-another-way.stderr", &other.stderr, &shown);
    std::fs::write(dir.join("sem.go"), "").unwrap();
    holder.finish().assert_code(0);

    // A plain lock, busy: silent, and one line under -v.
    let (holder, _) = Redlock::run(&redis).key("k").hold(&dir, "k");
    let busy = Redlock::run(&redis)
        .key("k")
        .arg("-v")
        .command(["true"])
        .status(75)
        .any_stderr()
        .output();
    assert_snapshot("busy-verbose.stderr", &busy.stderr, &shown);
    std::fs::write(dir.join("k.go"), "").unwrap();
    holder.finish().assert_code(0);
}

#[test]
fn a_status_with_waiters() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("k").hold(&dir, "k");
    let mut waiters = Vec::new();
    for fair in [false, false, true] {
        let waiter = Redlock::run(&redis).key("k").wait("30s");
        let waiter = if fair { waiter.arg("--fair") } else { waiter };
        waiters.push(waiter.command(["true"]).spawn());
    }
    let mut status = String::new();
    wait_until(PATIENCE, "three waiters counted", || {
        status = Redlock::admin("status", &redis)
            .key("k")
            .any_stdout()
            .output()
            .stdout;
        status.contains("waiters:  3")
    });
    let waiters_line: String = status
        .lines()
        .filter(|line| line.trim_start().starts_with("waiters:"))
        .collect();
    assert_snapshot("status-waiters.stdout", &waiters_line, &[]);
    std::fs::write(dir.join("k.go"), "").unwrap();
    holder.finish().assert_code(0);
    for waiter in waiters {
        waiter.finish().assert_code(0);
    }
}

/// A 3 s lease, renewed every second: on a loaded machine a short lease's slow renewals would add
/// warning lines of their own before the loss.
#[test]
fn a_lost_lock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = Redlock::run(&redis)
        .key("k")
        .ttl("3s")
        .sh(&format!("touch {}; sleep 30", dir.sh("ready")))
        .spawn();
    wait_for_file(&dir.join("ready"));
    redis.del(&lock_key("k"));
    let out = holder.finish();
    out.assert_code(76);
    assert_snapshot("lost-lock.stderr", &out.stderr, &[]);
}

#[test]
fn commands_that_cannot_run() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let path = dir_of(&dir);
    let shown = [(path.as_str(), ".")];
    let job = dir.join("job.sh");
    let job = job.to_string_lossy();
    std::fs::write(&*job, "#!/usr/bin/python4\nprint('hi')\n").unwrap();
    std::fs::set_permissions(&*job, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Redlock::run(&redis)
        .key("k")
        .command([&*job])
        .status(126)
        .any_stderr()
        .output();
    assert_snapshot("bad-interpreter.stderr", &out.stderr, &shown);

    std::fs::set_permissions(&*job, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = Redlock::run(&redis)
        .key("k")
        .command([&*job])
        .status(126)
        .any_stderr()
        .output();
    assert_snapshot("not-executable.stderr", &out.stderr, &shown);

    let out = Redlock::run(&redis)
        .key("k")
        .command(["nosuchcmd"])
        .status(127)
        .any_stderr()
        .output();
    assert_snapshot("not-found.stderr", &out.stderr, &[]);
}
