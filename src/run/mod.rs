//! The `run` orchestration: acquire (waiting if asked) → spawn → supervise → release → exit status.
//!
//! One supervisor loop on the main thread owns every decision. The lease thread and the signal
//! thread (which also reaps children) only report into its channel, and the supervisor never
//! blocks on Redis, so a hung server cannot delay stopping the command before its lease ends.
//!
//! May use `process`, `lease`, `lock`, `transport` (the endpoints it is given), `report` and
//! `exit`; never `cli` or `admin` (the command line builds an [`Options`] and calls in).

use std::ffi::OsString;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::error::{Class, classified};
use crate::exit::Outcome;
use crate::lease::{self, Lease, LeaseEvent, Wait};
use crate::lock;
use crate::lock::quorum::Quorum;
use crate::lock::{Held, Holder, Keys, Locker, Preflight, SingleRedis};
use crate::process::signals::{self, Intake, Meaning};
use crate::process::{self, Terminal, Waited, Watchdog};
use crate::report;

mod supervisor;

use crate::report::metrics::Stats;
use crate::transport::endpoint::{self, Endpoint};
use supervisor::{Supervised, Supervisor};

/// Everything the supervisor hears about.
#[derive(Debug)]
pub(crate) enum Event {
    Signal(Signal),
    /// What waiting on the command found, and when it was seen.
    Child(io::Result<Waited>, Instant),
    Lease(LeaseEvent),
}

/// How long to wait for the lease thread to report its release before giving up on it.
const FINISH_WAIT: Duration = Duration::from_secs(5);

/// What `redlock run` was asked to do, checked: the command line builds it.
#[derive(Debug)]
pub struct Options {
    /// The lock's name.
    pub key: String,
    /// The servers: one, or several for a quorum.
    pub endpoints: Vec<Endpoint>,
    /// The Redis key prefix.
    pub prefix: String,
    pub ttl: Duration,
    pub wait: Wait,
    pub fair: bool,
    /// Alone, one of at most N (`--limit`), or shared (`--shared`).
    pub kind: lock::Kind,
    /// The exit status when the lock was not taken or the run was skipped.
    pub conflict_status: u8,
    pub min_interval: Option<Duration>,
    /// The signal that asks the command to stop.
    pub stop_signal: Signal,
    /// The grace between the stop signal and SIGKILL.
    pub kill_after: Duration,
    /// Replicas that must acknowledge the lock (0: none).
    pub min_replicas: u32,
    pub max_runtime: Option<Duration>,
    /// The command and its arguments (at least one word).
    pub command: Vec<OsString>,
}

/// The lock, once taken: its fencing token and when the winning request was sent.
struct Taken {
    fence: i64,
    sent: Instant,
}

