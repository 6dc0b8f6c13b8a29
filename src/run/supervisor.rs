//! The supervisor: from the spawn until the command and everything it left behind are gone,
//! it hears signals, the command's end and the lease's news, and decides when to forward, stop
//! and kill.

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::exit;
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

/// Why redlock is stopping the command (first reason wins the exit status, lock loss above all).
pub(crate) struct Supervisor<'a> {
    args: &'a Options,
    kill_after: Duration,
    pgid: Pid,
    /// The lease deadline: past it the lock may be someone else's.
    pub(super) deadline: Instant,
    max_runtime_at: Option<Instant>,
    status: Option<ExitStatus>,
    /// Redlock's own verdict, overriding the command's status (76, 124, 70).
    pub(super) outcome: Option<i32>,
    /// The stop signal (or a forwarded terminating signal) went out.
    stopping: bool,
    /// The lease is about to run out, or is gone: the command is being stopped for it.
    lease_ending: bool,
    kill_at: Option<Instant>,
    killed_at: Option<Instant>,
    terminations: u32,
    renew_failing: bool,
    /// Children redlock knows of (the command, the watchdog): not adopted.
    known: [Pid; 2],
    /// Adopted processes already sent the stop signal.
    adopted_stopped: HashSet<Pid>,
    pub(super) renewals: u64,
    pub(super) renewal_failures: u64,
}

impl<'a> Supervisor<'a> {
    pub(crate) fn new(
        args: &'a Options,
        kill_after: Duration,
        pgid: Pid,
        sent: Instant,
        watchdog: Pid,
    ) -> Self {
        let started = Instant::now();
        Self {
            args,
            kill_after,
            pgid,
            deadline: lease::deadline(sent, args.ttl),
            max_runtime_at: args.max_runtime.and_then(|d| started.checked_add(d)),
            status: None,
            outcome: None,
            stopping: false,
            lease_ending: false,
            kill_at: None,
            killed_at: None,
            terminations: 0,
            renew_failing: false,
            known: [pgid, watchdog],
            adopted_stopped: HashSet::new(),
            renewals: 0,
            renewal_failures: 0,
        }
    }

    /// The instant by which the whole group must be dead.
    fn kill_line(&self) -> Instant {
        self.deadline
            .checked_sub(lease::kill_margin(self.args.ttl))
            .unwrap_or(self.deadline)
    }

    /// The instant the stop signal must go out so that SIGKILL after --kill-after still lands in time.
    fn stop_line(&self) -> Instant {
        let kill_line = self.kill_line();
        kill_line.checked_sub(self.kill_after).unwrap_or(kill_line)
    }

    /// Send the stop signal now and schedule SIGKILL after the grace.
    fn stop(&mut self, now: Instant) {
        if self.killed_at.is_some() {
            return;
        }
        if !self.stopping {
            self.stopping = true;
            process::signal_group(self.pgid, self.args.stop_signal);
        }
        self.tend_adopted();
        self.schedule_kill(now + self.kill_after);
    }

    /// Processes that left the command's group and were adopted by redlock share its fate:
    /// the stop signal once stopping (once each), SIGKILL once killing. True if any is left.
    fn tend_adopted(&mut self) -> bool {
        if process::no_children() {
            return false;
        }
        let adopted = process::adopted(&self.known);
        if self.killed_at.is_some() {
            process::signal_adopted(&adopted, Signal::SIGKILL);
        } else if self.stopping {
            let new: Vec<_> = adopted
                .iter()
                .filter(|(pid, _)| self.adopted_stopped.insert(*pid))
                .copied()
                .collect();
            process::signal_adopted(&new, self.args.stop_signal);
        }
        !adopted.is_empty()
    }

    fn schedule_kill(&mut self, at: Instant) {
        self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
    }

    fn kill(&mut self, now: Instant) {
        if self.killed_at.is_none() {
            self.killed_at = Some(now);
            process::signal_group(self.pgid, Signal::SIGKILL);
            self.tend_adopted();
        }
    }

