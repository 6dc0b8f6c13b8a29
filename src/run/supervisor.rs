//! The supervisor: from the spawn until the command and everything it left behind are gone,
//! it hears signals, the command's end and the lease's news, and decides when to forward, stop,
//! suspend, continue and kill.
//!
//! The rules, in one place:
//! - HUP, INT, QUIT, USR1, USR2 and WINCH are forwarded, and the command decides what they mean.
//! - Only a stop request (TERM or `--stop-signal`), `--max-runtime` and the loss of the lease
//!   start stop → grace → SIGKILL. The same stop request twice within [`SAME_REQUEST`] (as
//!   timeout(1) sends it, to redlock and then to its group) is one request; a later second one
//!   kills at once.
//! - The grace after a stop request or `--max-runtime` is `--kill-after`, the lease being renewed
//!   meanwhile; after the loss of the lease it is at most what is left of the lease.
//! - Job control (TSTP, TTIN, TTOU, to redlock or stopping the command): stop the command's
//!   group, then redlock. Continued: if the lease ran out meanwhile, kill the command (it never
//!   runs again) and exit 76; otherwise renew at once and continue the command.
//! - The watchdog is told the kill line on every renewal: a redlock stopped or frozen cannot
//!   leave its command running past its lease.
//! - Every SIGKILL is reported (`killed`).

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::exit::Outcome;
use crate::lease::{self, Lease, LeaseEvent};
use crate::lock::Held;
use crate::process::signals::{self, Intake, Meaning};
use crate::process::{self, Signo, Terminal, Waited, Watchdog};
use crate::report;
use crate::run::{Event, Options};

/// How long to wait for a SIGKILLed group to disappear (zombies no one reaps) before moving on.
const REAP_WAIT: Duration = Duration::from_secs(1);
/// The longest the supervisor sleeps when no timer is due.
const IDLE_WAKE: Duration = Duration::from_secs(60);
/// How often to look for processes left in the group after the command itself exited.
const GROUP_POLL: Duration = Duration::from_millis(10);
/// How often to look for newly adopted processes while the command is being stopped.
const ADOPT_POLL: Duration = Duration::from_millis(50);
/// A stop request repeated within this window is the same request: timeout(1) sends TERM to
/// redlock, then to its whole process group, redlock included. A person or a supervisor that
/// insists does so later, and is obeyed at once.
pub(crate) const SAME_REQUEST: Duration = Duration::from_millis(500);

/// Where stopping the command stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing has asked the command to stop.
    Running,
    /// The stop signal (or a forwarded terminating signal) went out; SIGKILL follows at `kill_at`.
    Stopping { kill_at: Instant },
    /// SIGKILL went out at `at`; only the group's end is awaited, no timer fires again.
    Killed { at: Instant },
}

/// Why redlock overrides the command's own status (the first reason wins, lock loss above all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The lease ran out or was lost: the lock may be someone else's.
    LockLost,
    /// `--max-runtime` passed.
    MaxRuntime,
    /// redlock lost track of the command, or its lease thread died.
    Internal,
}

/// What the supervisor hands back once the command and its group are gone.
pub(crate) struct Ended {
    /// How the run ended: the command's status, or redlock's verdict over it.
    pub outcome: Outcome,
    /// Whether the command died of a signal (its terminal modes are then redlock's to restore).
    pub signaled: bool,
    /// The lease deadline when the command ended: past it the lock may be someone else's.
    pub deadline: Instant,
    pub renewals: u64,
    pub renewal_failures: u64,
}

/// The supervisor of one command: decides when to forward, stop and kill, from the signals,
/// the command's end and the lease's news.
pub(crate) struct Supervisor<'a> {
    options: &'a Options,
    pgid: Pid,
    watchdog: &'a mut Watchdog,
    lease: &'a Lease,
    intake: Intake,
    /// The terminal redlock handed to the command, if it did.
    terminal: Option<&'a Terminal>,
    /// The lease deadline: past it the lock may be someone else's.
    deadline: Instant,
    max_runtime_at: Option<Instant>,
    phase: Phase,
    /// How the command ended, once it has (processes may linger in its group).
    status: Option<ExitStatus>,
    verdict: Option<Verdict>,
    /// When the first stop request from outside came (a later second one kills at once).
    stop_requested: Option<Instant>,
    /// redlock stopped the command's group for job control, and has not continued it yet.
    job_stopped: bool,
    renew_failing: bool,
    /// Since the last renewal that counted, too few replicas acknowledged one (`--min-replicas`).
    unacknowledged: bool,
    /// Children redlock knows of (the command, the watchdog): not adopted.
    known: [Pid; 2],
    /// Adopted processes already sent the stop signal.
    adopted_stopped: HashSet<Pid>,
    renewals: u64,
    renewal_failures: u64,
}

