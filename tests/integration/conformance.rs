//! The contract every backend keeps, one set of tests run against each (object_store's
//! `integration.rs` and ShedLock's `AbstractLockProviderIntegrationTest` are the models): a
//! real Redis, a real 3-member etcd cluster, a real PostgreSQL with redlock's tables, and a real
//! 3-member ZooKeeper ensemble. Exclusion and rising fencing tokens under
//! contention, the exit statuses, busy and `--wait` with a prompt hand-over, first come first
//! served with `--fair`, `--limit`, `--shared`, `--min-interval`, the watchdog stopping a frozen
//! holder's command, TERM forwarded, the admin commands, the counters and the metrics file. What only one
//! backend has (Sentinel, Cluster, a quorum; a leader lost) is tested beside it.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// A lock service the contract is tested on.
pub trait Service {
    /// The `--url` that reaches it.
    fn url(&self) -> String;
}

impl Service for RedisServer {
    fn url(&self) -> String {
        RedisServer::url(self)
    }
}

impl Service for EtcdCluster {
    fn url(&self) -> String {
        EtcdCluster::url(self)
    }
}

/// A 3-member ZooKeeper ensemble whose sessions may be as long as a minute (the fixture's
/// ticks of 200 ms allow 4 s), for runs with the default `--ttl` of 30 s.
pub struct ZkForRuns(pub ZkEnsemble);

impl ZkForRuns {
    pub fn start() -> Self {
        Self(ZkEnsemble::start_with(ZkOpts {
            extra_config: vec!["maxSessionTimeout=60000".to_owned()],
            ..ZkOpts::default()
        }))
    }
}

impl Service for ZkForRuns {
    fn url(&self) -> String {
        self.0.url()
    }
}

/// A PostgreSQL server with redlock's tables made as a user makes them: `redlock init`.
pub struct PgWithTables(pub PgServer);

impl PgWithTables {
    pub fn start() -> Self {
        let pg = PgServer::start();
        Redlock::admin_at("init", &pg.url())
            .stdout_contains("redlock's tables and functions are in schema")
            .output()
            .assert_code(0);
        Self(pg)
    }
}

impl Service for PgWithTables {
    fn url(&self) -> String {
        self.0.url()
    }
}

