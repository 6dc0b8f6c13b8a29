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
        // A field that is all wildcard (a history line's time) would match any quote.
        patterns.retain(|p| !p.replace("[..]", "").trim().is_empty());
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
        redact("lock 'k' is held by another run; gave up after 1.5s"),
        "lock 'k' is held by another run; gave up after [..]\n"
    );
    let snapshot = ["redlock: lock 'k' is held by another run; gave up after [..]\n".to_owned()];
    assert!(in_a_snapshot(
        "lock 'k' is held by another run; gave up after 1ms",
        &snapshot
    ));
    assert!(!in_a_snapshot("lock 'k' is held here", &snapshot));
    assert!(!in_a_snapshot("anything", &["\n[..]\n".to_owned()]));
    assert!(!in_a_snapshot(
        "anything",
        &["[..]\tdb1 pid [..]\n".to_owned()]
    ));
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

/// Every snapshot as a page can quote it: without backticks (a code span cannot hold them) and
/// with every loopback port the documented one.
fn snapshots_as_quoted() -> Vec<String> {
    all_snapshots()
        .iter()
        .map(|s| ports_shown(&s.replace('`', "")))
        .collect()
}

/// Whether `quote` is a line of `snapshots` (see [`snapshots_as_quoted`]): the whole line, or,
/// where the quote elides a part in the middle (`...`), a line around it, or where it stops
/// before the line's end (a clause), the line's start.
fn quoted_in(quote: &str, snapshots: &[String]) -> bool {
    let quote = ports_shown(quote);
    let elided = quote.replace("...", "[..]");
    let start = format!("{}...", quote.trim_end_matches("..."));
    [quote.as_str(), &elided, &start]
        .iter()
        .any(|q| in_a_snapshot(q, snapshots))
}

#[test]
fn every_message_the_docs_quote_is_in_a_snapshot() {
    let snapshots = snapshots_as_quoted();
    let quoted = quoted_messages();
    assert!(quoted.len() >= 15, "{quoted:?}");
    let missing: Vec<&String> = quoted
        .iter()
        .filter(|q| !quoted_in(q, &snapshots))
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

/// What the README and every page of docs/ quote of redlock's lines in running text: each code
/// span (a line break inside it read as a space) that starts as one of its lines does
/// (`redlock: `, `warning: `, `lock '`, `waiting `, `SIG...`), with `...` standing for what a
/// quote leaves out. docs/messages.md's table is checked above.
fn quoted_in_the_guide() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let starts = [
        "redlock: ",
        "warning: ",
        "lock '",
        "waiting ",
        "SIGTERM received",
    ];
    let mut quoted = Vec::new();
    for page in pages {
        let text = read(&page);
        // Code blocks hold commands and JSON, not quotes in running text.
        let prose: Vec<&str> = text.lines().filter(|l| !l.starts_with("    ")).collect();
        let prose = prose.join("\n");
        for span in prose.split('`').skip(1).step_by(2) {
            let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
            let said = span.strip_prefix("redlock: ").unwrap_or(&span);
            if starts.iter().any(|s| span.starts_with(s)) && said.len() > 20 {
                let name = page.file_name().unwrap().to_string_lossy().into_owned();
                quoted.push((name, said.to_owned()));
            }
        }
    }
    quoted
}

