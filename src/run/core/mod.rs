//! The supervisor's decisions, as a state machine that does no I/O and reads no clock.
//!
//! [`Core::step`] takes what happened ([`Input`]: a signal, the command's end, a renewal's
//! news, the time passing) and the time it happened, and returns what to do ([`Action`]: signal
//! the group, kill it with a reason, tell the watchdog the kill line, renew now, stop or
//! continue, say something). [`Core::wake_at`] says when to step again if nothing happens;
//! [`Core::ended`] says when it is over and how. The executor (`supervisor`) reads the world
//! and performs the actions; the rules live here, in one place:
//!
//! - Forwarded signals go to the command's group, and the command decides what they mean.
//! - Only a stop request (TERM or `--stop-signal`), `--max-runtime` and the loss of the lease
//!   start stop → grace → SIGKILL. The same stop request twice within [`SAME_REQUEST`] (as
//!   timeout(1) sends it, to redlock and then to its group) is one request; a later second one
//!   kills at once.
//! - The grace after a stop request or `--max-runtime` is `--kill-after`, the lease being
//!   renewed meanwhile. After the loss of the lease it is [`lease_grace`]: `--kill-after`, at
//!   most a quarter of the ttl, and never past the kill line.
//! - The kill line is the lease's end by the last renewal that counted, less a margin: at it,
//!   the whole group is killed. The stop line comes a grace before it: a lease that was not
//!   renewed by then is given up.
//! - Job control: stop the command's group, then redlock. Continued: if the kill line passed
//!   meanwhile, kill the command (it never runs again) and end in 76; otherwise renew at once
//!   and continue the command (past the stop line, once that renewal lands).
//! - The watchdog is told the kill line whenever it moves.
//! - A lease that was or may have been lost ends in 76, whatever the command's status.
//! - Every SIGKILL is reported, with its reason.
//!
//! The state is three small machines side by side: the lease ([`Lease`]), the command
//! ([`Command`]) and stopping it ([`Stopping`]); each variant carries its own data.

mod interface;
mod lease;

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;

pub(crate) use interface::*;

use crate::clock::Moment;
use crate::exit::Outcome;
use crate::lease::timing::{deadline, kill_margin};
use crate::lock::Held;
use crate::process::Signo;

/// A stop request repeated within this window is the same request: timeout(1) sends TERM to
/// redlock, then to its whole process group, redlock included. A person or a supervisor that
/// insists does so later, and is obeyed at once.
pub(crate) const SAME_REQUEST: Duration = Duration::from_millis(500);
/// How long to wait for a SIGKILLed group to disappear (zombies no one reaps) before moving on.
pub(crate) const REAP_WAIT: Duration = Duration::from_secs(1);
/// How often to look at the group once the command exited (are processes left behind?).
pub(crate) const GROUP_POLL: Duration = Duration::from_millis(10);
/// How often to look for newly adopted processes while the command is being stopped.
pub(crate) const ADOPT_POLL: Duration = Duration::from_millis(50);
/// The longest the supervisor sleeps when no timer is due.
pub(crate) const IDLE_WAKE: Duration = Duration::from_secs(60);

/// [`lease_grace`] as `--help`, the man page and the docs say it, written once (a macro, so that
/// `--kill-after`'s help can be put together at compile time; the docs test holds the pages to
/// it).
#[macro_export]
macro_rules! lease_grace_rule {
    () => {
        "After the loss of the lease the grace is the shorter of --kill-after and a quarter of \
         the ttl, and never runs past the lease."
    };
}

/// The grace after the loss of the lease: `--kill-after`, at most a quarter of the ttl (and
/// never past the kill line: see [`Core`]). The stop for a lease running low then comes after
/// two renewals (every ttl/3) and their retries had their chance, not after the first blip.
pub(crate) fn lease_grace(ttl: Duration, kill_after: Duration) -> Duration {
    kill_after.min(ttl / 4)
}

/// The lease, as far as the command is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lease {
    /// Renewals count: the lease ends at `deadline`, by the last request that counted.
    Held { deadline: Moment, trouble: Trouble },
    /// It was, or may have been, lost: the command is being stopped, and the run ends in 76.
    /// `deadline`: where it ended by the last renewal that counted.
    Lost { why: LostWhy, deadline: Moment },
}

