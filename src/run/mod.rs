//! The `run` orchestration: acquire (waiting if asked) → spawn → supervise → release → exit status.
//!
//! One supervisor loop on the main thread owns every decision. The lease thread and the signal
//! thread (which also reaps children) only report into its channel, and the supervisor never
//! blocks on Redis, so a hung server cannot delay stopping the command before its lease ends.

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
use crate::exit;
use crate::lease::{self, Lease, LeaseEvent, Wait};
use crate::lock::quorum::Quorum;
use crate::lock::{Held, Holder, Keys, Locker, SingleRedis};
use crate::process::signals;
use crate::process::{self, Terminal, Waited, Watchdog};
use crate::report;

mod supervisor;

use crate::report::metrics::Stats;
use crate::transport::endpoint::Endpoint;
use supervisor::Supervisor;

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

/// Run the command under the lock and return redlock's exit status.
pub fn run(options: Options, stats: &mut Stats) -> anyhow::Result<i32> {
    let args = &options;
    let started = Instant::now();
    let kill_after = args.kill_after;
    let endpoints = args.endpoints.clone();
    // Before any thread exists, so that every thread has them blocked.
    signals::block().context("cannot block signals")?;
    let mut watchdog = Watchdog::start().context("cannot start the watchdog process")?;
    // Orphans of the command come to redlock, which stops them with the job and reaps them.
    process::become_subreaper();
    let (events, rx) = mpsc::channel::<Event>();

    // Take signals before anything slow, so a TERM while connecting or waiting is honoured.
    // The same thread reaps every child once the command is spawned (not before: spawning
    // reaps a child whose exec failed itself): the command (reported), then anything adopted
    // (as subreaper or PID 1), so no orphan lingers as a zombie.
    let command_pid = Arc::new(AtomicI32::new(0));
    let tx = events.clone();
    let tx_child = events.clone();
    let command = Arc::clone(&command_pid);
    let mut ended = false;
    signals::start(
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

    let keys = Keys::new(&args.prefix, &args.key);
    let token = uuid::Uuid::new_v4().to_string();
    let entry_lifetime = lease::queue_entry_lifetime(args.ttl);
    let holder = Holder::current(&args.command);
    let node = |endpoint| {
        SingleRedis::new(endpoint, keys.clone(), args.fair, entry_lifetime)
            .with_holder(holder.clone())
            .with_min_interval(args.min_interval)
            .with_min_replicas(args.min_replicas, lease::replica_wait(args.ttl))
            .with_preflight(true)
    };
    let locker: Box<dyn Locker> = if endpoints.len() == 1 {
        Box::new(node(endpoints.into_iter().next().expect("one endpoint")))
    } else {
        Box::new(Quorum::new(endpoints.into_iter().map(node).collect()))
    };
    let tx = events.clone();
    let lease = Lease::start(locker, token.clone(), args.ttl, args.wait, move |event| {
        let _ = tx.send(Event::Lease(event));
    });

    // Acquire.
    let (fence, sent) = loop {
        match rx.recv().context("event channel closed")? {
            Event::Lease(LeaseEvent::Acquired {
                fence,
                sent,
                waited,
            }) => {
                report!(
                    1,
                    "acquired" { "waited_ms" => waited.as_millis(), "fence" => fence },
                    "acquired lock '{}' after {} (fencing token {fence})",
                    args.key,
                    report::millis(waited)
                );
                stats.waited = Some(waited);
                break (fence, sent);
            }
            Event::Lease(LeaseEvent::Busy { waited }) => {
                stats.outcome = Some("busy");
                stats.waited = Some(waited);
                report!(
                    1,
                    "busy" { "waited_ms" => waited.as_millis() },
                    "lock '{}' is held elsewhere; gave up after {}",
                    args.key,
                    report::millis(waited)
                );
                return Ok(i32::from(args.conflict_status));
            }
            Event::Lease(LeaseEvent::Skipped { ago, waited }) => {
                stats.outcome = Some("skipped");
                stats.waited = Some(waited);
                stats.success_ago = Some(ago);
                report!(
                    1,
                    "skipped" { "waited_ms" => waited.as_millis(), "last_success_ms_ago" => ago.as_millis() },
                    "lock '{}' last succeeded {} ago, within --min-interval; skipping the run (waited {})",
                    args.key,
                    humantime::format_duration(Duration::from_secs(ago.as_secs())),
                    report::millis(waited)
                );
                return Ok(i32::from(args.conflict_status));
            }
            Event::Lease(LeaseEvent::Failed(failure)) => {
                stats.waited = Some(started.elapsed());
                return Err(classified(Class::Unavailable, failure.to_string()))
                    .with_context(|| format!("cannot take lock '{}'", args.key));
            }
            Event::Signal(signal) if signals::is_terminating(signal) => {
                stats.outcome = Some("interrupted");
                stats.waited = Some(started.elapsed());
                report!(
                    1,
                    "interrupted" { "signal" => signal.as_str() },
                    "{} while waiting for lock '{}'; not running the command",
                    signal.as_str(),
                    args.key
                );
                lease.stop();
                finish(&rx, &args.key);
                return Ok(128 + signal as i32);
            }
            _ => {}
        }
    };

    // Spawn.
    let env = [
        ("REDLOCK_KEY", args.key.clone()),
        ("REDLOCK_TOKEN", token),
        ("REDLOCK_FENCING_TOKEN", fence.to_string()),
    ];
    let terminal = Terminal::foreground();
    let pgid = match process::spawn(&args.command, &env, terminal) {
        Ok(pid) => pid,
        Err(err) => {
            report::error_event(
                "spawn_failed",
                format!("cannot run '{}': {err}", args.command[0].to_string_lossy()),
            );
            lease.stop();
            finish(&rx, &args.key);
            stats.outcome = Some("not_run");
            stats.held = Some(sent.elapsed());
            return Ok(process::spawn_failure_status(&err));
        }
    };
    watchdog.watch(Some(pgid));
    command_pid.store(pgid.as_raw(), Ordering::SeqCst);
    // It may have ended already, its SIGCHLD taken while its pid was unknown.
    signals::check_children();

    // Supervise.
    let mut supervisor = Supervisor::new(args, kill_after, pgid, sent, watchdog.pid());
    let status = supervisor.supervise(&rx);
    watchdog.watch(None);

    // Release.
    if let Some(terminal) = terminal {
        terminal.restore();
    }
    let mut code = supervisor.outcome.unwrap_or_else(|| match status {
        Some(status) => exit::from_status(status),
        None => exit::INTERNAL,
    });
    report!(
        1,
        "exited" { "status" => code, "held_ms" => sent.elapsed().as_millis() },
        "the command ended; exit status {code} after {}",
        report::millis(sent.elapsed())
    );
    let release_in_time = Instant::now() < supervisor.deadline;
    lease.finish(code == 0);
    let released = finish(&rx, &args.key);
    // Released before the lease could have run out, yet the key was gone or someone else's:
    // it was deleted, evicted or broken (`release --force`) while the command ran, which the
    // command's own status must not hide.
    if release_in_time
        && supervisor.outcome.is_none()
        && matches!(released, Some(Held::Gone | Held::Theirs))
    {
        report::error_event(
            "lock_lost",
            format!(
                "lock '{}' was lost while the command ran (found {} at release)",
                args.key,
                if released == Some(Held::Gone) {
                    "gone"
                } else {
                    "held by another owner"
                }
            ),
        );
        supervisor.outcome = Some(exit::LOCK_LOST);
        code = exit::LOCK_LOST;
    }
    stats.held = Some(sent.elapsed());
    stats.renewals = supervisor.renewals;
    stats.renewal_failures = supervisor.renewal_failures;
    stats.outcome = match supervisor.outcome {
        Some(exit::LOCK_LOST) => Some("lock_lost"),
        Some(exit::TIMEOUT) => Some("max_runtime"),
        Some(_) => Some("error"),
        None => None,
    };
    Ok(code)
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
