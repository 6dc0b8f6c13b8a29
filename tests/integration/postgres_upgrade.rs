//! A rolling upgrade on PostgreSQL: hosts on redlock 0.3.0 ([`OLD_COMMIT`], built from git by
//! scripts/old-build.sh or taken from `REDLOCK_OLD_PG_BIN`) and on this build share one lock in
//! one database, first on the tables 0.3.0's `init` made, then while this build's `init` brings
//! them up to date, then on the new tables. In each phase, plain waiters and `--fair` ones of
//! both builds never overlap, their fencing tokens rise, both builds run, and a release by one
//! build hands the lock to the other's waiter without the lock standing free.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// redlock 0.3.0, the first release on PostgreSQL: "tests: a redis-server counts as started
/// only if the PING is answered by its own process".
const OLD_COMMIT: &str = "84b5d377afb0befbd675035f05d628df27a214a0";

/// How long building the old build may take (a clean debug build takes minutes here).
const BUILD_PATIENCE: Duration = Duration::from_secs(15 * 60);

/// The old build's binary: `REDLOCK_OLD_PG_BIN`, or built once by scripts/old-build.sh (which
/// keeps it under target/old-build/, so the next test process finds it).
pub(crate) fn old_bin() -> &'static Path {
    static OLD: OnceLock<PathBuf> = OnceLock::new();
    OLD.get_or_init(|| {
        if let Some(bin) = std::env::var_os("REDLOCK_OLD_PG_BIN").filter(|b| !b.is_empty()) {
            let bin = PathBuf::from(bin);
            assert!(
                bin.is_file(),
                "REDLOCK_OLD_PG_BIN={} is not a file",
                bin.display()
            );
            return bin;
        }
        let mut build = Command::new("bash");
        build
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/old-build.sh"))
            .arg(OLD_COMMIT)
            .stdin(std::process::Stdio::null());
        let out = Proc::spawn(build).finish_within(BUILD_PATIENCE);
        assert!(
            out.status.success(),
            "building redlock 0.3.0 ({OLD_COMMIT}) failed; set REDLOCK_OLD_PG_BIN to skip the \
             build:\n{}",
            out.stderr
        );
        let bin = PathBuf::from(out.stdout.trim());
        assert!(
            bin.is_file(),
            "scripts/old-build.sh printed {:?}",
            out.stdout
        );
        bin
    })
}

/// One run of a contention loop, as its job logged it.
#[derive(Debug)]
struct Ran {
    old: bool,
    fence: i64,
    start: i128,
    end: i128,
}

/// Four hosts, 0.3.0 and this build in turn, each `runs` runs of `redlock run --key <key>
/// --ttl 3s --wait 30s <args>` one after another; `meanwhile` runs once the first two runs
/// ended. Every run exits 0; what their jobs logged, in the order they started.
fn contend(
    pg: &PgServer,
    key: &str,
    args: &[&str],
    runs: usize,
    meanwhile: impl FnOnce(),
) -> Vec<Ran> {
    let dir = TempDir::new();
    let log = dir.join("runs.log");
    thread::scope(|s| {
        for old in [true, false, true, false] {
            let bin = if old {
                old_bin().as_os_str()
            } else {
                BIN.as_ref()
            };
            let script = format!(
                "s=$(date +%s%N); sleep 0.03; echo \"{old} $REDLOCK_FENCING_TOKEN $s $(date +%s%N)\" >> {}",
                dir.sh("runs.log")
            );
            let url = pg.url();
            s.spawn(move || {
                for _ in 0..runs {
                    let out = Redlock::run_at(&url)
                        .binary(bin)
                        .key(key)
                        .ttl("3s")
                        .wait("30s")
                        .args(args)
                        .sh(&script)
                        .any_status()
                        .any_stderr()
                        .output();
                    assert_eq!(out.code(), 0, "{key}, old {old}: {}", out.stderr);
                }
            });
        }
        wait_until(PATIENCE, "two runs to end", || {
            read(&log).lines().count() >= 2
        });
        meanwhile();
    });
    let mut ran: Vec<Ran> = read(&log)
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            Ran {
                old: f[0] == "true",
                fence: f[1].parse().unwrap(),
                start: f[2].parse().unwrap(),
                end: f[3].parse().unwrap(),
            }
        })
        .collect();
    ran.sort_by_key(|r| r.start);
    assert_eq!(ran.len(), 4 * runs, "{key}: {ran:?}");
    ran
}

/// No two runs at once, each token above the last, both builds ran, and wherever the lock went
/// from one build to the other it stood free less than 1.5 s: a waiter the other build's release
/// did not wake would sit out its fallback timer (up to the 3 s ttl) with the lock free.
#[track_caller]
fn check(key: &str, ran: &[Ran]) {
    for pair in ran.windows(2) {
        assert!(
            pair[1].start > pair[0].end,
            "{key}: two runs overlapped: {ran:?}"
        );
        assert!(
            pair[1].fence > pair[0].fence,
            "{key}: a token did not rise: {ran:?}"
        );
    }
    assert!(
        ran.iter().any(|r| r.old) && ran.iter().any(|r| !r.old),
        "{key}: {ran:?}"
    );
    let crossings: Vec<i128> = ran
        .windows(2)
        .filter(|pair| pair[0].old != pair[1].old)
        .map(|pair| (pair[1].start - pair[0].end) / 1_000_000)
        .collect();
    eprintln!(
        "{key}: {} runs; free between builds (ms): {crossings:?}",
        ran.len()
    );
    assert!(
        !crossings.is_empty(),
        "{key}: the lock never went between builds: {ran:?}"
    );
    assert!(
        crossings.iter().all(|&ms| ms < 1500),
        "{key}: the lock stood free between builds (ms): {crossings:?}"
    );
}

