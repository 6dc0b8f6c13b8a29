//! Every request bounded in time and size: a server that accepts and never answers, one that
//! trickles a reply a byte at a time, one that floods an endless reply. `run` (with and without
//! `--wait`), `status` and `list` end with 69 and a line naming the server, within the
//! documented time limit (an acquire: ttl/3; an admin request: 5 s), connect time included. The
//! flood runs redlock with its address space limited, so a reply read into memory kills redlock
//! and fails the test instead of taking the machine. What redlock stores is bounded too: a
//! command line is stored cut to 1 KiB, and a lock `list` cannot read is said, not left out.

use std::time::Duration;

use crate::common::*;
use crate::integration::fake::{Answer, FakeServer, MASTER};
use crate::integration::snapshots::assert_snapshot;

/// The time limit of one admin request (`status`, `list`), as the README gives it.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Room for a loaded two-core machine.
const SLACK: Duration = Duration::from_secs(3);
/// At most 1 GiB of address space for redlock.
const LIMITED: [&str; 2] = ["prlimit", "--as=1073741824"];

/// The ways of asking `server` something, each with the longest it may take.
fn invocations(server: &FakeServer, dir: &TempDir) -> Vec<(&'static str, Redlock, Duration)> {
    let url = server.url();
    vec![
        (
            "run --ttl 3s",
            Redlock::run_at(&url)
                .key("k")
                .ttl("3s")
                .sh(&marker_script(dir)),
            Duration::from_secs(1),
        ),
        (
            "run --ttl 3s --wait 2s",
            Redlock::run_at(&url)
                .key("k")
                .ttl("3s")
                .wait("2s")
                .sh(&marker_script(dir)),
            // A --wait may retry an unreachable server until it runs out.
            Duration::from_secs(3),
        ),
        (
            "status",
            Redlock::admin_at("status", &url).key("k"),
            ADMIN_TIMEOUT,
        ),
        ("list", Redlock::admin_at("list", &url), ADMIN_TIMEOUT),
    ]
}