/// What the renewals of a held lease are going through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trouble {
    None,
    /// Renewals fail (no answer, an error).
    Failing,
    /// The master renews, the replicas do not acknowledge (`--min-replicas`).
    Unacknowledged,
}

/// The command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    /// Running, or stopped by redlock for job control.
    Running { suspended: Suspended },
    /// It exited; what is left of its group (and of what redlock adopted) is `left`.
    Exited { status: ExitStatus, left: Left },
}

/// Whether redlock stopped the command's group for job control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suspended {
    No,
    /// Stopped with redlock (Ctrl-Z, SIGTSTP).
    Yes,
    /// redlock was continued past the stop line: the command stays stopped until the renewal
    /// sent then extends the lease, and is killed at the kill line if none does.
    UntilRenewed,
}

/// What the command left behind, as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// Not looked at since it exited.
    Unseen,
    /// Processes of its group (or adopted ones) live on: they must not outlive the lock.
    Processes,
    /// Nothing.
    Nothing,
}

/// Stopping the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopping {
    /// Nothing asked it to stop.
    No,
    /// The stop signal went out; SIGKILL follows at `kill_at`.
    Signalled { kill_at: Moment },
    /// SIGKILL went out at `at`: only the group's end is awaited.
    Killed { at: Moment },
}

/// Why redlock overrides the command's own status (the lease lost above all: see `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    MaxRuntime,
    /// redlock lost track of the command, or its lease thread died.
    Internal,
}

/// The supervisor's state: see the module's header.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    config: Config,
    lease: Lease,
    command: Command,
    stopping: Stopping,
    verdict: Option<Verdict>,
    /// When the first stop request from outside came (a later second one kills at once).
    first_request: Option<Moment>,
    /// A signal that asks a job to end (TERM, INT, HUP, QUIT) was forwarded to the command
    /// while it ran: the run was cut short, whatever the command then exits with.
    forwarded_stop: bool,
    max_runtime_at: Option<Moment>,
    renewals: u64,
    renewal_failures: u64,
}

impl Core {
    /// The command was spawned at `started`, under the lease taken by the request sent at
    /// `sent`. The first actions: tell the watchdog the kill line (and the rest of `step`).
    pub(crate) fn new(config: Config, sent: Moment, started: Moment) -> (Self, Vec<Action>) {
        let mut core = Self {
            config,
            lease: Lease::Held {
                deadline: deadline(sent, config.ttl),
                trouble: Trouble::None,
            },
            command: Command::Running {
                suspended: Suspended::No,
            },
            stopping: Stopping::No,
            verdict: None,
            first_request: None,
            forwarded_stop: false,
            max_runtime_at: config.max_runtime.map(|d| started + d),
            renewals: 0,
            renewal_failures: 0,
        };
        let mut actions = vec![Action::Watch(core.kill_line())];
        core.check_time(started, &mut actions);
        (core, actions)
    }

    /// The lease's end by the last renewal that counted.
    fn deadline(&self) -> Moment {
        match self.lease {
            Lease::Held { deadline, .. } | Lease::Lost { deadline, .. } => deadline,
        }
    }

    /// The moment by which the whole group must be dead.
    pub(crate) fn kill_line(&self) -> Moment {
        self.deadline() - kill_margin(self.config.ttl)
    }

    /// The moment the stop signal must go out, if the lease was not renewed, so that SIGKILL
    /// after the lease's grace still lands in time.
    fn stop_line(&self) -> Moment {
        self.kill_line() - lease_grace(self.config.ttl, self.config.kill_after)
    }

    /// Stopped by redlock until a renewal comes (see [`Suspended::UntilRenewed`]).
    fn until_renewed(&self) -> bool {
        self.command
            == Command::Running {
                suspended: Suspended::UntilRenewed,
            }
    }

    fn lost(&self) -> bool {
        matches!(self.lease, Lease::Lost { .. })
    }

    fn killed(&self) -> bool {
        matches!(self.stopping, Stopping::Killed { .. })
    }

    fn running(&self) -> bool {
        matches!(self.command, Command::Running { .. })
    }

    /// Whether the executor should look at the group and step [`Input::Group`]: once the
    /// command exited (processes it left behind must not outlive the lock), and while stopping.
    pub(crate) fn watching_group(&self) -> bool {
        self.waiting_for_group() || self.stopping != Stopping::No
    }

