//! Rolling upgrades: a fleet upgrades one host at a time, so for a while hosts on the build this
//! round started from (the old build, [`OLD_COMMIT`], built from git by scripts/old-build.sh or
//! taken from `REDLOCK_OLD_BIN`) and on the build under test lock one key on one Redis at once.
//! In every mode they exclude each other (contention loops whose jobs log their start and end,
//! checked for overlaps and for fencing tokens that repeat or go backwards), a release by one
//! wakes the other's waiter well before that waiter's own fallback timer would, they keep one
//! fair queue and one writers' turn, and each build's `status` and `list` show the other's
//! holders. `builds_on_different_keys_are_caught_overlapping` shows the checker is not blind.
//! Until the protocol changes both builds are the same code; a build whose keys moved (the new
//! one under another `--prefix`) fails every other test here.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// The start of the round, 0.2.0 as it shipped: "A new watchdog gets its orders before redlock
/// says it started one".
const OLD_COMMIT: &str = "d5021e918c9e6b17c2540a96b9253af473897d74";

/// How long building the old build may take (a clean debug build takes about a minute here).
const BUILD_PATIENCE: Duration = Duration::from_secs(15 * 60);

/// The old build's binary: `REDLOCK_OLD_BIN`, or built once per test process by
/// scripts/old-build.sh (which keeps it under target/old-build/, so the next process finds it).
fn old_bin() -> &'static Path {
    static OLD: OnceLock<PathBuf> = OnceLock::new();
    OLD.get_or_init(|| {
        if let Some(bin) = std::env::var_os("REDLOCK_OLD_BIN").filter(|b| !b.is_empty()) {
            let bin = PathBuf::from(bin);
            assert!(
                bin.is_file(),
                "REDLOCK_OLD_BIN={} is not a file (scripts/old-build.sh prints the path)",
                bin.display()
            );
            return bin;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/old-build.sh");
        let mut child = Command::new("bash")
            .arg(script)
            .arg(OLD_COMMIT)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running bash scripts/old-build.sh");
        // Read both pipes while it runs (cargo may say a lot on stderr), bounded in time.
        let mut stderr = child.stderr.take().unwrap();
        let errors = thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let deadline = Instant::now() + BUILD_PATIENCE;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("scripts/old-build.sh still running after {BUILD_PATIENCE:?}");
            }
            thread::sleep(Duration::from_millis(50));
        };
        let errors = errors.join().unwrap();
        assert!(
            status.success(),
            "building the old build ({OLD_COMMIT}) failed ({status}); set REDLOCK_OLD_BIN to \
             skip the build:\n{errors}"
        );
        let bin = PathBuf::from(stdout.trim());
        assert!(bin.is_file(), "scripts/old-build.sh printed {stdout:?}");
        bin
    })
}

/// One of the two builds a host of the fleet may run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Build {
    Old,
    New,
}
use Build::{New, Old};

impl Build {
    fn name(self) -> &'static str {
        match self {
            Old => "old",
            New => "new",
        }
    }

    fn from_name(name: &str) -> Build {
        match name {
            "old" => Old,
            "new" => New,
            _ => panic!("no build {name:?}"),
        }
    }

    fn bin(self) -> &'static OsStr {
        match self {
            Old => old_bin().as_os_str(),
            New => OsStr::new(BIN),
        }
    }

    fn other(self) -> Build {
        match self {
            Old => New,
            New => Old,
        }
    }

    /// `redlock run --url <redis>` of this build.
    fn run(self, redis: &RedisServer) -> Redlock {
        Redlock::run(redis).binary(self.bin())
    }

    /// `redlock <sub> --url <redis>` of this build, its stdout.
    fn admin(self, sub: &str, redis: &RedisServer, args: &[&str]) -> String {
        Redlock::admin(sub, redis)
            .binary(self.bin())
            .args(args)
            .any_stdout()
            .output()
            .stdout
    }
}

const BOTH: [Build; 2] = [Old, New];

fn host() -> String {
    nix::unistd::gethostname().unwrap().into_string().unwrap()
}

// --- contention loops ----------------------------------------------------------------------

/// Whether a job holds the lock exclusively or shared (`--shared`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Writer,
    Reader,
}

