//! The `run` orchestration: acquire (waiting if asked) → spawn → supervise → release → exit status.
//!
//! One supervisor loop on the main thread owns every decision. The lease thread and the signal
//! thread (which also reaps children) only report into its channel, and the supervisor never
//! blocks on the server, so a hung server cannot delay stopping the command before its lease ends.
//!
//! May use `process`, `lease`, `lock` (the backend it is given, through the boundary),
//! `report`, `error`, `exit` and `clock`; never `cli`, `admin` or `backend` (the command line
//! opens the backend, builds an [`Options`] and calls in).

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

use crate::clock::Moment;
use crate::exit::Outcome;
use crate::lease::{self, HoldEvent, Lease, Reports, Wait, WaitEvent};
use crate::lock;
use crate::lock::{Backend, Holder, Locker, RunEnding, RunSpec};
use crate::process::signals::{self, Intake};
use crate::process::{self, Signo, Terminal, Waited, Watchdog};
use crate::report;

mod core;
mod notes;
mod release;
mod supervisor;
mod wait;

use crate::report::metrics::Stats;
use core::Ended;
pub(crate) use core::lease_grace;
use supervisor::{Supervised, Supervisor};
use wait::Taken;

/// Everything the supervisor hears about.
#[derive(Debug)]
pub(crate) enum Event {
    Signal(Signo),
    /// What waiting on the command found, and when it was seen.
    Child(io::Result<Waited>, Moment),
    /// Someone killed or stopped the watchdog (a stopped one was continued already).
    Watchdog(Waited),
    /// The lease thread's news while it waits for the lock.
    Wait(WaitEvent),
    /// The lease thread's news once the lock is held.
    Hold(HoldEvent),
}

/// What `redlock run` was asked to do, checked: the command line builds it.
pub struct Options {
    /// The lock's name.
    pub key: String,
    /// Where the lock lives: the backend the URLs name, opened with what it was asked to do
    /// (the key prefix, and the backend options such as `--min-replicas` and `--fsync`).
    pub(crate) backend: Box<dyn Backend>,
    pub ttl: Duration,
    pub wait: Wait,
    pub fair: bool,
    /// Alone, one of at most N (`--limit`), or shared (`--shared`).
    pub kind: lock::Kind,
    /// The exit status when the lock was not taken or the run was skipped.
    pub conflict_status: u8,
    pub min_interval: Option<Duration>,
    /// `--splay`: wait a random time below this before the first attempt (None: no splay).
    pub splay: Option<Duration>,
    /// The signal that asks the command to stop.
    pub stop_signal: Signal,
    /// The grace between the stop signal and SIGKILL.
    pub kill_after: Duration,
    pub max_runtime: Option<Duration>,
    /// The command and its arguments (at least one word).
    pub command: Vec<OsString>,
    /// The `REDLOCK_URL` the command sees: the servers redlock locks on, without passwords.
    pub command_url: String,
}