/// Each test of the contract, once on each backend.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod on_redis {
            $(#[test] fn $name() { super::$name(&crate::common::RedisServer::start()) })*
        }
        mod on_etcd {
            $(#[test] fn $name() { super::$name(&crate::common::EtcdCluster::start()) })*
        }
        mod on_postgres {
            $(#[test] fn $name() { super::$name(&super::PgWithTables::start()) })*
        }
        mod on_zookeeper {
            $(#[test] fn $name() { super::$name(&super::ZkForRuns::start()) })*
        }
    };
}

conformance!(
    contenders_never_overlap_and_tokens_rise,
    exit_statuses_are_the_commands_or_the_tables,
    a_waiter_runs_as_soon_as_the_holder_ends,
    fair_waiters_run_in_the_order_they_came,
    a_semaphore_lets_n_in_and_no_more,
    readers_share_and_a_writer_is_alone,
    a_success_skips_runs_within_the_min_interval,
    a_frozen_holders_command_is_stopped_before_its_lease_ends,
    term_reaches_the_command_and_the_lock_is_released,
    the_admin_commands_show_and_break_a_lock,
    a_holder_forced_free_before_its_next_renewal_says_so_in_one_line,
    the_metrics_file_says_how_each_run_ended,
    runs_turned_away_at_once_are_each_counted,
);

fn run(service: &dyn Service) -> Redlock {
    Redlock::run_at(&service.url())
}

fn admin(sub: &str, service: &dyn Service) -> Redlock {
    Redlock::admin_at(sub, &service.url())
}

/// Eight contenders waiting for one lock: never two at once, and each token larger than the
/// one of the run before it.
fn contenders_never_overlap_and_tokens_rise(service: &dyn Service) {
    const N: usize = 8;
    let dir = TempDir::new();
    let procs: Vec<Proc> = (0..N)
        .map(|i| {
            let script = format!(
                "date +%s%N > {s}; echo $REDLOCK_FENCING_TOKEN > {f}; sleep 0.05; date +%s%N > {e}",
                s = dir.sh(&format!("{i}.start")),
                f = dir.sh(&format!("{i}.fence")),
                e = dir.sh(&format!("{i}.end")),
            );
            run(service)
                .key("crowd")
                .wait("60s")
                .ttl("3s")
                .sh(&script)
                .spawn()
        })
        .collect();
    for (i, proc) in procs.into_iter().enumerate() {
        let out = proc.finish_within(Duration::from_secs(70));
        assert_eq!(out.code(), 0, "contender {i}: {}", out.stderr);
    }
    let mut runs: Vec<(i128, i128, i64)> = (0..N)
        .map(|i| {
            let start = read_stamps(&dir.join(&format!("{i}.start")))[0];
            let end = read_stamps(&dir.join(&format!("{i}.end")))[0];
            let fence = read(&dir.join(&format!("{i}.fence")))
                .trim()
                .parse()
                .unwrap();
            (start, end, fence)
        })
        .collect();
    runs.sort();
    for pair in runs.windows(2) {
        assert!(pair[1].0 > pair[0].1, "two runs overlapped: {runs:?}");
        assert!(pair[1].2 > pair[0].2, "a token did not rise: {runs:?}");
    }
}

/// The command's own status, 128+N for a signal death, 127 and 126, 75 busy (or the
/// --conflict-exit-code), 64 for bad usage with nothing run.
fn exit_statuses_are_the_commands_or_the_tables(service: &dyn Service) {
    let dir = TempDir::new();
    for (script, status) in [("exit 0", 0), ("exit 3", 3)] {
        run(service).key("codes").sh(script).status(status).output();
    }
    // A signal death: redlock dies of the same signal (a shell shows 143).
    run(service)
        .key("codes")
        .sh("kill -TERM $$")
        .signal(15)
        .output();
    run(service)
        .key("codes")
        .command(["no-such-command-here"])
        .status(127)
        .any_stderr()
        .output();
    let (holder, _) = run(service).key("codes").hold(&dir, "h");
    run(service)
        .key("codes")
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    run(service)
        .key("codes")
        .args(["--conflict-exit-code", "0"])
        .sh(&marker_script(&dir))
        .output();
    run(service)
        .key("codes")
        .ttl("-1s")
        .sh(&marker_script(&dir))
        .status(64)
        .any_stderr()
        .output();
    assert!(
        !dir.join("marker").exists(),
        "a command ran without the lock"
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// A waiter blocked behind the holder starts as soon as the holder's command ends: woken by
/// the release, not by a timer.
fn a_waiter_runs_as_soon_as_the_holder_ends(service: &dyn Service) {
    let dir = TempDir::new();
    let (holder, _) = run(service).key("handover").ttl("20s").hold(&dir, "h");
    let waiter = run(service)
        .key("handover")
        .wait("30s")
        .sh(&format!("date +%s%N > {}", dir.sh("w.start")))
        .spawn();
    // Long enough to be blocked in its wait, not polling.
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        !dir.join("w.start").exists(),
        "the waiter ran beside the holder"
    );
    let released = now_ns();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    let took = read_stamps(&dir.join("w.start"))[0] - released;
    assert!(
        took < 2_000_000_000,
        "the waiter started {} ms after the release",
        took / 1_000_000
    );
}

/// Waiters with --fair run in the order they came.
fn fair_waiters_run_in_the_order_they_came(service: &dyn Service) {
    let dir = TempDir::new();
    let (holder, _) = run(service).key("fair").hold(&dir, "h");
    let mut waiters = Vec::new();
    for i in 0..3 {
        waiters.push(
            run(service)
                .key("fair")
                .args(["--fair", "--wait", "30s"])
                .sh(&format!("echo {i} >> {}", dir.sh("order")))
                .spawn(),
        );
        // Each waiter in the queue before the next comes.
        std::thread::sleep(Duration::from_millis(400));
    }
    admin("status", service)
        .key("fair")
        .stdout_contains("  waiters:  3")
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    for waiter in waiters {
        waiter.finish().assert_code(0);
    }
    assert_eq!(read(&dir.join("order")), "0\n1\n2\n");
}

/// `--limit 2`: two run at once, the third waits or is busy; never three.
fn a_semaphore_lets_n_in_and_no_more(service: &dyn Service) {
    let dir = TempDir::new();
    let slot = || run(service).key("pool").args(["--limit", "2"]);
    let (a, _) = slot().hold(&dir, "a");
    let (b, _) = slot().hold(&dir, "b");
    slot().sh(&marker_script(&dir)).status(75).output();
    assert!(!dir.join("marker").exists(), "a third ran beside two");
    let third = slot().wait("30s").sh(&marker_script(&dir)).spawn();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!dir.join("marker").exists(), "a third ran beside two");
    touch(&dir.join("a.go"));
    a.finish().assert_code(0);
    third.finish().assert_code(0);
    assert!(dir.join("marker").exists());
    // Another --limit for the same lock is refused, nothing run.
    run(service)
        .key("pool")
        .args(["--limit", "3"])
        .sh("true")
        .status(64)
        .any_stderr()
        .output();
    touch(&dir.join("b.go"));
    b.finish().assert_code(0);
}

/// `--shared` holders run together; an exclusive one waits for them and runs alone.
fn readers_share_and_a_writer_is_alone(service: &dyn Service) {
    let dir = TempDir::new();
    let reader = || run(service).key("rw").arg("--shared");
    let (r1, _) = reader().hold(&dir, "r1");
    let (r2, _) = reader().hold(&dir, "r2");
    run(service)
        .key("rw")
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    let writer = run(service)
        .key("rw")
        .wait("30s")
        .sh(&format!("touch {}", dir.sh("wrote")))
        .spawn();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!dir.join("wrote").exists(), "the writer ran beside readers");
    touch(&dir.join("r1.go"));
    r1.finish().assert_code(0);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !dir.join("wrote").exists(),
        "the writer ran beside a reader"
    );
    touch(&dir.join("r2.go"));
    r2.finish().assert_code(0);
    writer.finish().assert_code(0);
    assert!(dir.join("wrote").exists() && !dir.join("marker").exists());
}