/// A host of the fleet in a contention loop: `runs` runs one after another of
/// `redlock run --key <key> --ttl 3s <args> -- <job>`, the job holding for `hold`.
struct Worker {
    build: Build,
    role: Role,
    args: Vec<String>,
    runs: usize,
    hold: &'static str,
    /// Pause between runs (so that a loop without --wait does not only hammer).
    pause: Duration,
    /// Exit 75 (busy, or skipped by --min-interval) is a run that did not happen, not a failure.
    busy_ok: bool,
}

impl Worker {
    fn new(build: Build, args: &[&str], runs: usize) -> Worker {
        Worker {
            build,
            role: if args.contains(&"--shared") {
                Role::Reader
            } else {
                Role::Writer
            },
            args: args.iter().map(|a| a.to_string()).collect(),
            runs,
            hold: "0.03",
            pause: Duration::ZERO,
            busy_ok: false,
        }
    }

    fn hold(mut self, hold: &'static str) -> Worker {
        self.hold = hold;
        self
    }

    fn busy_ok(mut self, pause: Duration) -> Worker {
        self.busy_ok = true;
        self.pause = pause;
        self
    }
}

/// What a loop's jobs did: each appends (O_APPEND, one write a line, so the file's order is the
/// order they happened in) `start BUILD ROLE PID FENCE NS` when it starts and `end ...` when it
/// ends, NS from `date +%s%N`.
#[derive(Debug)]
struct Event {
    start: bool,
    build: Build,
    role: Role,
    pid: u32,
    fence: i64,
    ns: i128,
}

fn job_script(log: &str, build: Build, role: Role, hold: &str) -> String {
    let role = match role {
        Role::Writer => "w",
        Role::Reader => "r",
    };
    let line = |kind: &str| {
        format!(
            "printf '{kind} {b} {role} %s %s %s\\n' \"$$\" \"$REDLOCK_FENCING_TOKEN\" \
             \"$(date +%s%N)\" >> {log}",
            b = build.name()
        )
    };
    format!("{}; sleep {hold}; {}", line("start"), line("end"))
}

fn read_events(path: &Path) -> Vec<Event> {
    read(path)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 6, "bad job line {l:?}");
            Event {
                start: match f[0] {
                    "start" => true,
                    "end" => false,
                    _ => panic!("bad job line {l:?}"),
                },
                build: Build::from_name(f[1]),
                role: if f[2] == "r" {
                    Role::Reader
                } else {
                    Role::Writer
                },
                pid: f[3].parse().unwrap(),
                fence: fencing_token(f[4]),
                ns: f[5].parse().unwrap(),
            }
        })
        .collect()
}

/// How many may hold the lock at once.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// One holder (plain, --wait, --fair, --min-interval).
    Exclusive,
    /// `--limit N`.
    Slots(usize),
    /// `--shared` readers together, a writer alone.
    ReadersWriters,
}

/// What a loop showed, once its log passed [`check`].
#[derive(Debug, Default)]
struct Seen {
    /// Runs per build: old, new.
    runs: [usize; 2],
    /// The most holders at once, and the most at once of which both builds were.
    most: usize,
    both_builds_at_once: bool,
    /// Runs that started when a run of the other build had been the last to end.
    crossings: usize,
    /// From a run's end to the next start of the other build, when nothing else ran between.
    cross_gaps_ms: Vec<f64>,
    /// (start, end) of each run, in ns, in the order they started.
    spans: Vec<(i128, i128)>,
}