#[test]
fn hosts_of_0_3_0_and_of_this_build_take_turns_before_during_and_after_its_init() {
    let pg = PgServer::start();
    let init = |bin: &OsStr| {
        Redlock::admin_at("init", &pg.url())
            .binary(bin)
            .stdout_contains("redlock's tables and functions are in schema")
            .output();
    };
    init(old_bin().as_os_str());
    for (mode, args) in [("plain", &[][..]), ("fair", &["--fair"][..])] {
        let key = format!("{mode}-old-tables");
        check(&key, &contend(&pg, &key, args, 3, || ()));
    }
    // This build's init while both builds' runs go on: the tables change under them.
    let key = "plain-init";
    check(key, &contend(&pg, key, &[], 4, || init(BIN.as_ref())));
    let key = "fair-init";
    check(
        key,
        &contend(&pg, key, &["--fair"], 4, || init(BIN.as_ref())),
    );
    for (mode, args) in [("plain", &[][..]), ("fair", &["--fair"][..])] {
        let key = format!("{mode}-new-tables");
        check(&key, &contend(&pg, &key, args, 3, || ()));
    }
}

/// An init that the server rolls back to end a deadlock is tried again: a session holds
/// `holders`, init takes `locks` and waits for `holders`, the session then reads `locks`. The
/// server ends the cycle by rolling back init (the session's deadlock_timeout is longer, and
/// the server's shorter than init's lock_timeout); init then waits for the session to end and
/// exits 0.
#[test]
fn an_init_rolled_back_to_end_a_deadlock_is_tried_again() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    // The server looks for the deadlock before init's own lock_timeout (1 s) ends its wait.
    pg.psql("ALTER SYSTEM SET deadlock_timeout = '200ms'");
    pg.psql("SELECT pg_reload_conf()");
    thread::scope(|s| {
        let session = s.spawn(|| {
            pg.psql_output(
                "BEGIN; SET LOCAL deadlock_timeout = '30s'; SET LOCAL statement_timeout = '30s'; \
                 LOCK TABLE redlock.holders IN ROW EXCLUSIVE MODE; \
                 DO $$ BEGIN WHILE NOT EXISTS (SELECT 1 FROM pg_locks \
                     WHERE relation = 'redlock.holders'::regclass AND NOT granted) LOOP \
                     PERFORM pg_sleep(0.01); END LOOP; END $$; \
                 SELECT count(*) FROM redlock.locks; SELECT pg_sleep(1); COMMIT;",
            )
        });
        wait_for_a_session_holding_holders(&pg);
        let init = Redlock::admin_at("init", &pg.url())
            .stdout_contains("redlock's tables and functions are in schema")
            .output();
        let session = session.join().unwrap();
        assert!(
            session.status.success(),
            "{}",
            String::from_utf8_lossy(&session.stderr)
        );
        assert!(
            pg.log().contains("deadlock detected"),
            "no deadlock to end: {init:?}\n{}",
            pg.log()
        );
    });
}

/// An init behind a transaction that holds one of the tables for longer than init's time
/// limit gives up with one line and 69, and leaves nothing waiting in the server: a run goes on
/// at once, the transaction still open, where an abandoned init's queued lock would hold every
/// run's step behind it until the transaction ended.
#[test]
fn an_init_behind_a_long_transaction_gives_up_and_leaves_no_lock_queued() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    thread::scope(|s| {
        let session = s.spawn(|| {
            pg.psql_output(
                "BEGIN; LOCK TABLE redlock.holders IN ROW EXCLUSIVE MODE; SELECT pg_sleep(9); \
                 COMMIT;",
            )
        });
        wait_for_a_session_holding_holders(&pg);
        let started = std::time::Instant::now();
        let out = Redlock::admin_at("init", &pg.url())
            .any_status()
            .stderr_contains("stayed locked by other transactions for 5 s")
            .stderr_lines(1)
            .output();
        out.assert_code(69);
        let port = format!(":{}", pg.port());
        assert_snapshot(
            "pg-init-tables-held.stderr",
            out.stderr.trim(),
            &[(&port, ":5432")],
        );
        assert!(
            started.elapsed() < Duration::from_secs(7),
            "init took {:?}",
            started.elapsed()
        );
        assert_eq!(
            pg.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"),
            "0",
            "a statement still waits for a lock after init gave up"
        );
        Redlock::run_at(&pg.url())
            .key("after-init")
            .ttl("3s")
            .sh("true")
            .output();
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the session ended before the run could show anything"
        );
        let session = session.join().unwrap();
        assert!(session.status.success());
    });
}

/// Until another session holds `redlock.holders` (ROW EXCLUSIVE, as a step's write does).
fn wait_for_a_session_holding_holders(pg: &PgServer) {
    wait_until(PATIENCE, "the session to hold holders", || {
        pg.psql(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
             WHERE c.relname = 'holders' AND l.mode = 'RowExclusiveLock' AND l.granted",
        ) == "1"
    });
}