/// `--min-interval`: a success (with the flag or without) skips later runs within it; a
/// failure does not.
fn a_success_skips_runs_within_the_min_interval(service: &dyn Service) {
    let dir = TempDir::new();
    let cron = || run(service).key("daily").args(["--min-interval", "1h"]);
    cron().sh("exit 2").status(2).output();
    cron().sh("true").output();
    cron().sh(&marker_script(&dir)).status(75).output();
    assert!(!dir.join("marker").exists(), "ran within the interval");
    // `status` says how long such runs still skip.
    admin("status", service)
        .key("daily")
        .stdout_contains("; --min-interval runs skip for another 59m")
        .output();
    run(service).key("once").sh("true").output();
    run(service)
        .key("once")
        .args(["--min-interval", "1h", "-v"])
        .sh(&marker_script(&dir))
        .status(75)
        .stderr_contains("within --min-interval; skipping the run")
        .output();
    assert!(!dir.join("marker").exists(), "ran within the interval");
}

/// A holder frozen past its lease (SIGSTOP of redlock): its watchdog kills the command before
/// the lease ends, a contender takes the lock, and the holder, continued, exits 76.
fn a_frozen_holders_command_is_stopped_before_its_lease_ends(service: &dyn Service) {
    let dir = TempDir::new();
    let holder = run(service)
        .key("frozen")
        .ttl("2s")
        .sh(&heartbeat_script(&dir, "b"))
        .spawn();
    wait_for_file(&dir.join("b.ready"));
    holder.signal(Signal::SIGSTOP);
    let stopped = now_ns();
    let contender = run(service)
        .key("frozen")
        .wait("20s")
        .sh(&format!("date +%s%N > {}", dir.sh("c.start")))
        .spawn();
    contender.finish().assert_code(0);
    let beats = read_stamps(&dir.join("b.hb"));
    let last = *beats.last().unwrap();
    let started = read_stamps(&dir.join("c.start"))[0];
    assert!(
        last < started,
        "the frozen holder's command beat {} ms after the contender started",
        (last - started) / 1_000_000
    );
    assert!(started > stopped, "the contender started before the freeze");
    holder.signal(Signal::SIGCONT);
    holder.finish().assert_code(76);
    // The contender found the holder's run without an end and marked it vanished; the holder,
    // back, corrects that to what it was: a lost lock, counted once.
    let history = admin("history", service)
        .key("frozen")
        .stdout_contains("lock_lost (exit 76)")
        .output();
    assert!(!history.stdout.contains("vanished"), "{}", history.stdout);
    admin("status", service)
        .key("frozen")
        .stdout_contains("runs ended: 1 lock_lost, 1 success")
        .output();
}