/// Walks a loop's log in order: no more holders at once than `rule` allows, every end after
/// its start, every fencing token new and above every token of a run that had ended before it
/// started. Errors name the first breach.
fn check(events: &[Event], rule: Rule) -> Result<Seen, String> {
    let mut seen = Seen::default();
    let mut running: Vec<&Event> = Vec::new();
    let mut fences = HashSet::new();
    let mut highest_ended = i64::MIN;
    let mut last_ended: Option<&Event> = None;
    for (i, e) in events.iter().enumerate() {
        let at = |running: &[&Event]| format!("line {}: {e:?}; running: {running:?}", i + 1);
        if !e.start {
            let pos = running
                .iter()
                .position(|r| r.pid == e.pid && r.build == e.build)
                .ok_or_else(|| format!("an end without its start, {}", at(&running)))?;
            let began = running.remove(pos);
            if began.fence != e.fence {
                return Err(format!(
                    "the fencing token changed during a run, {}",
                    at(&running)
                ));
            }
            seen.spans
                .iter_mut()
                .rev()
                .find(|s| s.0 == began.ns)
                .unwrap()
                .1 = e.ns;
            highest_ended = highest_ended.max(e.fence);
            last_ended = Some(e);
            continue;
        }
        if !fences.insert(e.fence) {
            return Err(format!(
                "fencing token {} handed out twice, {}",
                e.fence,
                at(&running)
            ));
        }
        if e.fence <= highest_ended {
            return Err(format!(
                "fencing token {} not above {highest_ended}, a run that had ended, {}",
                e.fence,
                at(&running)
            ));
        }
        if let Some(last) = last_ended
            && last.build != e.build
        {
            seen.crossings += 1;
            if running.is_empty() {
                seen.cross_gaps_ms.push((e.ns - last.ns) as f64 / 1e6);
            }
        }
        running.push(e);
        let writers = running.iter().filter(|r| r.role == Role::Writer).count();
        let overlap = match rule {
            Rule::Exclusive => running.len() > 1,
            Rule::Slots(n) => running.len() > n,
            Rule::ReadersWriters => writers > 0 && running.len() > 1,
        };
        if overlap {
            return Err(format!("overlap beyond {rule:?}, {}", at(&running)));
        }
        seen.runs[usize::from(e.build == New)] += 1;
        seen.most = seen.most.max(running.len());
        seen.both_builds_at_once |= running.iter().any(|r| r.build != e.build);
        seen.spans.push((e.ns, 0));
    }
    if !running.is_empty() {
        return Err(format!("runs that never ended: {running:?}"));
    }
    Ok(seen)
}

/// Runs the workers at once against `key` on `redis`, each a thread looping over its runs, and
/// returns the log's events. Every run exits 0, or 75 where the worker allows it.
fn contend(redis: &RedisServer, key: &str, workers: &[Worker]) -> Vec<Event> {
    // Built (or found) before any worker starts, so that no worker starts late.
    old_bin();
    let dir = TempDir::new();
    let log = dir.sh("jobs.log");
    thread::scope(|s| {
        for w in workers {
            let script = job_script(&log, w.build, w.role, w.hold);
            s.spawn(move || {
                for _ in 0..w.runs {
                    let out = w
                        .build
                        .run(redis)
                        .key(key)
                        .ttl("3s")
                        .args(&w.args)
                        .sh(&script)
                        .any_status()
                        .any_stderr()
                        .output();
                    let code = out.code();
                    assert!(
                        code == 0 || (w.busy_ok && code == 75),
                        "{} build, {:?}: exit {code}\n{}",
                        w.build.name(),
                        w.args,
                        out.stderr
                    );
                    thread::sleep(w.pause);
                }
            });
        }
    });
    read_events(&dir.join("jobs.log"))
}

/// `contend`, then [`check`] must pass; both builds must have run, and their runs must have
/// followed each other at least once.
#[track_caller]
fn contend_and_check(key: &str, rule: Rule, workers: &[Worker]) -> Seen {
    let redis = RedisServer::start();
    let started = Instant::now();
    // Who gets a free lock is a race: without --wait, a round of 48 attempts can see only a
    // handful of runs, all of one build (on a loaded machine about one round in 30). Each
    // round is checked for overlaps; up to three are run until both builds ran and crossed.
    let mut seen;
    let mut round = 0;
    loop {
        let events = contend(&redis, &format!("{key}{round}"), workers);
        seen = check(&events, rule).unwrap_or_else(|e| panic!("{key}: {e}\nlog: {events:#?}"));
        round += 1;
        if round == 3 || (seen.runs[0] > 0 && seen.runs[1] > 0 && seen.crossings > 0) {
            break;
        }
    }
    eprintln!(
        "{key}: {} old and {} new runs in {:?}, {} crossings between builds, at most {} at once; \
         hand-over to the other build when it waited, longest {:.1} ms",
        seen.runs[0],
        seen.runs[1],
        started.elapsed(),
        seen.crossings,
        seen.most,
        seen.cross_gaps_ms.iter().cloned().fold(0.0, f64::max)
    );
    assert!(
        seen.runs[0] > 0 && seen.runs[1] > 0,
        "{key}: a build never ran: {seen:?}"
    );
    assert!(
        seen.crossings > 0,
        "{key}: the lock never passed between builds: {seen:?}"
    );
    // A waiter the other build's release did not wake would sit out its fallback timer (up to
    // the 3 s ttl) with the lock free.
    let longest = seen.cross_gaps_ms.iter().cloned().fold(0.0, f64::max);
    assert!(
        longest < 1500.0,
        "{key}: the lock stood free {longest:.0} ms before the other build took it: {seen:?}"
    );
    seen
}