/// Run the command under the lock; how the run ended. An error is a failure before the command
/// could run (usage, Redis unavailable, internal), its class in the chain.
pub fn run(options: &Options, stats: &mut Stats) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    // Before any thread exists, so that every thread has them blocked.
    let intake = Intake::new(options.stop_signal);
    intake.block().context("cannot block signals")?;
    let mut watchdog = Watchdog::start().context("cannot start the watchdog process")?;
    // Orphans of the command come to redlock, which stops them with the job and reaps them.
    process::become_subreaper();
    let (events, rx) = mpsc::channel::<Event>();
    let command_pid = start_intake(intake, &events)?;

    let token = uuid::Uuid::new_v4().to_string();
    let tx = events.clone();
    let lease = Lease::start(
        locker(options),
        token.clone(),
        options.ttl,
        options.wait,
        move |event| {
            let _ = tx.send(Event::Lease(event));
        },
    );

    let Taken { fence, sent } = match acquire(options, intake, &rx, stats, started)? {
        Ok(taken) => taken,
        Err(outcome) => {
            if matches!(outcome, Outcome::Interrupted(_)) {
                lease.stop();
                finish(&rx, &options.key);
            }
            return Ok(outcome);
        }
    };

    // Spawn.
    // The lock's variables; and no credentials: a job that prints its environment (many CI
    // steps do) must not print the password.
    let url = std::env::var("REDLOCK_URL").ok().map(|urls| {
        urls.split_ascii_whitespace()
            .map(endpoint::without_password)
            .collect::<Vec<_>>()
            .join(" ")
    });
    let env = [
        ("REDLOCK_KEY", Some(options.key.clone())),
        ("REDLOCK_TOKEN", Some(token)),
        ("REDLOCK_FENCING_TOKEN", Some(fence.to_string())),
        ("REDLOCK_PASSWORD", None),
        ("REDLOCK_URL", url),
    ];
    let terminal = Terminal::foreground();
    let pgid = match process::spawn(&options.command, &env, terminal.as_ref()) {
        Ok(pid) => pid,
        Err(err) => {
            let (found, message) = process::explain_failure(&options.command[0], &err);
            let outcome = Outcome::NotRun { found };
            report::error_event(outcome.event(), message);
            lease.stop();
            finish(&rx, &options.key);
            stats.held = Some(sent.elapsed());
            return Ok(outcome);
        }
    };
    command_pid.store(pgid.as_raw(), Ordering::SeqCst);
    // It may have ended already, its SIGCHLD taken while its pid was unknown.
    signals::check_children();

    // Supervise (the supervisor tells the watchdog the group and the kill line at once).
    let context = Supervised {
        pgid,
        sent,
        watchdog: &mut watchdog,
        lease: &lease,
        intake,
        terminal: terminal.as_ref(),
    };
    let ended = Supervisor::new(options, context).supervise(&rx);
    watchdog.done();
    if let Some(terminal) = &terminal {
        terminal.take_back(pgid);
        // A command killed by a signal (a vi stopped by --max-runtime) left the modes it set.
        if ended.signaled {
            terminal.restore_modes();
        }
    }
    let code = ended.outcome.status(options.conflict_status);
    report!(
        1,
        "exited" { "status" => code, "held_ms" => sent.elapsed().as_millis() },
        "the command ended; exit status {code} after {}",
        report::millis(sent.elapsed())
    );

    // Release.
    let release_in_time = Instant::now() < ended.deadline;
    lease.finish(ended.outcome.succeeded());
    let released = finish(&rx, &options.key);
    let mut outcome = ended.outcome;
    // A lost lease is always reported, whatever the command's status (or another verdict)
    // says: the lease ran out before the release (redlock was stopped or frozen while the
    // command ended, or while it ran), or the release found the key gone or someone else's
    // (deleted, evicted, broken with `release --force`, or expired and taken).
    if outcome != Outcome::LockLost {
        let lost = match released {
            Some(Held::Gone) => Some("it was gone at release"),
            Some(Held::Theirs) => Some("another owner held it at release"),
            _ if !release_in_time => Some("its lease ran out before the release"),
            _ => None,
        };
        if let Some(why) = lost {
            outcome = Outcome::LockLost;
            report::error_event(
                outcome.event(),
                format!(
                    "lock '{}' was lost while the command ran ({why})",
                    options.key
                ),
            );
        }
    }
    // Ctrl-C or Ctrl-\ in the terminal reached only the command's group, which had the
    // terminal. Without redlock it would have reached redlock's group too (the calling script,
    // a pipeline), so pass it on there now the command died of it: a script stops at Ctrl-C
    // as it does around the bare command (bash stops only when it got the SIGINT itself).
    if terminal.is_some()
        && let Outcome::Signaled(n) = outcome
        && let Ok(signal @ (Signal::SIGINT | Signal::SIGQUIT)) = Signal::try_from(n)
    {
        process::signal_own_group(signal);
    }
    stats.held = Some(sent.elapsed());
    stats.renewals = ended.renewals;
    stats.renewal_failures = ended.renewal_failures;
    Ok(outcome)
}

/// End redlock as the run ended: by the signal the command died of (or that interrupted the
/// wait), once everything is released and written, so that its parent sees a signal death.
/// Returns (then the caller exits with the status) for any other outcome, or where redlock
/// cannot kill itself (PID 1).
pub fn die_like(outcome: Outcome) {
    if let Some(signal) = outcome
        .death_signal()
        .and_then(|n| Signal::try_from(n).ok())
    {
        signals::die_of(signal);
    }
}