/// TERM to redlock reaches the command; redlock releases the lock and dies of TERM.
fn term_reaches_the_command_and_the_lock_is_released(service: &dyn Service) {
    let dir = TempDir::new();
    let script = format!(
        "trap 'touch {got}; exit 7' TERM; touch {ready}; while :; do sleep 0.02; done",
        got = dir.sh("got"),
        ready = dir.sh("ready"),
    );
    let holder = run(service).key("term").sh(&script).spawn();
    wait_for_file(&dir.join("ready"));
    holder.signal(Signal::SIGTERM);
    let out = holder.finish();
    assert!(dir.join("got").exists(), "the command did not get TERM");
    out.assert_code(7);
    // Free at once: a run without --wait takes it.
    run(service).key("term").sh("true").output();
}

/// `status`, `list`, `history`, `check` and `release --force` on a held lock.
fn the_admin_commands_show_and_break_a_lock(service: &dyn Service) {
    let dir = TempDir::new();
    admin("check", service)
        .key("job")
        .args(["--max-age", "1h"])
        .status(2)
        .stdout_contains("CRITICAL: lock 'job' has no recorded run")
        .output();
    run(service).key("job").sh("true").output();
    let holder = run(service)
        .key("job")
        .ttl("5s")
        .sh(&hold_script(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let token = wait_for_line(&dir.join("h.token"));
    admin("status", service)
        .key("job")
        .stdout_contains(&format!("token:    {token}"))
        .output();
    admin("list", service).stdout_contains("job\t").output();
    admin("history", service)
        .key("job")
        .stdout_contains("success (exit 0)")
        .output();
    admin("check", service)
        .key("job")
        .args(["--max-age", "1h"])
        .status(0)
        .stdout_contains("OK: lock 'job' last succeeded")
        .output();
    // A waiter queued behind the holder: the force release lets it in.
    let waiter = run(service)
        .key("job")
        .wait("20s")
        .sh(&format!(
            "echo $REDLOCK_FENCING_TOKEN > {}",
            dir.sh("w.fence")
        ))
        .spawn();
    wait_until(PATIENCE, "the waiter waiting", || {
        admin("status", service)
            .key("job")
            .any_stdout()
            .output()
            .stdout
            .contains("waiters:  1")
    });
    let out = admin("release", service)
        .key("job")
        .args(["--force", "--token", &token])
        .stdout_contains("released lock 'job' held by ")
        .output();
    // The counter it reports is the broken holder's token or past it, and every token given
    // out after it is past the counter: the queued waiter's (on etcd, an older revision than
    // the release's), then a new run's.
    let counter: u64 = out
        .stdout
        .rsplit("fencing counter now ")
        .next()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no counter in {:?}", out.stdout));
    let fence: u64 = wait_for_line(&dir.join("h.fence")).parse().unwrap();
    assert!(counter >= fence, "{}", out.stdout);
    waiter.finish_within(Duration::from_secs(20)).assert_code(0);
    let let_in: u64 = wait_for_line(&dir.join("w.fence")).parse().unwrap();
    assert!(
        let_in > counter,
        "the waiter's token {let_in} after counter {counter}"
    );
    // The holder finds out at its next renewal and stops its command.
    let out = holder.finish_within(Duration::from_secs(15));
    out.assert_code(76);
    admin("history", service)
        .key("job")
        .stdout_contains("lock_lost (exit 76)")
        .output();
    let next = run(service)
        .key("job")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    let next: u64 = next.stdout.trim().parse().unwrap();
    assert!(next > counter, "token {next} after counter {counter}");
}

/// A holder forced free whose command ends before its next renewal: the release finds the lock
/// gone, and the run exits 76 with one line that says so (a hostile tester saw a warning
/// before it, saying the same).
fn a_holder_forced_free_before_its_next_renewal_says_so_in_one_line(service: &dyn Service) {
    let dir = TempDir::new();
    let holder = run(service)
        .key("k")
        .ttl("60s")
        .sh(&hold_script(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    admin("release", service)
        .key("k")
        .arg("--force")
        .any_stdout()
        .output();
    touch(&dir.join("h.go"));
    let out = holder.finish_within(Duration::from_secs(15));
    out.assert_code(76);
    assert_snapshot("gone-at-release.stderr", out.stderr.trim(), &[]);
}

/// `--metrics-file` says how each run ended, whatever the backend.
fn the_metrics_file_says_how_each_run_ended(service: &dyn Service) {
    let dir = TempDir::new();
    let file = dir.join("m.prom");
    let file = file.to_str().unwrap();
    run(service)
        .key("m")
        .args(["--metrics-file", file])
        .sh("exit 3")
        .status(3)
        .output();
    let text = read(&dir.join("m.prom"));
    assert!(
        text.contains(r#"redlock_runs_total{key="m",outcome="failed"} 1"#),
        "{text}"
    );
    let started = Instant::now();
    run(service)
        .key("m")
        .args(["--metrics-file", file])
        .sh("true")
        .output();
    let text = read(&dir.join("m.prom"));
    assert!(
        text.contains(r#"redlock_runs_total{key="m",outcome="success"} 1"#),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Twelve runs turned away at the same moment (busy, no `--wait`), then six skipped at once
/// (`--min-interval`): `status` counts every one. On etcd a counter is a compare-and-swap; a
/// few tries each lost counts when clients ended together.
fn runs_turned_away_at_once_are_each_counted(service: &dyn Service) {
    let dir = TempDir::new();
    let (holder, _) = run(service).key("many").hold(&dir, "h");
    let at_once = |n: usize, lock: &'static str, args: &'static [&'static str]| {
        let procs: Vec<_> = (0..n)
            .map(|_| run(service).key(lock).args(args).sh("true").spawn())
            .collect();
        for proc in procs {
            proc.finish_within(PATIENCE).assert_code(75);
        }
    };
    at_once(12, "many", &[]);
    admin("status", service)
        .key("many")
        .stdout_contains("12 busy")
        .output();
    touch(&dir.join("h.go"));
    holder.finish_within(PATIENCE).assert_code(0);
    run(service).key("once").sh("true").output();
    at_once(6, "once", &["--min-interval", "1h"]);
    admin("status", service)
        .key("once")
        .stdout_contains("6 skipped")
        .output();
}