/// What the supervisor works with besides the options: the command's group, when the lease
/// was taken, the watchdog, the lease, the signal intake and the terminal handed over.
pub(crate) struct Supervised<'a> {
    pub pgid: Pid,
    pub sent: Instant,
    pub watchdog: &'a mut Watchdog,
    pub lease: &'a Lease,
    pub intake: Intake,
    pub terminal: Option<&'a Terminal>,
}

impl<'a> Supervisor<'a> {
    pub(crate) fn new(options: &'a Options, context: Supervised<'a>) -> Self {
        let started = Instant::now();
        let Supervised {
            pgid,
            sent,
            watchdog,
            lease,
            intake,
            terminal,
        } = context;
        let known = [pgid, watchdog.pid()];
        let mut supervisor = Self {
            options,
            pgid,
            watchdog,
            lease,
            intake,
            terminal,
            deadline: lease::deadline(sent, options.ttl),
            max_runtime_at: options.max_runtime.and_then(|d| started.checked_add(d)),
            phase: Phase::Running,
            status: None,
            verdict: None,
            stop_requested: None,
            job_stopped: false,
            renew_failing: false,
            unacknowledged: false,
            known,
            adopted_stopped: HashSet::new(),
            renewals: 0,
            renewal_failures: 0,
        };
        supervisor.guard();
        supervisor
    }

    /// Tell the watchdog the kill line: if no later one comes (redlock stopped or frozen), it
    /// kills the group then itself.
    fn guard(&mut self) {
        let kill_line = self.kill_line();
        self.watchdog.watch(self.pgid, kill_line);
    }

    fn lease_ending(&self) -> bool {
        self.verdict == Some(Verdict::LockLost)
    }

    fn stopping(&self) -> bool {
        self.phase != Phase::Running
    }

    fn killed(&self) -> bool {
        matches!(self.phase, Phase::Killed { .. })
    }

    /// Record why redlock overrides the command's status: the first reason wins, except that
    /// losing the lock wins over any other.
    fn judge(&mut self, verdict: Verdict) {
        if self.verdict.is_none() || verdict == Verdict::LockLost {
            self.verdict = Some(verdict);
        }
    }

    /// The instant by which the whole group must be dead.
    fn kill_line(&self) -> Instant {
        self.deadline
            .checked_sub(lease::kill_margin(self.options.ttl))
            .unwrap_or(self.deadline)
    }

    /// The grace after the loss of the lease: `--kill-after`, at most a quarter of the ttl. The
    /// stop for a lease running low then comes after two renewals (every ttl/3) and their
    /// retries had their chance, not after the first blip; and the news of a renewal that too
    /// few replicas acknowledged has arrived, so the message can say so.
    fn lease_grace(&self) -> Duration {
        self.options.kill_after.min(self.options.ttl / 4)
    }

    /// The instant the stop signal must go out, if the lease was not renewed, so that SIGKILL
    /// after the lease's grace still lands in time.
    fn stop_line(&self) -> Instant {
        let kill_line = self.kill_line();
        kill_line
            .checked_sub(self.lease_grace())
            .unwrap_or(kill_line)
    }

    /// Send the stop signal now (unless a stop already went out) and schedule SIGKILL after
    /// the grace.
    fn stop(&mut self, now: Instant) {
        if self.killed() {
            return;
        }
        // `--stop-signal KILL`: a SIGKILL like any other, reported.
        if self.options.stop_signal == Signal::SIGKILL {
            self.kill(now, "the stop signal is KILL");
            return;
        }
        if !self.stopping() {
            process::signal_group(self.pgid, self.options.stop_signal);
        }
        self.schedule_kill(now + self.options.kill_after);
        self.tend_adopted();
    }

    /// Processes that left the command's group and were adopted by redlock share its fate:
    /// the stop signal once stopping (once each), SIGKILL once killing. True if any is left.
    fn tend_adopted(&mut self) -> bool {
        if process::no_children() {
            return false;
        }
        let adopted = process::adopted(&self.known);
        if self.killed() {
            process::signal_adopted(&adopted, Signal::SIGKILL);
        } else if self.stopping() {
            let new: Vec<_> = adopted
                .iter()
                .filter(|(pid, _)| self.adopted_stopped.insert(*pid))
                .copied()
                .collect();
            process::signal_adopted(&new, self.options.stop_signal);
        }
        !adopted.is_empty()
    }