/// The lock protocol for the servers given: one server, or a quorum of several.
fn locker(options: &Options) -> Box<dyn Locker> {
    let keys = Keys::new(&options.prefix, &options.key);
    let holder = Holder::current(&options.command);
    let node = |endpoint: &Endpoint| {
        SingleRedis::new(
            endpoint.clone(),
            keys.clone(),
            options.fair,
            lock::FAIR_ENTRY_LIFETIME,
        )
        .with_holder(holder.clone())
        .with_min_interval(options.min_interval)
        .with_min_replicas(options.min_replicas, lease::replica_wait(options.ttl))
        .with_preflight(Preflight::Weekly)
        .with_kind(options.kind)
        .with_waiting_lifetime(lease::waiting_lifetime(options.ttl))
    };
    match options.endpoints.as_slice() {
        [one] => Box::new(node(one)),
        many => Box::new(Quorum::new(many.iter().map(node).collect())),
    }
}

/// Start the signal thread, before anything slow, so a TERM while connecting or waiting is
/// honoured. The same thread reaps every child once the command is spawned (not before:
/// spawning reaps a child whose exec failed itself): the command (reported), then anything
/// adopted (as subreaper or PID 1), so no orphan lingers as a zombie. Returns where to put the
/// command's pid once it is known.
fn start_intake(intake: Intake, events: &Sender<Event>) -> anyhow::Result<Arc<AtomicI32>> {
    let command_pid = Arc::new(AtomicI32::new(0));
    let tx = events.clone();
    let tx_child = events.clone();
    let command = Arc::clone(&command_pid);
    let mut ended = false;
    signals::start(
        intake,
        move |signal| {
            let _ = tx.send(Event::Signal(signal));
        },
        move || {
            let pgid = Pid::from_raw(command.load(Ordering::SeqCst));
            if pgid.as_raw() != 0 {
                reap(pgid, &mut ended, &tx_child);
            }
        },
    )
    .context("cannot start the signal thread")?;
    Ok(command_pid)
}

/// Wait for the lease thread to take the lock: Ok(taken), or how the run ends without it
/// (busy, skipped, interrupted by a signal). An error: Redis could not be used.
fn acquire(
    options: &Options,
    intake: Intake,
    rx: &Receiver<Event>,
    stats: &mut Stats,
    started: Instant,
) -> anyhow::Result<Result<Taken, Outcome>> {
    let key = &options.key;
    loop {
        match rx.recv().context("event channel closed")? {
            Event::Lease(LeaseEvent::Acquired {
                fence,
                sent,
                waited,
            }) => {
                report!(
                    1,
                    "acquired" { "waited_ms" => waited.as_millis(), "fence" => fence },
                    "acquired lock '{key}' after {} (fencing token {fence})",
                    report::millis(waited)
                );
                stats.waited = Some(waited);
                return Ok(Ok(Taken { fence, sent }));
            }
            Event::Lease(LeaseEvent::Busy { waited, queued }) => {
                stats.waited = Some(waited);
                let why = match (options.kind, queued) {
                    (lock::Kind::Exclusive, false) => "is held elsewhere".to_owned(),
                    (lock::Kind::Exclusive, true) => {
                        "is free but promised to --fair waiters ahead of this one".to_owned()
                    }
                    (lock::Kind::Limit(n), false) => {
                        format!("has all {n} slots held elsewhere (--limit {n})")
                    }
                    (lock::Kind::Limit(_), true) => {
                        "has a free slot, promised to --fair waiters ahead of this one".to_owned()
                    }
                    (lock::Kind::Shared, false) => "is held exclusively elsewhere".to_owned(),
                    (lock::Kind::Shared, true) => {
                        "is promised to an exclusive waiter ahead of this --shared one".to_owned()
                    }
                };
                report!(
                    1,
                    "busy" { "waited_ms" => waited.as_millis(), "queued" => u32::from(queued) },
                    "lock '{key}' {why}; gave up after {}",
                    report::millis(waited)
                );
                return Ok(Err(Outcome::Busy));
            }
            Event::Lease(LeaseEvent::Skipped { ago, waited }) => {
                stats.waited = Some(waited);
                stats.success_ago = Some(ago);
                report!(
                    1,
                    "skipped" { "waited_ms" => waited.as_millis(), "last_success_ms_ago" => ago.as_millis() },
                    "lock '{key}' last succeeded {} ago, within --min-interval; skipping the run (waited {})",
                    humantime::format_duration(Duration::from_secs(ago.as_secs())),
                    report::millis(waited)
                );
                return Ok(Err(Outcome::Skipped));
            }
            Event::Lease(LeaseEvent::Mismatch { found }) => {
                stats.waited = Some(started.elapsed());
                return Err(classified(Class::Usage, found.refusal(key, options.kind)));
            }
            Event::Lease(LeaseEvent::Failed(failure)) => {
                stats.waited = Some(started.elapsed());
                return Err(classified(Class::Unavailable, failure.to_string()))
                    .with_context(|| format!("cannot take lock '{key}'"));
            }
            // Job control while waiting: nothing of the command's to stop yet; redlock stops.
            Event::Signal(signal) if intake.meaning(signal) == Meaning::Suspend => {
                signals::stop_self(signal);
            }
            Event::Signal(signal) if intake.ends_a_wait(signal) => {
                stats.waited = Some(started.elapsed());
                report!(
                    1,
                    "interrupted" { "signal" => signal.as_str() },
                    "{} while waiting for lock '{key}'; not running the command",
                    signal.as_str()
                );
                return Ok(Err(Outcome::Interrupted(signal as i32)));
            }
            _ => {}
        }
    }
}