#[test]
fn every_line_the_guide_quotes_is_in_a_snapshot() {
    let snapshots = snapshots_as_quoted();
    let quoted = quoted_in_the_guide();
    assert!(quoted.len() >= 10, "{quoted:?}");
    let missing: Vec<String> = quoted
        .iter()
        .filter(|(_, q)| !quoted_in(q, &snapshots))
        .map(|(page, q)| format!("{page}: {q}"))
        .collect();
    assert!(
        missing.is_empty(),
        "the guide quotes what no snapshot shows (update the page, or add a snapshot):\n{}",
        missing.join("\n")
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

    // A plain lock, busy: silent, and one line under -v: without --wait, with one, and from a
    // run nested in the holder's command (its REDLOCK_KEY is the lock's).
    let (holder, _) = Redlock::run(&redis).key("k").hold(&dir, "k");
    let busy = |args: &[&str], nested: bool| {
        let run = Redlock::run(&redis).key("k").arg("-v").args(args);
        let run = if nested {
            run.env("REDLOCK_KEY", "k")
        } else {
            run
        };
        run.command(["true"])
            .status(75)
            .any_stderr()
            .output()
            .stderr
    };
    let said = [
        busy(&[], false),
        busy(&["--wait", "300ms"], false),
        busy(&[], true),
    ]
    .concat();
    assert_snapshot("busy-verbose.stderr", &said, &shown);
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

/// Every `127.0.0.1:PORT` as the docs show it, `127.0.0.1:6379`: the ports a test's servers got
/// are no part of what redlock says.
fn ports_shown(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:") {
        let (head, tail) = rest.split_at(at + "127.0.0.1:".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        out.push_str(if digits > 0 { "6379" } else { "" });
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The lines the guide quotes in running text, each from a real run (held to the pages by
/// `every_line_the_guide_quotes_is_in_a_snapshot` and the messages table's test): skips, busy
/// semaphores and shared locks, a stop request, a failed renewal, the splay, a key of another
/// kind, a foreign fencing counter, the metrics file's refusals, a wait for an unreachable
/// Redis, a proxy without Redis behind it, a lost reply, a quorum's majority, and a Sentinel
/// pointed at a sentinel.
#[test]
fn lines_the_guide_quotes() {
    use std::io::Read as _;
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let path = dir_of(&dir);
    let mut said = String::new();
    let mut say = |out: Output| {
        said.push_str(&out.stdout);
        said.push_str(&out.stderr);
    };
    let quiet = |r: Redlock| r.any_status().any_stdout().any_stderr().output();
    let hash = |cmd: &[&str]| {
        redis::cmd(cmd[0])
            .arg(&cmd[1..])
            .exec(&mut redis.conn())
            .unwrap()
    };

    // --min-interval skips after any success.
    quiet(Redlock::run(&redis).key("k").command(["true"]));
    say(quiet(
        Redlock::run(&redis)
            .key("k")
            .args(["--min-interval", "1h", "-v"])
            .command(["true"]),
    ));
    redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();

    // A semaphore with every slot taken, and a shared run beside an exclusive holder.
    let holders: Vec<Proc> = (0..3)
        .map(|i| {
            let tag = format!("s{i}");
            Redlock::run(&redis)
                .key("k")
                .args(["--limit", "3"])
                .hold(&dir, &tag)
                .0
        })
        .collect();
    say(quiet(
        Redlock::run(&redis)
            .key("k")
            .args(["--limit", "3", "-v"])
            .command(["true"]),
    ));
    for (i, holder) in holders.into_iter().enumerate() {
        touch(&dir.join(&format!("s{i}.go")));
        holder.finish().assert_code(0);
    }
    redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();
    let (holder, _) = Redlock::run(&redis).key("k").hold(&dir, "x");
    say(quiet(
        Redlock::run(&redis)
            .key("k")
            .args(["--shared", "-v"])
            .command(["true"]),
    ));
    touch(&dir.join("x.go"));
    holder.finish().assert_code(0);

    // A stop request, and a renewal that failed while Redis was frozen.
    let (holder, _) = Redlock::run(&redis).key("k").arg("-v").hold(&dir, "t");
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    say(holder.finish());
    // Renewed every 2 s, each given 1 s: frozen from the start to past 3 s, the first fails;
    // the lease, 6 s from the take, is not lost.
    let (holder, _) = Redlock::run(&redis).key("k").ttl("6s").hold(&dir, "r");
    redis.pause();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    redis.resume();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    touch(&dir.join("r.go"));
    say(holder.finish());

    // The splay.
    say(quiet(
        Redlock::run(&redis)
            .key("backup")
            .args(["--splay", "10ms", "-v"])
            .command(["true"]),
    ));

    // Keys redlock did not make: the lock's, the fencing counter's (a set, then a word).
    hash(&["FLUSHALL"]);
    hash(&["HSET", "redlock:{k}", "a", "b"]);
    say(quiet(Redlock::admin("status", &redis).key("k")));
    hash(&["DEL", "redlock:{k}"]);
    hash(&["SADD", "redlock:{k}:fence", "x"]);
    say(quiet(Redlock::run(&redis).key("k").command(["true"])));
    hash(&["DEL", "redlock:{k}:fence"]);
    hash(&["SET", "redlock:{k}:fence", "word"]);
    hash(&["SET", "redlock:{k}", "a-token"]);
    say(quiet(
        Redlock::admin("release", &redis).key("k").arg("--force"),
    ));
    hash(&["DEL", "redlock:{k}:fence"]);

    // The metrics file: a FIFO there, and its lock file held by another run past 2 s.
    nix::unistd::mkfifo(
        &dir.join("x.prom"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let fifo = dir.join("x.prom").to_string_lossy().into_owned();
    say(quiet(
        Redlock::run(&redis)
            .key("k")
            .args(["--metrics-file", &fifo])
            .command(["true"]),
    ));
    std::fs::remove_file(dir.join("x.prom")).unwrap();
    let lock = std::fs::File::create(dir.join(".x.prom.lock")).unwrap();
    let held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
    say(quiet(
        Redlock::run(&redis)
            .key("k")
            .args(["--metrics-file", &fifo])
            .command(["true"]),
    ));
    drop(held);

    // A TLS option naming a directory.
    say(quiet(
        Redlock::run_at(&format!("rediss://127.0.0.1:{}", redis.port()))
            .key("k")
            .args(["--tls-ca-cert", &path])
            .command(["true"]),
    ));

    // Nothing listening, waited for; a proxy whose Redis is gone; a reply lost.
    let nobody = format!("redis://127.0.0.1:{}", free_port());
    say(quiet(
        Redlock::run_at(&nobody)
            .key("k")
            .wait("1s")
            .command(["true"]),
    ));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let _ = conn.read(&mut [0; 64]);
        }
    });
    say(quiet(
        Redlock::run_at(&format!("redis://127.0.0.1:{port}"))
            .key("k")
            .command(["true"]),
    ));
    let proxy = Proxy::start(redis.port());
    quiet(Redlock::run_at(&proxy.url()).key("k").command(["true"]));
    proxy.lose_reply_to(b"lose-this-reply");
    say(quiet(
        Redlock::run_at(&proxy.url())
            .key("k")
            .command(["true", "lose-this-reply"]),
    ));

    // A quorum's majority, one node down.
    let mut nodes = start_servers(3);
    let (holder, _) = Redlock::run_quorum(&nodes).key("q").hold(&dir, "q");
    nodes[2].kill();
    let mut status = quiet(Redlock::admin_quorum("status", &nodes).key("q"));
    // Its first line; each node's view follows.
    status.stdout = format!("{}\n", status.stdout.lines().next().unwrap_or_default());
    status.stderr.clear();
    say(status);
    touch(&dir.join("q.go"));
    quiet_finish(holder);

    // A Sentinel whose master is another sentinel.
    let first = super::topology::Sentinel::start(redis.port());
    let second = super::topology::Sentinel::start(first.port);
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", second.port);
    say(quiet(Redlock::run_at(&url).key("k").command(["true"])));

    let shown = [(path.as_str(), "/x")];
    let mut text = said.replace(&format!("{path}/"), "/");
    text = ports_shown(&text);
    assert_snapshot("guide-lines.stderr", &text, &shown);
}

/// A held run's end, whatever it said (a quorum node gone under it).
fn quiet_finish(proc: Proc) {
    let _ = proc.finish();
}