    /// SIGKILL at `at` at the latest (an earlier kill already planned stands).
    fn schedule_kill(&mut self, at: Instant) {
        self.phase = match self.phase {
            Phase::Running => Phase::Stopping { kill_at: at },
            Phase::Stopping { kill_at } => Phase::Stopping {
                kill_at: kill_at.min(at),
            },
            killed @ Phase::Killed { .. } => killed,
        };
    }

    /// SIGKILL the group (and what redlock adopted), once, saying why.
    fn kill(&mut self, now: Instant, why: &str) {
        if !self.killed() {
            self.phase = Phase::Killed { at: now };
            report!(
                1,
                "killed" { "reason" => why },
                "sending SIGKILL to the command's process group: {why}"
            );
            process::signal_group(self.pgid, Signal::SIGKILL);
            self.tend_adopted();
        }
    }

    /// A stop request from outside (TERM or the stop signal): the stop signal, then SIGKILL
    /// after --kill-after; the same request again within [`SAME_REQUEST`] changes nothing, a
    /// later one kills at once.
    fn stop_requested(&mut self, now: Instant, signal: Signo) {
        match self.stop_requested {
            None => {
                self.stop_requested = Some(now);
                report!(
                    1,
                    "stop_requested" { "signal" => signal.to_string() },
                    "{signal} received; sending {} to the command, SIGKILL after {}",
                    self.options.stop_signal.as_str(),
                    report::millis(self.options.kill_after)
                );
                self.stop(now);
            }
            Some(first) if now.duration_since(first) < SAME_REQUEST => {
                report!(
                    2,
                    "stop_repeated" { "signal" => signal.to_string() },
                    "{signal} again within {}: the same stop request",
                    report::millis(SAME_REQUEST)
                );
            }
            Some(_) => self.kill(now, &format!("a second {signal}")),
        }
    }

    /// Job control: stop the command's group, give the terminal back to redlock's group if the
    /// command has it, then stop redlock with the same signal, as a shell job stops. Returns
    /// once redlock is continued (`fg`, `bg`, SIGCONT), having resumed.
    fn suspend(&mut self, signal: Signo) {
        // SIGSTOP: the whole group stops, also what ignores or handles the terminal's stop.
        process::signal_group(self.pgid, Signal::SIGSTOP);
        self.job_stopped = true;
        if let Some(terminal) = self.terminal {
            terminal.take_back(self.pgid);
        }
        report!(
            1,
            "suspended" { "signal" => signal.to_string() },
            "{signal}: stopped the command, stopping redlock (the lease is not renewed meanwhile; \
             if it runs out, the command is killed)"
        );
        signals::stop_self(signal);
        self.resume();
    }

    /// redlock was continued: if the lease ran out meanwhile, kill the command without letting
    /// it run again; otherwise renew at once, and continue the command if redlock stopped it
    /// (with the terminal, if redlock's group has it again: `fg`, not `bg`).
    fn resume(&mut self) {
        let now = Instant::now();
        if now >= self.kill_line() {
            let key = &self.options.key;
            self.lose_lease(
                now,
                format_args!("the lease on lock '{key}' ran out while redlock was stopped"),
            );
            self.kill(now, "the lease ran out while redlock was stopped");
            return;
        }
        self.lease.renew_now();
        if self.job_stopped {
            self.job_stopped = false;
            if let Some(terminal) = self.terminal
                && terminal.ours()
            {
                terminal.hand_to(self.pgid);
            }
            report!(1, "continued" {}, "continued; continuing the command");
            process::signal_group(self.pgid, Signal::SIGCONT);
        }
    }

    fn lose_lease(&mut self, now: Instant, why: std::fmt::Arguments) {
        if !self.lease_ending() {
            self.judge(Verdict::LockLost);
            if self.status.is_none() {
                report::error_event("lock_lost", format!("{why}; stopping the command"));
            }
            self.stop(now);
            self.schedule_kill(self.kill_line());
        }
    }