/// Two hosts of each build, `runs` runs each.
fn fleet(args: &[&str], runs: usize) -> Vec<Worker> {
    [Old, New, Old, New]
        .into_iter()
        .map(|b| Worker::new(b, args, runs))
        .collect()
}

#[test]
fn plain_runs_of_both_builds_exclude_each_other() {
    let workers: Vec<Worker> = fleet(&[], 12)
        .into_iter()
        .map(|w| w.busy_ok(Duration::from_millis(5)))
        .collect();
    contend_and_check("plain", Rule::Exclusive, &workers);
}

#[test]
fn waiters_of_both_builds_take_turns() {
    contend_and_check("wait", Rule::Exclusive, &fleet(&["--wait", "20s"], 5));
}

#[test]
fn fair_waiters_of_both_builds_take_turns() {
    contend_and_check(
        "fair",
        Rule::Exclusive,
        &fleet(&["--fair", "--wait", "20s"], 5),
    );
}

#[test]
fn a_semaphore_of_both_builds_has_two_holders_at_most() {
    let workers: Vec<Worker> = [Old, New, Old, New, Old, New]
        .into_iter()
        .map(|b| Worker::new(b, &["--limit", "2", "--wait", "20s"], 4).hold("0.1"))
        .collect();
    let seen = contend_and_check("limit", Rule::Slots(2), &workers);
    assert!(
        seen.most == 2 && seen.both_builds_at_once,
        "the two builds never held a slot each at once: {seen:?}"
    );
}

#[test]
fn shared_readers_and_writers_of_both_builds() {
    let mut workers: Vec<Worker> = [Old, New, Old, New]
        .into_iter()
        .map(|b| Worker::new(b, &["--shared", "--wait", "20s"], 5).hold("0.1"))
        .collect();
    workers.extend(BOTH.map(|b| Worker::new(b, &["--wait", "20s"], 4)));
    let seen = contend_and_check("shared", Rule::ReadersWriters, &workers);
    assert!(
        seen.both_builds_at_once,
        "readers of the two builds never held the lock together: {seen:?}"
    );
}

#[test]
fn min_interval_is_kept_across_builds() {
    // A success of one build skips the other's run within the interval, both ways.
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for first in BOTH {
        let started = Instant::now();
        first
            .run(&redis)
            .key("interval")
            .args(["--min-interval", "2s"])
            .sh("true")
            .output();
        // The success is recorded by the time its redlock exits.
        let succeeded = Instant::now();
        first
            .other()
            .run(&redis)
            .key("interval")
            .args(["--min-interval", "2s"])
            .sh(&marker_script(&dir))
            .status(75)
            .any_stderr()
            .output();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "two runs took {:?}: too slow to test a 2 s interval",
            started.elapsed()
        );
        assert!(
            !dir.join("marker").exists(),
            "the {} build ran within the {} build's --min-interval",
            first.other().name(),
            first.name()
        );
        // Past the window, measured from the success (its end is recorded a little before
        // its redlock exits).
        thread::sleep(Duration::from_secs(2) - succeeded.elapsed() + Duration::from_millis(100));
    }

    // A loop of both builds, waiting too: every run that ran started at least the interval
    // after the end of the run before it.
    let workers: Vec<Worker> = fleet(&["--min-interval", "400ms", "--wait", "2s"], 12)
        .into_iter()
        .map(|w| w.busy_ok(Duration::from_millis(150)))
        .collect();
    let events = contend(&redis, "interval-loop", &workers);
    let seen = check(&events, Rule::Exclusive).unwrap_or_else(|e| panic!("{e}\n{events:#?}"));
    assert!(seen.spans.len() >= 3, "too few runs: {seen:?}");
    for pair in seen.spans.windows(2) {
        let gap_ms = (pair[1].0 - pair[0].1) as f64 / 1e6;
        assert!(
            gap_ms >= 395.0,
            "a run started {gap_ms:.0} ms after the one before it ended (--min-interval 400ms)\n\
             {events:#?}"
        );
    }
}