    /// Whether the command exited and its group is not known to be gone.
    fn waiting_for_group(&self) -> bool {
        matches!(self.command, Command::Exited { left, .. } if left != Left::Nothing)
    }

    /// Whether the command is being stopped (and what redlock adopted with it: the stop signal
    /// once) or was killed (SIGKILL): for the executor's care of adopted processes.
    pub(crate) fn stopping(&self) -> Option<bool> {
        match self.stopping {
            Stopping::No => None,
            Stopping::Signalled { .. } => Some(false),
            Stopping::Killed { .. } => Some(true),
        }
    }

    /// How it ended, once the command and everything left of its group are gone (or a
    /// SIGKILLed group outlived [`REAP_WAIT`]).
    pub(crate) fn ended(&self, now: Moment) -> Option<Ended> {
        let Command::Exited { status, left } = self.command else {
            return None;
        };
        let reaped_long_ago = matches!(self.stopping, Stopping::Killed { at }
            if now.saturating_since(at) > REAP_WAIT);
        if left != Left::Nothing && !reaped_long_ago {
            return None;
        }
        use std::os::unix::process::ExitStatusExt;
        let outcome = match (self.lease, self.verdict) {
            (Lease::Lost { .. }, _) => Outcome::LockLost,
            (_, Some(Verdict::MaxRuntime)) => Outcome::MaxRuntime,
            (_, Some(Verdict::Internal)) => Outcome::Internal,
            (Lease::Held { .. }, None) => Outcome::of_command(status),
        };
        Some(Ended {
            outcome,
            cut_short: self.cut_short(),
            signaled: status.signal().is_some(),
            deadline: self.deadline(),
            renewals: self.renewals,
            renewal_failures: self.renewal_failures,
        })
    }

    /// Whether a stop asked of redlock (a stop request, or a job-ending signal it forwarded)
    /// reached the command while it ran.
    fn cut_short(&self) -> bool {
        self.first_request.is_some() || self.forwarded_stop
    }

    /// How it ends when nothing can be heard any more (every sender of the supervisor's
    /// events gone): redlock cannot account for the command.
    pub(crate) fn abandoned(&self) -> Ended {
        Ended {
            outcome: if self.lost() {
                Outcome::LockLost
            } else {
                Outcome::Internal
            },
            cut_short: self.cut_short(),
            signaled: false,
            deadline: self.deadline(),
            renewals: self.renewals,
            renewal_failures: self.renewal_failures,
        }
    }

    /// When to step again ([`Input::Tick`]) if nothing happens before.
    pub(crate) fn wake_at(&self, now: Moment) -> Moment {
        let mut wake = now + IDLE_WAKE;
        // After SIGKILL only the command's end is awaited; no timer may fire again but the
        // wait for a group that will not go.
        match self.stopping {
            Stopping::Killed { at } => wake = wake.min(at + REAP_WAIT + GROUP_POLL),
            Stopping::No | Stopping::Signalled { .. } => {
                wake = wake.min(self.kill_line());
                if !self.lost() {
                    wake = wake.min(self.stop_line());
                }
                if let Stopping::Signalled { kill_at } = self.stopping {
                    wake = wake.min(kill_at);
                }
            }
        }
        if let (Some(at), None) = (self.max_runtime_at, self.verdict) {
            wake = wake.min(at);
        }
        if self.waiting_for_group() {
            wake = wake.min(now + GROUP_POLL);
        } else if self.stopping != Stopping::No {
            wake = wake.min(now + ADOPT_POLL);
        }
        wake
    }