    /// Someone killed the watchdog (or stopped it: the reaper continued it already). Without
    /// it a redlock that is stopped or frozen could leave the command running past the kill
    /// line, so a new one is started at once and given the kill line; if none can be, the
    /// command is stopped as for a lost lease.
    fn watchdog_changed(&mut self, now: Instant, waited: Waited) {
        let how = match waited {
            Waited::Stopped(signal) => {
                report!(
                    0,
                    "watchdog_stopped" { "signal" => signal.to_string() },
                    "warning: redlock's watchdog was stopped ({signal}); continued it"
                );
                return;
            }
            Waited::Exited(status) => describe(status),
        };
        match self.watchdog.restart() {
            Ok(()) => {
                report!(
                    0,
                    "watchdog_restarted" { "how" => how.as_str(), "pid" => self.watchdog.pid().as_raw() },
                    "warning: redlock's watchdog {how}; started a new one (pid {})",
                    self.watchdog.pid()
                );
                self.known[1] = self.watchdog.pid();
                if self.status.is_none() {
                    self.guard();
                }
            }
            Err(err) => {
                let key = &self.options.key;
                self.lose_lease(
                    now,
                    format_args!(
                        "redlock's watchdog {how} and no new one could be started ({err}), so \
                         nothing would stop the command if redlock froze past the lease of lock '{key}'"
                    ),
                );
            }
        }
    }

    /// What the run comes to, now that the command is gone.
    fn ended(&self) -> Ended {
        use std::os::unix::process::ExitStatusExt;
        let outcome = match (self.verdict, self.status) {
            (Some(Verdict::LockLost), _) => Outcome::LockLost,
            (Some(Verdict::MaxRuntime), _) => Outcome::MaxRuntime,
            (Some(Verdict::Internal), _) | (None, None) => Outcome::Internal,
            (None, Some(status)) => Outcome::of_command(status),
        };
        Ended {
            outcome,
            signaled: self.status.is_some_and(|s| s.signal().is_some()),
            deadline: self.deadline,
            renewals: self.renewals,
            renewal_failures: self.renewal_failures,
        }
    }