/// The loops' checker is not blind: when the two builds do not share a lock (the new one under
/// another prefix, as a build whose keys moved would be), it finds the overlap.
#[test]
fn builds_on_different_keys_are_caught_overlapping() {
    let redis = RedisServer::start();
    let workers: Vec<Worker> = [Old, New, Old, New]
        .into_iter()
        .map(|b| {
            let mut w = Worker::new(b, &["--wait", "20s"], 4).hold("0.1");
            if b == New {
                w.args.extend(["--prefix".to_owned(), "moved:".to_owned()]);
            }
            w
        })
        .collect();
    let events = contend(&redis, "apart", &workers);
    let err = check(&events, Rule::Exclusive).expect_err("two locks under two prefixes overlap");
    assert!(err.contains("overlap"), "{err}");
}

// --- waking the other build's waiter -------------------------------------------------------

/// How long a hand-over to a waiter of the other build may take: well under a --fair waiter's
/// 1.5 s beat, and a tenth of a plain waiter's fallback timer here (the holder's lease left,
/// 7 to 10 s), so that a waiter that was not woken and found the lock free on its own fails.
const HANDOVER_LIMIT: Duration = Duration::from_millis(700);

/// `holders` of build `holding` take `key` with `hold_args` (ttl 10 s); a waiter of the other
/// build waits with `wait_args`; the first holder's end must let it in within
/// [`HANDOVER_LIMIT`]. Returns the hand-over time: from the holder's command ending to the
/// waiter's starting.
fn handover(holding: Build, holders: usize, hold_args: &[&str], wait_args: &[&str]) -> Duration {
    old_bin();
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let mut procs = Vec::new();
    // Before a --min-interval waiter the holder fails: its success would count for the window
    // on this build (every success counts), and the waiter would rightly skip.
    let status = if wait_args.contains(&"--min-interval") {
        3
    } else {
        0
    };
    for i in 0..holders {
        let tag = format!("h{i}");
        let script = format!(
            "{}; date +%s%N > {}; exit {status}",
            hold_script(&dir, &tag),
            dir.sh(&format!("{tag}.end"))
        );
        let proc = holding
            .run(&redis)
            .key("handover")
            .ttl("10s")
            .args(hold_args)
            .sh(&script)
            .spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        procs.push(proc);
    }
    let waiter = holding
        .other()
        .run(&redis)
        .key("handover")
        .args(["--wait", "30s"])
        .args(wait_args)
        .sh(&format!("date +%s%N > {}", dir.sh("w.start")))
        .spawn();
    // Blocked in its wait (the BLPOP on its wake-up list), after its first attempt.
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") >= 1
    });
    thread::sleep(Duration::from_millis(100));
    assert!(
        !dir.join("w.start").exists(),
        "the waiter ran beside the holders"
    );
    touch(&dir.join("h0.go"));
    procs.remove(0).finish().assert_code(status);
    waiter.finish().assert_code(0);
    let end = read_stamps(&dir.join("h0.end"))[0];
    let start = read_stamps(&dir.join("w.start"))[0];
    assert!(start > end, "the waiter started before the holder ended");
    for (i, proc) in procs.into_iter().enumerate() {
        touch(&dir.join(&format!("h{}.go", i + 1)));
        proc.finish().assert_code(status);
    }
    Duration::from_nanos((start - end) as u64)
}

