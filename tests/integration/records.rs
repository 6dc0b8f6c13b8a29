//! The record of runs: every run recorded in the lock's Redis by the acquire and the release
//! (no request of its own), a SIGKILLed holder shown as vanished, the list bounded and every key
//! expiring, busy and skipped runs counted and not listed; `history`, `status`'s new lines and
//! fields (`check` in checks.rs); on a quorum, a Sentinel service and a Cluster.

use std::time::Duration;

use nix::sys::signal::Signal;
use redis::Commands;

use super::topology::*;
use crate::common::*;

/// The runs the record's ring keeps in the lock's counts hash, newest first, as stored.
fn ring(conn: &mut redis::Connection, name: &str) -> Vec<String> {
    let all: Vec<(String, String)> = conn.hgetall(counts_key(name)).unwrap();
    let n = |raw: &str| -> u64 {
        raw.split(r#""n":""#)
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no n in {raw}"))
    };
    let mut runs: Vec<String> = all
        .into_iter()
        .filter(|(field, _)| field.starts_with("run:"))
        .map(|(_, raw)| raw)
        .collect();
    runs.sort_by_key(|raw| std::cmp::Reverse(n(raw)));
    runs
}

fn counts_key(name: &str) -> String {
    format!("{}:counts", lock_key(name))
}

/// The objects of a JSON array that `history --json` printed (none holds a brace).
fn rows(json: &str) -> Vec<String> {
    let inner = json.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.is_empty() {
        return Vec::new();
    }
    inner.split("},{").map(str::to_owned).collect()
}

fn history(redis: &RedisServer, key: &str) -> Vec<String> {
    let out = Redlock::admin("history", redis)
        .key(key)
        .arg("--json")
        .status(0)
        .any_stdout()
        .output();
    rows(&out.stdout)
}

/// The fencing token of a `history --json` row.
fn fence(row: &str) -> u64 {
    row.split(r#""fence":"#)
        .nth(1)
        .and_then(|r| r.split([',', '}']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fence in {row}"))
}

/// Runs `run` around a heartbeat (tag `b` in `dir`) and SIGKILLs redlock once the command is
/// up: the watchdog kills the command, and the lease is left to run out unreleased.
fn killed_while_holding(run: Redlock, dir: &TempDir) {
    let doomed = run.sh(&heartbeat_script(dir, "b")).spawn();
    wait_for_file(&dir.join("b.ready"));
    let pid = wait_for_pid(&dir.join("b.pid"));
    doomed.signal(Signal::SIGKILL);
    wait_pid_dead(pid, Duration::from_secs(2));
}

pub(super) fn host() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn every_run_is_recorded_with_how_it_ended() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A lock that never ran: an empty history, exit 0.
    Redlock::admin("history", &redis)
        .key("job")
        .status(0)
        .stdout("")
        .stderr("")
        .output();
    assert!(history(&redis, "job").is_empty());

    let job = || Redlock::run(&redis).key("job");
    job().sh("true").status(0).output();
    job().sh("sleep 0.2; exit 3").status(3).output();
    job()
        .sh(&format!("echo $$ > {}; kill -TERM $$", dir.sh("sig.pid")))
        .signal(15)
        .output();

    let runs = history(&redis, "job");
    assert_eq!(runs.len(), 3, "{runs:?}");
    // Newest first: the signal death, the failure, the success; with the fencing tokens.
    let fences: Vec<u64> = runs.iter().map(|r| fence(r)).collect();
    assert!(fences.windows(2).all(|w| w[0] > w[1]), "{fences:?}");
    for (row, (outcome, status)) in
        runs.iter()
            .zip([("failed", "143"), ("failed", "3"), ("success", "0")])
    {
        for want in [
            format!(r#""host":"{}""#, host()),
            format!(r#""outcome":"{outcome}""#),
            format!(r#""exit_status":{status},"fence":"#),
        ] {
            assert!(row.contains(&want), "{want} missing from {row}");
        }
        assert!(
            row.contains(r#""pid":"#) && row.contains(r#""started":17"#),
            "{row}"
        );
    }
    let took: u64 = runs[1]
        .split(r#""duration_ms":"#)
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!((200..5000).contains(&took), "the failure took {took} ms");

    // The text: one line each, tab-separated: start, host and pid, duration, ending, fence.
    let out = Redlock::admin("history", &redis)
        .key("job")
        .status(0)
        .any_stdout()
        .output();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    let fields: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(fields.len(), 5, "{}", lines[1]);
    assert!(
        fields[1].starts_with(&format!("{} pid ", host())),
        "{}",
        lines[1]
    );
    assert_eq!(fields[3], "failed (exit 3)");
    assert_eq!(fields[4], format!("fence {}", fences[1]));

    // status: the last run, the last success, the counters; in JSON too.
    Redlock::admin("status", &redis)
        .key("job")
        .status(0)
        .stdout_contains("  last run: ")
        .stdout_contains("failed (exit 143)")
        .stdout_contains("  last success: ")
        .stdout_contains(&format!("fence {}", fences[2]))
        .stdout_contains("  counts:   0 busy, 0 skipped, 0 lost; runs ended: 2 failed, 1 success")
        .output();
    let json = Redlock::admin("status", &redis)
        .key("job")
        .arg("--json")
        .status(0)
        .any_stdout()
        .output()
        .stdout;
    let (last, success) = (
        format!(r#""exit_status":143,"fence":{}"#, fences[0]),
        format!(
            r#""outcome":"success","exit_status":0,"fence":{}"#,
            fences[2]
        ),
    );
    for want in [
        r#""last_run":{"host""#,
        &last,
        r#""last_success":{"host""#,
        &success,
        r#""counts":{"busy":0,"skipped":0,"lost":0,"success":1,"failed":2,"#,
    ] {
        assert!(json.contains(want), "{want} missing from {json}");
    }
}

/// Fencing tokens take every value of a 64-bit integer, 19 digits from 10^18 on (a counter
/// raised by hand, or a quorum's): the record keeps such runs, and `check` still sees a
/// failure after a success.
#[test]
fn runs_with_the_largest_fencing_tokens_are_kept() {
    for start in [1_000_000_000_000_000_000_i64, i64::MAX - 10] {
        let redis = RedisServer::start();
        redis::cmd("SET")
            .arg(fence_key("big"))
            .arg(start)
            .exec(&mut redis.conn())
            .unwrap();
        Redlock::run(&redis).key("big").sh("true").output();
        Redlock::run(&redis)
            .key("big")
            .sh("exit 3")
            .status(3)
            .output();
        let rows = history(&redis, "big");
        assert_eq!(rows.len(), 2, "{start}: {rows:?}");
        let fences: Vec<u64> = rows.iter().map(|r| fence(r)).collect();
        let start = start as u64;
        assert_eq!(fences, [start + 2, start + 1]);
        let out = Redlock::admin("check", &redis)
            .key("big")
            .args(["--max-age", "1h"])
            .status(1)
            .any_stdout()
            .output();
        assert!(
            out.stdout.starts_with("WARNING: ") && out.stdout.contains("exit 3"),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn a_sigkilled_holder_is_shown_as_vanished() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("gone")
        .ttl("1s")
        .sh(&heartbeat_script(&dir, "w"))
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let runs = history(&redis, "gone");
    assert!(runs[0].contains(r#""outcome":"running""#), "{runs:?}");
    assert!(runs[0].contains(r#""duration_ms":null"#), "{runs:?}");
    let pid = wait_for_pid(&dir.join("w.pid"));
    proc.signal(Signal::SIGKILL);
    wait_pid_dead(pid, Duration::from_secs(2));
    // Its lease ends without a release: history shows it vanished, with no exit status.
    wait_until(Duration::from_secs(3), "the lease to end", || {
        redis.get(&lock_key("gone")).is_none()
    });
    let runs = history(&redis, "gone");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(
        runs[0].contains(r#""outcome":"vanished","exit_status":null"#),
        "{runs:?}"
    );
    // The reader that first saw it marked it, and counted it; the next acquire leaves it so.
    let raw = ring(&mut redis.conn(), "gone");
    assert!(raw[0].contains(r#""outcome":"vanished""#), "{raw:?}");
    Redlock::run(&redis)
        .key("gone")
        .sh("true")
        .status(0)
        .output();
    let raw = ring(&mut redis.conn(), "gone");
    assert!(raw[1].contains(r#""outcome":"vanished""#), "{raw:?}");
    let counted: Option<String> = redis.conn().hget(counts_key("gone"), "vanished").unwrap();
    assert_eq!(counted.as_deref(), Some("1"));
    Redlock::admin("status", &redis)
        .key("gone")
        .stdout_contains("0 skipped, 1 lost")
        .output();
    let out = Redlock::admin("history", &redis)
        .key("gone")
        .status(0)
        .any_stdout()
        .output();
    assert!(
        out.stdout
            .lines()
            .nth(1)
            .unwrap()
            .contains("\tunknown\tvanished (lease ended without a release)\t"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_semaphore_holder_that_vanished_is_told_from_the_live_one() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let slot = || {
        Redlock::run(&redis)
            .key("pool")
            .args(["--limit", "2"])
            .ttl("1s")
    };
    let (live, _) = slot().hold(&dir, "a");
    killed_while_holding(slot(), &dir);
    wait_until(
        Duration::from_secs(3),
        "the dead slot's lease to end",
        || {
            let n: usize = redis.conn().zcard(lock_key("pool")).unwrap();
            let live: Vec<String> = redis
                .conn()
                .zrangebyscore(
                    lock_key("pool"),
                    format!("({}", now_ns() / 1_000_000),
                    "+inf",
                )
                .unwrap();
            n >= 1 && live.len() == 1
        },
    );
    let runs = history(&redis, "pool");
    let outcomes: Vec<bool> = runs
        .iter()
        .map(|r| r.contains(r#""outcome":"vanished""#))
        .collect();
    assert_eq!(outcomes, [true, false], "{runs:?}");
    assert!(runs[1].contains(r#""outcome":"running""#), "{runs:?}");
    touch(&dir.join("a.go"));
    live.finish().assert_code(0);
    let runs = history(&redis, "pool");
    assert!(runs[1].contains(r#""outcome":"success""#), "{runs:?}");
}

/// A place of a semaphore whose holder was SIGKILLed, with more runs after it than the ring
/// keeps, is counted as vanished by the first reader once its lease ends (not only by the
/// next acquire, which may never come), and counted once.
#[test]
fn a_vanished_place_the_ring_no_longer_holds_is_counted_by_a_reader_once() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let slot = || {
        Redlock::run(&redis)
            .key("many")
            .args(["--limit", "2"])
            .ttl("3s")
    };
    killed_while_holding(slot(), &dir);
    for _ in 0..21 {
        slot().sh("true").output();
    }
    // The set expires with the last lease, the dead one's here.
    wait_until(
        Duration::from_secs(5),
        "the dead place's lease to end",
        || {
            let exists: bool = redis.conn().exists(lock_key("many")).unwrap();
            !exists
        },
    );
    let status = || {
        Redlock::admin("status", &redis)
            .key("many")
            .status(0)
            .any_stdout()
            .output()
            .stdout
    };
    let said = status();
    assert!(
        said.contains("runs ended: 21 success, 1 vanished"),
        "{said}"
    );
    // The last run to end is the vanished one: no success hides it.
    Redlock::admin("check", &redis)
        .key("many")
        .args(["--max-age", "1h"])
        .status(1)
        .stdout_contains("vanished")
        .output();
    // Read again, and purged by the next acquire: still counted once.
    assert!(status().contains("1 vanished"));
    slot().sh("true").output();
    let said = status();
    assert!(
        said.contains("runs ended: 22 success, 1 vanished"),
        "{said}"
    );
}

/// A place of a semaphore (or a shared hold) whose holder vanished, then an exclusive run that
/// took the lock after its lease ended and succeeded: the vanished run is counted (by the
/// first reader, as the exclusive take does not look at places) and ordered before that
/// success, which it ended before, so `check` says OK, not that a later run vanished.
#[test]
fn a_vanished_place_before_an_exclusive_success_does_not_make_check_warn() {
    for how in ["--limit 2", "--shared"] {
        let redis = RedisServer::start();
        let dir = TempDir::new();
        let mode: Vec<&str> = how.split(' ').collect();
        killed_while_holding(Redlock::run(&redis).key("mix").args(&mode).ttl("2s"), &dir);
        wait_until(
            Duration::from_secs(5),
            "the dead place's lease to end",
            || {
                let exists: bool = redis.conn().exists(lock_key("mix")).unwrap();
                !exists
            },
        );
        Redlock::run(&redis).key("mix").sh("true").output();
        Redlock::admin("check", &redis)
            .key("mix")
            .args(["--max-age", "1h"])
            .status(0)
            .stdout_contains("OK: ")
            .output();
        let said = Redlock::admin("status", &redis)
            .key("mix")
            .any_stdout()
            .output()
            .stdout;
        assert!(said.contains("1 success, 1 vanished"), "{how}: {said}");
    }
}

#[test]
fn a_lost_lock_is_recorded_as_lost_by_the_renewal_that_found_it() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis)
        .key("lost")
        .ttl("600ms")
        .hold(&dir, "h");
    redis.del(&lock_key("lost"));
    holder.finish().assert_code(76);
    let runs = history(&redis, "lost");
    assert!(
        runs[0].contains(r#""outcome":"lock_lost","exit_status":76"#),
        "{runs:?}"
    );
    Redlock::admin("status", &redis)
        .key("lost")
        .stdout_contains("1 lost; runs ended: 1 lock_lost")
        .output();
}

#[test]
fn the_record_keeps_the_last_20_runs_in_a_few_kilobytes_and_every_key_expires() {
    let redis = RedisServer::start();
    for _ in 0..23 {
        Redlock::run(&redis)
            .key("often")
            .command(["true"])
            .status(0)
            .output();
    }
    assert_eq!(ring(&mut redis.conn(), "often").len(), 20);
    let runs = history(&redis, "often");
    assert_eq!(runs.len(), 20);
    let fences: Vec<u64> = runs.iter().map(|r| fence(r)).collect();
    assert!(fences.windows(2).all(|w| w[0] > w[1]), "{fences:?}");
    // The counters still count every run, and the last success is kept beside them.
    let success: Option<String> = redis.conn().hget(counts_key("often"), "success").unwrap();
    assert_eq!(success.as_deref(), Some("23"));
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(counts_key("often"))
        .query(&mut redis.conn())
        .unwrap();
    eprintln!("record of 20 runs, its counters and its last success: {bytes} bytes");
    assert!(bytes < 8000, "{bytes} bytes");
    // The record is one key, and it expires 40 days after the last run.
    let forty_days = 40 * 24 * 3600 * 1000;
    let key = counts_key("often");
    let pttl = redis.pttl(&key);
    assert!(
        pttl > forty_days - 60_000 && pttl <= forty_days,
        "{key}: {pttl}"
    );
}

/// A count set to what is not a whole number (by hand) starts over at the next run that
/// counts there, instead of staying unreadable and dropped from `status` for good; the run's
/// entry in the record is written either way.
#[test]
fn a_count_that_is_not_a_number_starts_over() {
    let redis = RedisServer::start();
    Redlock::run(&redis).key("odd").sh("true").output();
    let key = counts_key("odd");
    let set = |field: &str, value: &str| {
        redis::cmd("HSET")
            .arg(&key)
            .arg(field)
            .arg(value)
            .exec(&mut redis.conn())
            .unwrap();
    };
    set("success", "many");
    set("failed", "99999999999999999999");
    Redlock::run(&redis).key("odd").sh("true").output();
    Redlock::run(&redis)
        .key("odd")
        .sh("exit 4")
        .status(4)
        .output();
    let count = |field: &str| -> Option<String> { redis.conn().hget(&key, field).unwrap() };
    assert_eq!(count("success").as_deref(), Some("1"));
    assert_eq!(count("failed").as_deref(), Some("1"));
    assert_eq!(history(&redis, "odd").len(), 3);
    Redlock::admin("status", &redis)
        .key("odd")
        .status(0)
        .stdout_contains("runs ended: 1 failed, 1 success")
        .output();
}

#[test]
fn busy_attempts_and_skips_are_counted_not_listed() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("busy").hold(&dir, "h");
    for _ in 0..3 {
        Redlock::run(&redis)
            .key("busy")
            .sh("true")
            .status(75)
            .output();
    }
    // A waiter turned away again and again counts once.
    Redlock::run(&redis)
        .key("busy")
        .wait("1s")
        .sh("true")
        .status(75)
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    let cron = || {
        Redlock::run(&redis)
            .key("busy")
            .args(["--min-interval", "1h"])
            .sh("true")
    };
    // The holder's success counts for --min-interval too: each of these skips.
    for _ in 0..3 {
        cron().status(75).output();
    }
    let len = ring(&mut redis.conn(), "busy").len();
    assert_eq!(len, 1, "only the runs that held the lock are listed");
    Redlock::admin("status", &redis)
        .key("busy")
        .stdout_contains("  counts:   4 busy, 3 skipped, 0 lost; runs ended: 1 success")
        .output();
}

/// `check --max-age`, as a monitoring plugin: the status, and one line starting with its word.
#[test]
fn a_quorum_records_each_run_on_every_node_and_reads_a_majority() {
    let mut nodes = start_servers(3);
    Redlock::run_quorum(&nodes)
        .key("q")
        .sh("true")
        .status(0)
        .output();
    Redlock::run_quorum(&nodes)
        .key("q")
        .sh("exit 2")
        .status(2)
        .output();
    for node in &nodes {
        let len = ring(&mut node.conn(), "q").len();
        assert_eq!(len, 2, "node {}", node.port());
    }
    let history = |nodes: &[RedisServer]| {
        Redlock::admin_quorum("history", nodes)
            .key("q")
            .arg("--json")
    };
    let runs = rows(
        &history(&nodes)
            .status(0)
            .stderr("")
            .any_stdout()
            .output()
            .stdout,
    );
    assert_eq!(runs.len(), 2, "one row a run, not one a node: {runs:?}");
    assert!(
        runs[0].contains(r#""outcome":"failed""#) && runs[1].contains(r#""outcome":"success""#)
    );
    Redlock::admin_quorum("check", &nodes)
        .key("q")
        .args(["--max-age", "1h"])
        .status(1)
        .stdout_contains("WARNING: ")
        .output();
    Redlock::admin_quorum("status", &nodes)
        .key("q")
        .arg("--json")
        .status(0)
        .stdout_contains(r#""per_node":[{"#)
        .stdout_contains(r#"}],"last_run":{"#)
        .stdout_contains(r#""counts":{"busy":0,"skipped":0,"lost":0,"success":1,"failed":1,"#)
        .output();
    nodes[0].kill();
    let out = history(&nodes).any_stdout().any_stderr().output();
    assert_eq!(rows(&out.stdout).len(), 2);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    nodes[1].kill();
    history(&nodes).status(69).stderr_prefixed().output();
    Redlock::admin_quorum("check", &nodes)
        .key("q")
        .args(["--max-age", "1h"])
        .status(3)
        .stdout_contains("UNKNOWN: ")
        .stderr_prefixed()
        .output();
}

#[test]
fn the_record_lives_in_the_locks_slot_on_a_cluster_and_on_the_sentinels_master() {
    let cluster = Cluster::start();
    let url = cluster.url_of(&[0]);
    Redlock::run_at(&url).key("c").sh("true").status(0).output();
    let owner = cluster.owner(cluster.slot(&lock_key("c")), 0);
    let len = ring(&mut cluster.nodes[owner].conn(), "c").len();
    assert_eq!(len, 1);
    let out = Redlock::admin_at("history", &cluster.url_of(&[1, 2]))
        .key("c")
        .status(0)
        .stderr("")
        .any_stdout()
        .output();
    assert!(
        out.stdout.contains("\tsuccess (exit 0)\tfence "),
        "{}",
        out.stdout
    );
    drop(cluster);

    let sentinels = SentinelSetup::start();
    Redlock::run_at(&sentinels.url())
        .key("s")
        .sh("exit 1")
        .status(1)
        .output();
    Redlock::admin_at("check", &sentinels.url())
        .key("s")
        .args(["--max-age", "1d"])
        .status(2)
        .stdout_contains("has no recorded success")
        .output();
}

/// The `redlock check` line of packaging/cron/backup-monitored, run as written (our server
/// instead of the documented one), before and after the file's job ran.
/// The record's lines as docs/operating.md shows them: `history`, `status`'s three lines and
/// `check`'s, snapshot-tested; every line of the docs' examples is found in a snapshot.
#[test]
fn the_records_lines_are_as_the_docs_show_them() {
    use super::snapshots::{all_snapshots, assert_snapshot, in_a_snapshot};
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let job = || Redlock::run(&redis).key("backup");
    job().sh("exit 3").status(3).output();
    let doomed = job().ttl("1s").sh(&heartbeat_script(&dir, "v")).spawn();
    wait_for_file(&dir.join("v.ready"));
    let pid = wait_for_pid(&dir.join("v.pid"));
    doomed.signal(Signal::SIGKILL);
    wait_pid_dead(pid, Duration::from_secs(2));
    wait_until(Duration::from_secs(3), "the lease to end", || {
        redis.get(&lock_key("backup")).is_none()
    });
    job().sh("true").status(0).output();
    let (holder, _) = job().hold(&dir, "h");
    Redlock::run(&redis)
        .key("backup")
        .sh("true")
        .status(75)
        .output();
    let out = Redlock::admin("history", &redis)
        .key("backup")
        .status(0)
        .any_stdout()
        .output();
    assert_snapshot("history.stdout", &out.stdout, &[]);
    let out = Redlock::admin("status", &redis)
        .key("backup")
        .status(0)
        .any_stdout()
        .output();
    let record: String = out
        .stdout
        .lines()
        .filter(|l| {
            ["  last run:", "  last success:", "  counts:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_snapshot("status-record.stdout", &record, &[]);
    let mut said = String::new();
    for (max_age, status) in [("25h", 0), ("1ms", 2)] {
        let out = Redlock::admin("check", &redis)
            .key("backup")
            .args(["--max-age", max_age])
            .status(status)
            .any_stdout()
            .output();
        said.push_str(&out.stdout);
    }
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    job().sh("exit 3").status(3).output();
    let out = Redlock::admin("check", &redis)
        .key("backup")
        .args(["--max-age", "25h"])
        .status(1)
        .any_stdout()
        .output();
    said.push_str(&out.stdout);
    assert_snapshot("check.stdout", &said, &[]);

    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operating.md"));
    let snapshots = all_snapshots();
    let shown: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("    20") && l.contains('\t'))
        .chain(page.lines().filter(|l| {
            ["      last run:", "      last success:", "      counts:"]
                .iter()
                .any(|p| l.starts_with(p))
        }))
        .map(str::trim)
        .collect();
    assert!(shown.len() >= 7, "{shown:#?}");
    let missing: Vec<&&str> = shown
        .iter()
        .filter(|l| !in_a_snapshot(l, &snapshots))
        .collect();
    assert!(missing.is_empty(), "not in a snapshot: {missing:#?}");
}