    /// What to do now that `input` happened at `now`.
    pub(crate) fn step(&mut self, input: Input, now: Moment) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle(input, now, &mut out);
        self.check_time(now, &mut out);
        out
    }

    fn handle(&mut self, input: Input, now: Moment, out: &mut Vec<Action>) {
        match input {
            Input::StopRequest(signal) => self.stop_requested(signal, now, out),
            Input::Forward(signal) => self.forward(signal, out),
            Input::JobStop(signal) => self.job_stop(signal, out),
            Input::Continued => self.resume(now, out),
            Input::Exited(status) => self.exited(status, now, out),
            Input::Paused(_) => {}
            Input::LostTrack(error) => {
                out.push(Action::Note(Note::LostTrack(error)));
                self.judge(Verdict::Internal);
                self.kill(KillReason::LostTrack, now, out);
            }
            Input::Group { alive } => self.group_seen(alive),
            Input::Renewed { sent } => self.renewed(sent, out),
            Input::RenewFailed(error) => self.renew_failed(error, out),
            Input::Unacknowledged(why) => self.unacknowledged(why, out),
            Input::Lost(held) => {
                let why = match held {
                    Held::Gone => LostWhy::Gone,
                    Held::Theirs | Held::Ours => LostWhy::Theirs,
                };
                self.lose_lease(why, now, out);
            }
            Input::LeaseEnded => {
                out.push(Action::Note(Note::LeaseEnded));
                self.judge(Verdict::Internal);
                self.lose_lease(LostWhy::LeaseEnded, now, out);
            }
            Input::WatchdogDied(how) => out.push(Action::RestartWatchdog(how)),
            Input::WatchdogRestarted { how, pid } => {
                // Its orders first, then the word: once redlock says there is a new watchdog,
                // that one watches the command (a stop right after the line found none).
                if self.running() {
                    out.push(Action::Watch(self.kill_line()));
                }
                out.push(Action::Note(Note::WatchdogRestarted { how, pid }));
            }
            Input::WatchdogFailed { how, error } => {
                out.push(Action::Note(Note::WatchdogFailed { how, error }));
                self.lose_lease(LostWhy::NoWatchdog, now, out);
            }
            Input::WatchdogStopped(signal) => out.push(Action::Note(Note::WatchdogStopped(signal))),
            Input::Tick => {}
        }
    }

    /// A signal passed on to the command; one that ends a job, sent while the command runs,
    /// makes its end a stop asked for.
    fn forward(&mut self, signal: Signo, out: &mut Vec<Action>) {
        use nix::sys::signal::Signal::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let running = matches!(self.command, Command::Running { .. });
        let ends_a_job = matches!(signal.standard(), Some(SIGTERM | SIGINT | SIGHUP | SIGQUIT));
        self.forwarded_stop |= running && ends_a_job;
        out.push(Action::Note(Note::Forwarded(signal)));
        out.push(Action::Signal(signal));
    }

    /// A job-control stop (SIGTSTP and its kin): the command is suspended with it.
    fn job_stop(&mut self, signal: Signo, out: &mut Vec<Action>) {
        match self.command {
            Command::Running { .. } => {
                self.command = Command::Running {
                    suspended: Suspended::Yes,
                };
                out.push(Action::Note(Note::Suspended(signal)));
                out.push(Action::Suspend(signal));
            }
            // The command is gone: stop as the job, nothing of it to stop or continue.
            Command::Exited { .. } => out.push(Action::StopSelf(signal)),
        }
    }

    /// Whether anything of the command's group is left, once the command has exited.
    fn group_seen(&mut self, alive: bool) {
        if let Command::Exited { status, .. } = self.command {
            let left = if alive {
                Left::Processes
            } else {
                Left::Nothing
            };
            self.command = Command::Exited { status, left };
        }
    }

    fn renew_failed(&mut self, error: String, out: &mut Vec<Action>) {
        self.renewal_failures += 1;
        // Replicas that stopped acknowledging stay the story until a renewal counts.
        let first = self.trouble(|before| match before {
            Trouble::None => Trouble::Failing,
            other => other,
        }) == Some(Trouble::None);
        out.push(Action::Note(Note::RenewFailed { error, first }));
    }

    fn unacknowledged(&mut self, why: String, out: &mut Vec<Action>) {
        self.renewal_failures += 1;
        let first = self
            .trouble(|_| Trouble::Unacknowledged)
            .is_some_and(|before| before != Trouble::Unacknowledged);
        out.push(Action::Note(Note::Unacknowledged { why, first }));
    }

    /// The checks that time alone triggers, after every input.
    fn check_time(&mut self, now: Moment, out: &mut Vec<Action>) {
        // A command that ended in time, its group gone, keeps its status, even if the lease
        // deadline passes in the same instant.
        if self.ended(now).is_some() {
            return;
        }
        if now >= self.kill_line() {
            self.lose_lease(LostWhy::RanOut, now, out);
            self.kill(KillReason::LeaseRanOut, now, out);
        } else if !self.lost() && now >= self.stop_line() && !self.until_renewed() {
            let unacknowledged = matches!(
                self.lease,
                Lease::Held {
                    trouble: Trouble::Unacknowledged,
                    ..
                }
            );
            self.lose_lease(LostWhy::RunningLow { unacknowledged }, now, out);
        }
        if let Stopping::Signalled { kill_at } = self.stopping
            && now >= kill_at
        {
            self.kill(KillReason::GraceRanOut, now, out);
        }
        if let (Some(at), None) = (self.max_runtime_at, self.verdict)
            && now >= at
            && !self.lost()
        {
            self.judge(Verdict::MaxRuntime);
            out.push(Action::Note(Note::MaxRuntime));
            self.stop(now, out);
        }
        // The command exited but left processes behind: they must not outlive the lock.
        if matches!(
            self.command,
            Command::Exited {
                left: Left::Processes,
                ..
            }
        ) && self.stopping == Stopping::No
        {
            out.push(Action::Note(Note::Leftovers));
            self.stop(now, out);
        }
    }

    /// Record why redlock overrides the command's status: the first reason wins.
    fn judge(&mut self, verdict: Verdict) {
        self.verdict.get_or_insert(verdict);
    }

    /// A stop request from outside: the stop signal, then SIGKILL after --kill-after; the same
    /// request again within [`SAME_REQUEST`] changes nothing, a later one kills at once.
    fn stop_requested(&mut self, signal: Signo, now: Moment, out: &mut Vec<Action>) {
        match self.first_request {
            None => {
                self.first_request = Some(now);
                out.push(Action::Note(Note::StopRequested(signal)));
                self.stop(now, out);
            }
            Some(first) if now.saturating_since(first) < SAME_REQUEST => {
                out.push(Action::Note(Note::StopRepeated(signal)));
            }
            Some(_) => self.kill(KillReason::SecondRequest(signal), now, out),
        }
    }

    /// Send the stop signal now (unless a stop already went out) and schedule SIGKILL after
    /// `--kill-after`.
    fn stop(&mut self, now: Moment, out: &mut Vec<Action>) {
        if self.config.stop_signal == Signal::SIGKILL.into() {
            self.kill(KillReason::StopSignalIsKill, now, out);
            return;
        }
        if self.stopping == Stopping::No {
            out.push(Action::Signal(self.config.stop_signal));
        }
        self.schedule_kill(now + self.config.kill_after);
    }

    /// SIGKILL at `at` at the latest (an earlier kill already planned stands).
    fn schedule_kill(&mut self, at: Moment) {
        self.stopping = match self.stopping {
            Stopping::No => Stopping::Signalled { kill_at: at },
            Stopping::Signalled { kill_at } => Stopping::Signalled {
                kill_at: kill_at.min(at),
            },
            killed @ Stopping::Killed { .. } => killed,
        };
    }

    /// SIGKILL the group, once, saying why.
    fn kill(&mut self, reason: KillReason, now: Moment, out: &mut Vec<Action>) {
        if !self.killed() {
            self.stopping = Stopping::Killed { at: now };
            out.push(Action::Note(Note::Killed(reason)));
            out.push(Action::Kill);
        }
    }

    /// The command ended (or died), seen at `now`.
    fn exited(&mut self, status: ExitStatus, now: Moment, out: &mut Vec<Action>) {
        use std::os::unix::process::ExitStatusExt;
        self.command = Command::Exited {
            status,
            left: Left::Unseen,
        };
        // Seen to end only at the kill line or later (redlock itself was stopped or frozen,
        // and the watchdog may have killed it): nothing shows it ended in time, and the lock
        // may have been someone else's.
        if now >= self.kill_line() && !self.lost() {
            if status.signal() == Some(Signal::SIGKILL as i32) && !self.killed() {
                out.push(Action::Note(Note::Killed(KillReason::Watchdog)));
            }
            self.lease = Lease::Lost {
                why: LostWhy::RanOutBeforeSeen,
                deadline: self.deadline(),
            };
            out.push(Action::Note(Note::LockLost(LostWhy::RanOutBeforeSeen)));
        }
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
