//! The supervisor: from the spawn until the command and everything it left behind are gone,
//! it hears signals, the command's end and the lease's news, and decides when to forward, stop
//! and kill.

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::exit::Outcome;
use crate::lease::{self, LeaseEvent};
use crate::lock::Held;
use crate::process::signals;
use crate::process::{self, Waited};
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
    /// Whether redlock's verdict replaced the command's own status.
    pub overridden: bool,
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
    /// The lease deadline: past it the lock may be someone else's.
    deadline: Instant,
    max_runtime_at: Option<Instant>,
    phase: Phase,
    /// How the command ended, once it has (processes may linger in its group).
    status: Option<ExitStatus>,
    verdict: Option<Verdict>,
    /// Terminating signals forwarded so far (a second one escalates to SIGKILL).
    terminations: u32,
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

impl<'a> Supervisor<'a> {
    pub(crate) fn new(options: &'a Options, pgid: Pid, sent: Instant, watchdog: Pid) -> Self {
        let started = Instant::now();
        Self {
            options,
            pgid,
            deadline: lease::deadline(sent, options.ttl),
            max_runtime_at: options.max_runtime.and_then(|d| started.checked_add(d)),
            phase: Phase::Running,
            status: None,
            verdict: None,
            terminations: 0,
            renew_failing: false,
            unacknowledged: false,
            known: [pgid, watchdog],
            adopted_stopped: HashSet::new(),
            renewals: 0,
            renewal_failures: 0,
        }
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

    /// The instant the stop signal must go out so that SIGKILL after --kill-after still lands in time.
    fn stop_line(&self) -> Instant {
        let kill_line = self.kill_line();
        kill_line
            .checked_sub(self.options.kill_after)
            .unwrap_or(kill_line)
    }

    /// Send the stop signal now (unless a stop already went out) and schedule SIGKILL after
    /// the grace.
    fn stop(&mut self, now: Instant) {
        if self.killed() {
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

    fn kill(&mut self, now: Instant) {
        if !self.killed() {
            self.phase = Phase::Killed { at: now };
            process::signal_group(self.pgid, Signal::SIGKILL);
            self.tend_adopted();
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

    /// What the run comes to, now that the command is gone.
    fn ended(&self) -> Ended {
        let outcome = match (self.verdict, self.status) {
            (Some(Verdict::LockLost), _) => Outcome::LockLost,
            (Some(Verdict::MaxRuntime), _) => Outcome::MaxRuntime,
            (Some(Verdict::Internal), _) | (None, None) => Outcome::Internal,
            (None, Some(status)) => Outcome::of_command(status),
        };
        Ended {
            outcome,
            overridden: self.verdict.is_some(),
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
                self.kill(now);
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
                self.kill(now);
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
            Event::Signal(signal) => {
                report!(
                    1,
                    "signal_forwarded" { "signal" => signal.as_str() },
                    "forwarding {} to the command",
                    signal.as_str()
                );
                process::signal_group(self.pgid, signal);
                if signals::is_terminating(signal) {
                    self.terminations += 1;
                    if self.terminations >= 2 {
                        self.kill(now);
                    } else {
                        self.schedule_kill(now + self.options.kill_after);
                    }
                }
            }
            Event::Child(Ok(Waited::Exited(status)), seen) => {
                self.status = Some(status);
                // Seen to end only after the lease ran out (redlock itself was paused, say):
                // nothing shows it ended in time, and the lock may have been someone else's.
                if seen > self.deadline && !self.lease_ending() {
                    self.judge(Verdict::LockLost);
                    report::error(format!(
                        "the lease on lock '{key}' ran out before the command was seen to end"
                    ));
                }
            }
            Event::Child(Ok(Waited::Stopped(signal)), _) if signal != Signal::SIGSTOP => {
                // A stopped command would hang the terminal: the shell regains it only when
                // redlock stops, and a stopped redlock could not renew the lease.
                report!(
                    0,
                    "job_control" { "signal" => signal.as_str() },
                    "the command was stopped by {}; job control is not supported under a lock, continuing it",
                    signal.as_str()
                );
                process::signal_group(self.pgid, Signal::SIGCONT);
            }
            // Someone paused it on purpose with SIGSTOP: theirs to continue.
            Event::Child(Ok(Waited::Stopped(_)), _) => {}
            Event::Child(Err(err), _) => {
                report::error_event("error", format!("lost track of the command: {err}"));
                self.judge(Verdict::Internal);
                self.kill(now);
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