    fn lose_lease(&mut self, now: Instant, why: std::fmt::Arguments) {
        if !self.lease_ending {
            self.lease_ending = true;
            self.outcome = Some(exit::LOCK_LOST);
            if self.status.is_none() {
                report::error_event("lock_lost", format!("{why}; stopping the command"));
            }
            self.stop(now);
            self.schedule_kill(self.kill_line());
        }
    }

    /// Run until the command and everything left in its group are gone; return its status.
    pub(crate) fn supervise(&mut self, rx: &Receiver<Event>) -> Option<ExitStatus> {
        loop {
            let now = Instant::now();
            // Done first: a command that ended in time keeps its status, even if the lease
            // deadline passes in the same instant.
            let adopted = (self.stopping || self.status.is_some()) && self.tend_adopted();
            if self.status.is_some() && !process::group_alive(self.pgid) && !adopted {
                return self.status;
            }
            if now >= self.kill_line() {
                let key = &self.args.key;
                self.lose_lease(
                    now,
                    format_args!("the lease on lock '{key}' ran out without a renewal"),
                );
                self.kill(now);
            } else if !self.lease_ending && now >= self.stop_line() {
                let key = &self.args.key;
                self.lose_lease(
                    now,
                    format_args!("could not renew lock '{key}' before its lease ran low"),
                );
            }
            if self.kill_at.is_some_and(|k| now >= k) {
                self.kill(now);
            }
            if self.max_runtime_at.is_some_and(|m| now >= m) && self.outcome.is_none() {
                self.outcome = Some(exit::TIMEOUT);
                report!(
                    0,
                    "max_runtime" {},
                    "the command ran past --max-runtime; stopping it"
                );
                self.stop(now);
            }
            if self.status.is_some() {
                // The command exited but left processes behind: they must not outlive the lock.
                if !self.stopping {
                    report!(
                        1,
                        "leftovers" {},
                        "the command left processes behind (in its group, or double-forked out of it); stopping them"
                    );
                    self.stop(now);
                }
                if self
                    .killed_at
                    .is_some_and(|k| now.duration_since(k) > REAP_WAIT)
                {
                    return self.status;
                }
            }

            // After SIGKILL only the command's end is awaited; no timer may fire again.
            let mut wake = now + IDLE_WAKE;
            if self.killed_at.is_none() {
                wake = wake.min(self.kill_line());
                if !self.lease_ending {
                    wake = wake.min(self.stop_line());
                }
                if let Some(k) = self.kill_at {
                    wake = wake.min(k);
                }
            }
            if let (Some(m), None) = (self.max_runtime_at, self.outcome) {
                wake = wake.min(m);
            }
            if self.status.is_some() {
                wake = wake.min(now + GROUP_POLL);
            } else if self.stopping {
                wake = wake.min(now + ADOPT_POLL);
            }
            match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(event) => self.handle(event),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return self.status,
            }
        }
    }

    fn handle(&mut self, event: Event) {
        let now = Instant::now();
        let key = &self.args.key;
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
                    self.stopping = true;
                    if self.terminations >= 2 {
                        self.kill(now);
                    } else {
                        self.schedule_kill(now + self.kill_after);
                    }
                }
            }
            Event::Child(Ok(Waited::Exited(status)), seen) => {
                self.status = Some(status);
                // Seen to end only after the lease ran out (redlock itself was paused, say):
                // nothing shows it ended in time, and the lock may have been someone else's.
                if seen > self.deadline && !self.lease_ending {
                    self.lease_ending = true;
                    self.outcome = Some(exit::LOCK_LOST);
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
                self.outcome.get_or_insert(exit::INTERNAL);
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
                report!(
                    2,
                    "renewed" { "renewals" => self.renewals },
                    "renewed lock '{key}'"
                );
                self.deadline = lease::deadline(sent, self.args.ttl);
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
                self.outcome.get_or_insert(exit::INTERNAL);
                self.lose_lease(now, format_args!("cannot renew lock '{key}'"));
            }
            Event::Lease(_) => {}
        }
    }
}