/// Run the command under the lock; how the run ended. An error is a failure before the command
/// could run (usage, the server unavailable, internal), its class in the chain.
pub fn run(options: &Options, stats: &mut Stats) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let Started {
        intake,
        mut watchdog,
        rx,
        command_pid,
        lease,
        token,
    } = start(options)?;
    let Taken { fence, sent, held } = match wait::acquire(options, intake, &rx, stats, started)? {
        Ok(taken) => taken,
        Err(outcome) => {
            if matches!(outcome, Outcome::Interrupted(_)) {
                lease.finish(RunEnding::of(outcome, options.conflict_status));
                wait::left_the_queue(&rx, &options.key);
            }
            return Ok(outcome);
        }
    };
    let terminal = Terminal::foreground();
    let env = command_env(options, token, fence);
    // The child announces its group to the watchdog itself, through this second write end
    // (dropped with the spawn's `Command`, so redlock's death is still the end of file).
    let orders = watchdog.orders().ok();
    let pgid = match process::spawn(&options.command, &env, terminal.as_ref(), orders) {
        Ok(pid) => pid,
        Err(err) => {
            let (found, message) = process::explain_failure(&options.command[0], &err);
            let outcome = Outcome::NotRun { found };
            report::error_event(outcome.into(), message);
            lease.finish(RunEnding::of(outcome, options.conflict_status));
            release::finish(&rx, &options.key);
            stats.held = Some(held.elapsed());
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
    let outcome = after_the_command(options, &lease, &rx, &ended, held, terminal.is_some());
    stats.held = Some(held.elapsed());
    stats.cut_short = ended.cut_short;
    stats.renewals = ended.renewals;
    stats.renewal_failures = ended.renewal_failures;
    Ok(outcome)
}

/// After the command: say how it ended, release the lock, and judge what the release found;
/// `had_terminal`: redlock handed the command the terminal.
fn after_the_command(
    options: &Options,
    lease: &Lease,
    rx: &Receiver<Event>,
    ended: &Ended,
    held: Moment,
    had_terminal: bool,
) -> Outcome {
    let code = ended.outcome.status(options.conflict_status);
    report!(
        1,
        Exited { "status" => code, "held_ms" => held.elapsed().as_millis() },
        "the command ended; exit status {code} after {}",
        report::duration(held.elapsed())
    );

    // Release, telling the record how the run ended if the lock is still ours (its release
    // records a lost lock itself).
    let in_time = Moment::now() < ended.deadline;
    let (if_ours, _) = release::judged(ended.outcome, Some(lock::Held::Ours), in_time);
    let ending = RunEnding::of(if_ours, options.conflict_status);
    lease.finish(if ended.cut_short {
        ending.cut_short()
    } else {
        ending
    });
    let released = release::finish(rx, &options.key);
    let (outcome, lost) = release::judged(ended.outcome, released, in_time);
    if let Some(why) = lost {
        report::error_event(
            outcome.into(),
            format!(
                "lock '{}' may have been lost while the command ran ({why})",
                options.key
            ),
        );
    }
    // Ctrl-C or Ctrl-\ in the terminal reached only the command's group, which had the
    // terminal. Without redlock it would have reached redlock's group too (the calling script,
    // a pipeline), so pass it on there now the command died of it: a script stops at Ctrl-C
    // as it does around the bare command (bash stops only when it got the SIGINT itself).
    if had_terminal
        && let Outcome::Signaled(n) = outcome
        && let Ok(signal @ (Signal::SIGINT | Signal::SIGQUIT)) = Signal::try_from(n)
    {
        process::signal_own_group(signal);
    }
    outcome
}

/// What runs beside the supervisor from the start: the signal intake, the watchdog, the
/// events' channel, where the reaper learns the command's pid, the lease thread and its token.
struct Started {
    intake: Intake,
    watchdog: Watchdog,
    rx: Receiver<Event>,
    command_pid: Arc<AtomicI32>,
    lease: Lease,
    token: String,
}

/// Start what runs beside the supervisor, in the order that matters: the signals blocked and
/// the watchdog forked before any thread exists (every thread inherits the mask; a fork copies
/// the calling thread alone), then the signal thread, then the lease thread, which starts
/// acquiring at once.
fn start(options: &Options) -> anyhow::Result<Started> {
    let intake = Intake::new(options.stop_signal);
    intake.block().context("cannot block signals")?;
    let watchdog = Watchdog::start().context("cannot start the watchdog process")?;
    // Orphans of the command come to redlock, which stops them with the job and reaps them.
    process::become_subreaper();
    let (events, rx) = mpsc::channel::<Event>();
    let command_pid = start_intake(intake, &events)?;
    let token = uuid::Uuid::new_v4().to_string();
    let (wait_tx, hold_tx) = (events.clone(), events);
    let reports = Reports {
        wait: Box::new(move |event| {
            let _ = wait_tx.send(Event::Wait(event));
        }),
        hold: Box::new(move |event| {
            let _ = hold_tx.send(Event::Hold(event));
        }),
    };
    let lease = Lease::start(
        locker(options, &token),
        options.ttl,
        (splay(options), options.wait),
        reports,
    );
    Ok(Started {
        intake,
        watchdog,
        rx,
        command_pid,
        lease,
        token,
    })
}

/// `--splay`: how long to wait before the first attempt, chosen at random in [0, splay), and
/// said at `-v`.
fn splay(options: &Options) -> Duration {
    let Some(splay) = options.splay else {
        return Duration::ZERO;
    };
    let chosen = splay.mul_f64(lock::validity::random_unit());
    report!(
        1,
        Splay { "splay_ms" => chosen.as_millis(), "max_ms" => splay.as_millis() },
        "waiting {} before the first attempt for lock '{}' (--splay {})",
        report::duration(chosen),
        options.key,
        humantime::format_duration(splay)
    );
    chosen
}

/// The command's environment beside redlock's own: the lock's variables, and no credentials
/// (a job that prints its environment, as many CI steps do, must not print the password).
fn command_env(
    options: &Options,
    token: String,
    fence: i64,
) -> [(&'static str, Option<String>); 5] {
    [
        ("REDLOCK_KEY", Some(options.key.clone())),
        ("REDLOCK_TOKEN", Some(token)),
        ("REDLOCK_FENCING_TOKEN", Some(fence.to_string())),
        ("REDLOCK_PASSWORD", None),
        ("REDLOCK_URL", Some(options.command_url.clone())),
    ]
}

/// End redlock as the run ended: by the signal the command died of (or that interrupted the
/// wait), once everything is released and written, so that its parent sees a signal death.
/// Returns (then the caller exits with the status) for any other outcome, or where redlock
/// cannot kill itself (PID 1).
pub fn die_like(outcome: Outcome) {
    if let Some(signal) = outcome.death_signal().and_then(Signo::new) {
        signals::die_of(signal);
    }
}

/// The lock protocol the backend gives for this run, acting for its owner `token`.
fn locker(options: &Options, token: &str) -> Box<dyn Locker> {
    options.backend.locker(&RunSpec {
        key: options.key.clone(),
        token: token.to_owned(),
        kind: options.kind,
        fair: options.fair,
        min_interval: options.min_interval,
        holder: Holder::current(&options.command),
        ttl: options.ttl,
        waiting: lease::longest_pause(options.ttl),
    })
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

/// Reap every child that ended, reporting the command's end (or stop) once, and the watchdog's;
/// called on SIGCHLD.
fn reap(pgid: Pid, ended: &mut bool, events: &Sender<Event>) {
    loop {
        match process::try_wait_any() {
            Ok(None) => return,
            Ok(Some((pid, waited))) if Some(pid) == process::watchdog_pid() => {
                if let Waited::Stopped(_) = waited {
                    // It must be running to kill at the kill line: continue it at once.
                    process::signal_group(pid, Signal::SIGCONT);
                }
                let _ = events.send(Event::Watchdog(waited));
            }
            Ok(Some((pid, waited))) if pid == pgid && !*ended => {
                *ended = !matches!(waited, Waited::Stopped(_));
                let _ = events.send(Event::Child(Ok(waited), Moment::now()));
            }
            // A stopped adopted process is not reaped; it is stopped with the job.
            Ok(Some((_, Waited::Stopped(_)))) => {}
            Ok(Some((pid, Waited::Exited(_)))) => report!(
                2,
                Reaped { "pid" => pid.as_raw() },
                "reaped adopted process {pid}"
            ),
            // No child at all for now; an orphan may still be adopted later.
            Err(err) if err.raw_os_error() == Some(Errno::ECHILD as i32) && *ended => return,
            Err(err) => {
                if !*ended {
                    *ended = true;
                    let _ = events.send(Event::Child(Err(err), Moment::now()));
                }
                return;
            }
        }
    }
}