    /// Run until the command and everything left in its group are gone.
    pub(crate) fn supervise(&mut self, rx: &Receiver<Event>) -> Ended {
        loop {
            let now = Instant::now();
            // Done first: a command that ended in time keeps its status, even if the lease
            // deadline passes in the same instant.
            let adopted = (self.stopping() || self.status.is_some()) && self.tend_adopted();
            if self.status.is_some() && !process::group_alive(self.pgid) && !adopted {
                return self.ended();
            }
            if now >= self.kill_line() {
                let key = &self.options.key;
                self.lose_lease(
                    now,
                    format_args!("the lease on lock '{key}' ran out without a renewal"),
                );
                self.kill(now, "the lease ran out");
            } else if !self.lease_ending() && now >= self.stop_line() {
                let key = &self.options.key;
                let why = if self.unacknowledged {
                    ": its replicas stopped acknowledging the renewals (--min-replicas)"
                } else {
                    ""
                };
                self.lose_lease(
                    now,
                    format_args!("could not renew lock '{key}' before its lease ran low{why}"),
                );
            }
            if let Phase::Stopping { kill_at } = self.phase
                && now >= kill_at
            {
                self.kill(now, "the grace after the stop signal ran out");
            }
            if self.max_runtime_at.is_some_and(|m| now >= m) && self.verdict.is_none() {
                self.judge(Verdict::MaxRuntime);
                report!(
                    0,
                    "max_runtime" {},
                    "the command ran past --max-runtime; stopping it"
                );
                self.stop(now);
            }
            if self.status.is_some() {
                // The command exited but left processes behind: they must not outlive the lock.
                if !self.stopping() {
                    report!(
                        1,
                        "leftovers" {},
                        "the command left processes behind (in its group, or double-forked out of it); stopping them"
                    );
                    self.stop(now);
                }
                if let Phase::Killed { at } = self.phase
                    && now.duration_since(at) > REAP_WAIT
                {
                    return self.ended();
                }
            }

            let wake = self.next_wake(now);
            match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(event) => self.handle(event),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return self.ended(),
            }
        }
    }

    /// When the supervisor must look again although nothing happens.
    fn next_wake(&self, now: Instant) -> Instant {
        let mut wake = now + IDLE_WAKE;
        // After SIGKILL only the command's end is awaited; no timer may fire again.
        match self.phase {
            Phase::Killed { .. } => {}
            Phase::Running | Phase::Stopping { .. } => {
                wake = wake.min(self.kill_line());
                if !self.lease_ending() {
                    wake = wake.min(self.stop_line());
                }
                if let Phase::Stopping { kill_at } = self.phase {
                    wake = wake.min(kill_at);
                }
            }
        }
        if let (Some(m), None) = (self.max_runtime_at, self.verdict) {
            wake = wake.min(m);
        }
        if self.status.is_some() {
            wake = wake.min(now + GROUP_POLL);
        } else if self.stopping() {
            wake = wake.min(now + ADOPT_POLL);
        }
        wake
    }

    fn handle(&mut self, event: Event) {
        let now = Instant::now();
        let key = &self.options.key;
        match event {
            Event::Signal(signal) => match self.intake.meaning(signal) {
                Meaning::Stop => self.stop_requested(now, signal),
                Meaning::Forward => {
                    report!(
                        1,
                        "signal_forwarded" { "signal" => signal.to_string() },
                        "forwarding {signal} to the command"
                    );
                    process::signal_group(self.pgid, signal);
                }
                Meaning::Suspend if self.status.is_none() => self.suspend(signal),
                // The command is gone: stop as the job, nothing of it to stop or continue.
                Meaning::Suspend => signals::stop_self(signal),
                Meaning::Continued => self.resume(),
            },
            Event::Child(Ok(Waited::Exited(status)), seen) => {
                self.status = Some(status);
                // Seen to end only at the kill line or later (redlock itself was stopped or
                // frozen, and the watchdog may have killed it): nothing shows it ended in time,
                // and the lock may have been someone else's.
                if seen >= self.kill_line() && !self.lease_ending() {
                    use std::os::unix::process::ExitStatusExt;
                    if status.signal() == Some(Signal::SIGKILL as i32) && !self.killed() {
                        report!(
                            1,
                            "killed" { "reason" => "the watchdog: the lease ran out while redlock was stopped" },
                            "the watchdog sent SIGKILL to the command's process group: the lease ran out while redlock was stopped"
                        );
                    }
                    self.judge(Verdict::LockLost);
                    report::error_event(
                        "lock_lost",
                        format!(
                            "the lease on lock '{key}' ran out before the command was seen to end"
                        ),
                    );
                }
            }
            // Stopped by the terminal (Ctrl-Z, or reading it from the background) or by itself:
            // the job stops, redlock with it, as under a shell.
            Event::Child(Ok(Waited::Stopped(signal)), _)
                if signal
                    .standard()
                    .is_some_and(|s| signals::JOB_CONTROL.contains(&s)) =>
            {
                self.suspend(signal);
            }
            // Someone paused it on purpose with SIGSTOP (or redlock did): not a job stop.
            Event::Child(Ok(Waited::Stopped(_)), _) => {}
            Event::Watchdog(waited) => self.watchdog_changed(now, waited),
            Event::Child(Err(err), _) => {
                report::error_event("error", format!("lost track of the command: {err}"));
                self.judge(Verdict::Internal);
                self.kill(now, "redlock lost track of the command");
            }
            Event::Lease(LeaseEvent::Renewed { sent }) => {
                self.renewals += 1;
                if self.renew_failing {
                    report!(
                        0,
                        "renew_recovered" {},
                        "renewing lock '{key}' works again"
                    );
                    self.renew_failing = false;
                }
                self.unacknowledged = false;
                report!(
                    2,
                    "renewed" { "renewals" => self.renewals },
                    "renewed lock '{key}'"
                );
                self.deadline = lease::deadline(sent, self.options.ttl);
                self.guard();
            }
            Event::Lease(LeaseEvent::RenewFailed(failure)) => {
                self.renewal_failures += 1;
                let level = if self.renew_failing { 2 } else { 0 };
                report!(
                    level,
                    "renew_failed" { "error" => failure.to_string() },
                    "warning: renewing lock '{key}' failed ({failure}); retrying"
                );
                self.renew_failing = true;
            }
            Event::Lease(LeaseEvent::Unacknowledged(why)) => {
                self.renewal_failures += 1;
                let level = if self.unacknowledged { 2 } else { 0 };
                report!(
                    level,
                    "renew_unacknowledged" { "error" => why.as_str() },
                    "warning: the replicas stopped acknowledging renewals of lock '{key}' ({why}; \
                     --min-replicas); the lease is not extended until they do"
                );
                self.renew_failing = true;
                self.unacknowledged = true;
            }
            Event::Lease(LeaseEvent::Lost(held)) => {
                let why = match held {
                    Held::Gone => "its key is gone",
                    _ => "another owner holds it",
                };
                self.lose_lease(now, format_args!("lost lock '{key}': {why}"));
            }
            Event::Lease(LeaseEvent::Finished(_)) => {
                report::error(format!(
                    "the lease thread for lock '{key}' ended unexpectedly"
                ));
                self.judge(Verdict::Internal);
                self.lose_lease(now, format_args!("cannot renew lock '{key}'"));
            }
            Event::Lease(_) => {}
        }
    }
}

/// How a process ended, for a message: `was killed by SIGKILL`, `exited with status 1`.
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal().and_then(Signo::new)) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by {signal}"),
        (None, None) => "ended".to_owned(),
    }
}