#[test]
fn a_release_wakes_the_other_builds_waiter_in_every_mode() {
    // (mode, holders, the holders' options, the waiter's)
    let cases: &[(&str, usize, &[&str], &[&str])] = &[
        ("plain", 1, &[], &[]),
        ("--fair", 1, &["--fair"], &["--fair"]),
        ("--limit 2", 2, &["--limit", "2"], &["--limit", "2"]),
        ("a writer after --shared", 1, &["--shared"], &[]),
        ("--shared after a writer", 1, &[], &["--shared"]),
        ("--min-interval", 1, &[], &["--min-interval", "1s"]),
    ];
    let results: Vec<(String, Duration)> = thread::scope(|s| {
        let running: Vec<_> = cases
            .iter()
            .flat_map(|&(mode, holders, hold_args, wait_args)| {
                BOTH.map(|b| {
                    let name = format!("{mode}, {} to {}", b.name(), b.other().name());
                    s.spawn(move || (name, handover(b, holders, hold_args, wait_args)))
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let shown: Vec<String> = results
        .iter()
        .map(|(name, took)| format!("{name}: {:.1} ms", took.as_secs_f64() * 1e3))
        .collect();
    eprintln!(
        "hand-over to the other build's waiter: {}",
        shown.join("; ")
    );
    for (name, took) in &results {
        assert!(
            *took < HANDOVER_LIMIT,
            "{name}: the waiter started {took:?} after the holder ended (not woken?); all: {shown:?}"
        );
    }
}

// --- status and list -----------------------------------------------------------------------

/// Holders of one build, seen by each build's `status` and `list`, text and JSON; a run of
/// the other build that would not fit beside them is turned away (75) without running.
fn seen_by_both(holding: Build, key: &str, holders: usize, args: &[&str], busy_args: &[&str]) {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let host = host();
    let procs: Vec<Proc> = (0..holders)
        .map(|i| {
            let (proc, _) = holding
                .run(&redis)
                .key(key)
                .ttl("10s")
                .args(args)
                .hold(&dir, &format!("h{i}"));
            proc
        })
        .collect();
    for reader in BOTH {
        let who = format!(
            "{}'s holders seen by the {} build",
            holding.name(),
            reader.name()
        );
        let status = reader.admin("status", &redis, &["--key", key]);
        let status_json = reader.admin("status", &redis, &["--key", key, "--json"]);
        let list = reader.admin("list", &redis, &[]);
        let list_json = reader.admin("list", &redis, &["--json"]);
        let line = list
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("{who}: no {key} in list:\n{list}"));
        assert!(status.contains(&host), "{who}: status\n{status}");
        assert!(line.contains(&host), "{who}: list\n{list}");
        for json in [&status_json, &list_json] {
            assert!(
                json.contains(&format!(r#""host":"{host}""#)),
                "{who}: {json}"
            );
        }
        for proc in &procs {
            let pid = proc.pid();
            assert!(
                status.contains(&format!("pid {pid}")),
                "{who}: status\n{status}"
            );
            assert!(line.contains(&format!("pid {pid}")), "{who}: list\n{list}");
            for json in [&status_json, &list_json] {
                assert!(json.contains(&format!(r#""pid":{pid}"#)), "{who}: {json}");
            }
        }
    }
    holding
        .other()
        .run(&redis)
        .key(key)
        .args(busy_args)
        .sh(&marker_script(&dir))
        .status(75)
        .any_stderr()
        .output();
    assert!(
        !dir.join("marker").exists(),
        "the {} build ran beside the {} build's holders of {key}",
        holding.other().name(),
        holding.name()
    );
    for i in 0..holders {
        touch(&dir.join(&format!("h{i}.go")));
    }
    for proc in procs {
        proc.finish().assert_code(0);
    }
}

#[test]
fn each_build_shows_the_others_holders_in_status_and_list() {
    thread::scope(|s| {
        for b in BOTH {
            s.spawn(move || seen_by_both(b, "plain", 1, &[], &[]));
            s.spawn(move || seen_by_both(b, "pool", 2, &["--limit", "2"], &["--limit", "2"]));
            s.spawn(move || seen_by_both(b, "readers", 2, &["--shared"], &[]));
        }
    });
}

// --- the fair queue and the writers' turn, shared across builds -----------------------------

/// Waiters of alternating builds queued one after another on a `--fair` lock run in the order
/// they came, whoever holds it: both builds read and write one queue.
#[test]
fn fair_waiters_of_both_builds_run_in_arrival_order() {
    old_bin();
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Old.run(&redis).key("fifo").arg("--fair").hold(&dir, "h");
    let order = dir.sh("order");
    let arrivals = [New, Old, New, Old, New];
    let waiters: Vec<Proc> = arrivals
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let waiter = b
                .run(&redis)
                .key("fifo")
                .args(["--fair", "--wait", "30s"])
                .sh(&format!("echo {i}-{} >> {order}; sleep 0.02", b.name()))
                .spawn();
            // Queued (its first attempt made) and blocked until woken, before the next comes.
            wait_until(PATIENCE, "the waiter to queue", || {
                redis.info_field("blocked_clients") == i as u64 + 1
            });
            waiter
        })
        .collect();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    for waiter in waiters {
        waiter.finish().assert_code(0);
    }
    let want: Vec<String> = arrivals
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{i}-{}", b.name()))
        .collect();
    let got: Vec<String> = read(&dir.join("order"))
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(got, want, "not in arrival order");
}

/// A writer of one build waiting behind readers keeps the other build's new readers out, and
/// runs before them.
#[test]
fn a_waiting_writer_of_one_build_holds_back_the_others_readers() {
    old_bin();
    thread::scope(|s| {
        for readers in BOTH {
            s.spawn(move || {
                let redis = RedisServer::start();
                let dir = TempDir::new();
                let (reader, _) = readers
                    .run(&redis)
                    .key("doc")
                    .arg("--shared")
                    .hold(&dir, "r");
                let writer = readers
                    .other()
                    .run(&redis)
                    .key("doc")
                    .wait("30s")
                    .sh(&format!("echo writer >> {}", dir.sh("order")))
                    .spawn();
                wait_until(PATIENCE, "the writer to wait", || {
                    redis.info_field("blocked_clients") == 1
                });
                readers
                    .run(&redis)
                    .key("doc")
                    .arg("--shared")
                    .sh(&marker_script(&dir))
                    .status(75)
                    .any_stderr()
                    .output();
                assert!(
                    !dir.join("marker").exists(),
                    "a reader of the {} build got in ahead of the {} build's waiting writer",
                    readers.name(),
                    readers.other().name()
                );
                let late = readers
                    .run(&redis)
                    .key("doc")
                    .args(["--shared", "--wait", "30s"])
                    .sh(&format!("echo reader >> {}", dir.sh("order")))
                    .spawn();
                wait_until(PATIENCE, "the late reader to wait", || {
                    redis.info_field("blocked_clients") == 2
                });
                touch(&dir.join("r.go"));
                reader.finish().assert_code(0);
                writer.finish().assert_code(0);
                late.finish().assert_code(0);
                assert_eq!(read(&dir.join("order")), "writer\nreader\n");
            });
        }
    });
}

/// `check` of this build over a record both builds wrote: a failure of the old build that
/// ends after this build's last success is seen (WARNING), even after more runs than the record
/// keeps began beside it; an old build's success after this build's failure is OK.
#[test]
fn check_judges_a_record_that_both_builds_wrote() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let old = || Redlock::run(&redis).binary(old_bin());
    let new = || Redlock::run(&redis);
    let ready = dir.join("long.ready");
    let go = dir.join("long.go");
    let long = old()
        .key("late")
        .args(["--limit", "2"])
        .sh(&format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.02; done; exit 4",
            shell_quote(&ready),
            shell_quote(&go)
        ))
        .spawn();
    wait_for_file(&ready);
    for _ in 0..22 {
        new().key("late").args(["--limit", "2"]).sh("true").output();
    }
    touch(&go);
    long.finish().assert_code(4);
    Redlock::admin("check", &redis)
        .key("late")
        .args(["--max-age", "1h"])
        .status(1)
        .stdout_contains("WARNING: ")
        .output();
    // This build fails, then the old one succeeds: the job works again.
    new().key("again").sh("exit 3").status(3).output();
    std::thread::sleep(Duration::from_millis(20));
    old().key("again").sh("true").output();
    Redlock::admin("check", &redis)
        .key("again")
        .args(["--max-age", "1h"])
        .status(0)
        .stdout_contains("OK: ")
        .output();
}