/// Reap every child that ended, reporting the command's end (or stop) once; called on SIGCHLD.
fn reap(pgid: Pid, ended: &mut bool, events: &Sender<Event>) {
    loop {
        match process::try_wait_any() {
            Ok(None) => return,
            Ok(Some((pid, waited))) if pid == pgid && !*ended => {
                *ended = !matches!(waited, Waited::Stopped(_));
                let _ = events.send(Event::Child(Ok(waited), Instant::now()));
            }
            // A stopped adopted process is not reaped; it is stopped with the job.
            Ok(Some((_, Waited::Stopped(_)))) => {}
            Ok(Some((pid, Waited::Exited(_)))) => report!(
                2,
                "reaped" { "pid" => pid.as_raw() },
                "reaped adopted process {pid}"
            ),
            // No child at all for now; an orphan may still be adopted later.
            Err(Errno::ECHILD) if *ended => return,
            Err(errno) => {
                if !*ended {
                    *ended = true;
                    let _ = events.send(Event::Child(Err(errno.into()), Instant::now()));
                }
                return;
            }
        }
    }
}

/// Wait for the lease thread's final report, say what became of the lock, and return what the
/// release found (None: nothing released, or no answer).
fn finish(rx: &Receiver<Event>, key: &str) -> Option<Held> {
    let give_up = Instant::now() + FINISH_WAIT;
    loop {
        match rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
            Ok(Event::Lease(LeaseEvent::Finished(result))) => {
                match &result {
                    Some(Ok(Held::Ours)) => report!(1, "released" {}, "released lock '{key}'"),
                    Some(Ok(Held::Gone)) => {
                        report!(
                            0,
                            "release_failed" { "reason" => "gone" },
                            "warning: lock '{key}' was already gone when released"
                        )
                    }
                    Some(Ok(Held::Theirs)) => {
                        report!(
                            0,
                            "release_failed" { "reason" => "taken" },
                            "warning: lock '{key}' was held by another owner when released; left it alone"
                        )
                    }
                    Some(Err(failure)) => report!(
                        0,
                        "release_failed" { "reason" => "error" },
                        "warning: could not release lock '{key}' ({failure}); it expires by itself"
                    ),
                    None => {}
                }
                return result.and_then(Result::ok);
            }
            Ok(_) => {}
            Err(_) => {
                report!(
                    0,
                    "release_failed" { "reason" => "no_answer" },
                    "warning: no answer while releasing lock '{key}'; it expires by itself"
                );
                return None;
            }
        }
    }
}