/// Each invocation against `server` ends in 69 within its limit, its last line naming the
/// server and saying `says`, with nothing run.
#[track_caller]
fn bounded(server: &FakeServer, through: &[&str], says: &str) {
    let dir = TempDir::new();
    let mut failures = Vec::new();
    for (what, redlock, limit) in invocations(server, &dir) {
        // Status and stderr are checked below, each invocation's problems gathered in one list.
        let out = redlock.through(through).any_status().any_stderr().output();
        let last = out.stderr.lines().last().unwrap_or("");
        let mut problems = Vec::new();
        if out.status.code() != Some(69) {
            problems.push(format!("ended with {:?}, want 69", out.status));
        }
        if !last.starts_with("redlock: ") || !last.contains(&server.addr()) || !last.contains(says)
        {
            problems.push(format!(
                "last line does not name {} with {says:?}",
                server.addr()
            ));
        }
        if out.elapsed > limit + SLACK {
            problems.push(format!("took {:?}, limit {limit:?}", out.elapsed));
        }
        if dir.join("marker").exists() {
            problems.push("ran the command".into());
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{what}: {}; stderr {:?}",
                problems.join(", "),
                out.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_reply_trickled_a_byte_at_a_time_ends_in_69_within_the_time_limit() {
    let server = FakeServer::start(Answer::Trickle {
        every: Duration::from_millis(200),
    });
    bounded(&server, &[], "in time");
}

#[test]
fn a_reply_flooding_without_end_is_refused_without_reading_it_into_memory() {
    let server = FakeServer::start(Answer::Flood);
    bounded(&server, &LIMITED, "larger than");
}

#[test]
fn a_silent_server_ends_in_69_within_the_time_limit() {
    let server = FakeServer::start(Answer::Silent);
    bounded(&server, &[], "in time");
}

#[test]
fn an_acquire_against_a_silent_server_takes_its_timeout_once() {
    // ttl/3 = 4 s: the connection, its set-up and the request (with the eviction check beside
    // it) fit in one timeout, not one each (it took 8 s: two).
    let server = FakeServer::start(Answer::Silent);
    let out = Redlock::run_at(&server.url())
        .key("k")
        .ttl("12s")
        .command(["true"])
        .status(69)
        .stderr_lines(1)
        .stderr_contains(&server.addr())
        .output();
    assert!(
        out.elapsed < Duration::from_millis(6_500),
        "took {:?} for an acquire timeout of 4 s",
        out.elapsed
    );
    assert!(
        out.elapsed >= Duration::from_millis(3_900),
        "gave up after {:?}, before its timeout of 4 s",
        out.elapsed
    );
}

/// The command line redlock stores beside a lock is cut to 1 KiB: three holders of a
/// semaphore whose command lines are 1.68 MB each made `status`'s reply larger than 4 MiB
/// (69) and `list` leave the lock out.
#[test]
fn a_huge_command_line_is_stored_cut_so_that_status_and_list_still_read_the_lock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let arg = "c".repeat(60_000);
    let holders: Vec<Proc> = ["a", "b", "c"]
        .iter()
        .map(|tag| {
            let mut command = vec!["sh".to_owned(), "-c".to_owned(), hold_script(&dir, tag)];
            command.extend(std::iter::repeat_n(arg.clone(), 28));
            Redlock::run(&redis)
                .key("fat")
                .args(["--limit", "3"])
                .command(command)
                .spawn()
        })
        .collect();
    for tag in ["a", "b", "c"] {
        wait_for_file(&dir.join(&format!("{tag}.ready")));
    }
    let stored: Vec<String> = redis::cmd("HVALS")
        .arg(format!("{}:holders", lock_key("fat")))
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(stored.len(), 3, "{stored:?}");
    for json in &stored {
        assert!(
            json.len() < 1400,
            "{} bytes stored: {json:.200}",
            json.len()
        );
        assert!(json.contains("… (cut from 1680"), "{json:.200}");
    }
    let text = stdout_of("status", &redis, &["--key", "fat"]);
    assert!(text.contains("is held by 3 of 3"), "{text:.500}");
    assert_eq!(text.matches("… (cut from 1680").count(), 3, "{text:.2000}");
    let list = stdout_of("list", &redis, &[]);
    assert!(list.starts_with("fat\t"), "{list:.500}");
    for (tag, proc) in ["a", "b", "c"].iter().zip(holders) {
        touch(&dir.join(&format!("{tag}.go")));
        proc.finish().assert_code(0);
    }
}

/// A held lock whose details cannot be read (here a holder record larger than a reply may be,
/// as written by hand or by a redlock that did not cut the command line) is said on stderr,
/// not left out of `list` in silence; the other locks are listed all the same, and the exit
/// status (69) says the listing is not whole.
#[test]
fn list_says_which_held_lock_it_could_not_read() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (fat, _) = Redlock::run(&redis).key("fat").hold(&dir, "fat");
    let (thin, _) = Redlock::run(&redis).key("thin").hold(&dir, "thin");
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:holder", lock_key("fat")))
        .arg("argv")
        .arg("c".repeat(5 << 20))
        .query(&mut redis.conn())
        .unwrap();
    let out = Redlock::admin("list", &redis)
        .status(69)
        .any_stdout()
        .stderr_lines(1)
        .stderr_contains("redlock: cannot read lock 'fat': ")
        .stderr_contains("larger than 4 MiB")
        .output();
    assert!(out.stdout.starts_with("thin\t"), "{}", out.stdout);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    for (tag, proc) in [("fat", fat), ("thin", thin)] {
        touch(&dir.join(&format!("{tag}.go")));
        proc.finish().assert_code(0);
    }
}

/// A server whose SCAN cursor never comes back to 0 (a proxy answered every SCAN with cursor
/// 1 and no keys: `list` made 447,000 SCANs in 60 s) is refused with 69 at the first cursor
/// it returns again, in one line naming it.
#[test]
fn list_ends_a_scan_whose_cursor_comes_back() {
    let server = FakeServer::start(Answer::After {
        first: MASTER.to_vec(),
        rest: b"*2\r\n$1\r\n1\r\n*0\r\n".to_vec(),
    });
    let out = Redlock::admin_at("list", &server.url())
        .status(69)
        .stderr_lines(1)
        .stderr_contains(&format!(
            "redlock: cannot list locks: Redis at {} returned SCAN cursor 1 again: not a Redis \
             redlock can list",
            server.addr()
        ))
        .output();
    assert!(out.elapsed < ADMIN_TIMEOUT, "took {:?}", out.elapsed);
    let port = format!(":{}", server.addr().rsplit(':').next().unwrap());
    assert_snapshot("scan-cycle.stderr", out.stderr.trim(), &[(&port, ":6379")]);
}

/// A plain-text Redis given as rediss:// answers no TLS hello: the first attempt spends its
/// whole time limit (ttl/3, at most 5 s, with or without --wait), then a short plain-text
/// probe says what answered. Once: it took two whole limits (11.2 s), the refusal being asked
/// about the fencing counter over a new connection that waited out a second TLS hello.
#[test]
fn a_plain_server_given_as_rediss_takes_its_time_limit_once() {
    let redis = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}", redis.port());
    // (options, the first attempt's limit); the probe and a loaded machine get 2.5 s more.
    let cases: [(&[&str], u64); 3] = [
        (&[], 5),
        (&["--wait", "2s"], 5),
        (&["--ttl", "6s", "--wait", "2s"], 2),
    ];
    std::thread::scope(|scope| {
        let runs: Vec<_> = cases
            .iter()
            .map(|(args, limit)| {
                let redlock = Redlock::run_at(&url).key("tl").args(*args);
                let run = scope.spawn(move || {
                    redlock
                        .command(["true"])
                        .status(69)
                        .stderr_lines(1)
                        .stderr_contains("speaks plain text, not TLS")
                        .output()
                });
                (args, limit, run)
            })
            .collect();
        for (args, limit, run) in runs {
            let out = run.join().unwrap();
            let bound = Duration::from_secs(*limit) + Duration::from_millis(2_500);
            assert!(
                out.elapsed < bound,
                "{args:?}: took {:?}, bound {bound:?}",
                out.elapsed
            );
            assert!(
                out.elapsed >= Duration::from_secs(*limit) - Duration::from_millis(100),
                "{args:?}: gave up after {:?}, before its limit",
                out.elapsed
            );
        }
    });
}
