//! The supervisor's executor: from the spawn until the command and everything it left behind are
//! gone, it turns what it hears (signals, the command's end, the lease's news, the watchdog's
//! death) into inputs of the decision core (`core`), and performs the actions the core returns:
//! signalling the command's group and the job's other processes, telling the watchdog the kill line,
//! stopping and continuing redlock itself, handing the terminal over, saying what happens
//! (`notes`). It decides nothing.

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::clock::Moment;
use crate::lease::{HoldEvent, Lease};
use crate::process::signals::{self, Intake, Meaning};
use crate::process::{self, Signo, Terminal, Waited, Watchdog};
use crate::report;
use crate::run::core::{Action, Config, Core, Ended, Input};
use crate::run::{Event, Options, notes};

/// What the supervisor works with besides the options: the command's group, when the lease
/// was taken, the watchdog, the lease, the signal intake and the terminal handed over.
pub(crate) struct Supervised<'a> {
    pub pgid: Pid,
    pub sent: Moment,
    pub watchdog: &'a mut Watchdog,
    pub lease: &'a Lease,
    pub intake: Intake,
    pub terminal: Option<&'a Terminal>,
}

/// The executor of one command's supervision.
pub(crate) struct Supervisor<'a> {
    options: &'a Options,
    pgid: Pid,
    watchdog: &'a mut Watchdog,
    lease: &'a Lease,
    intake: Intake,
    /// The terminal redlock handed to the command, if it did.
    terminal: Option<&'a Terminal>,
    core: Core,
    /// Adopted processes already sent the stop signal.
    escaped_stopped: HashSet<Pid>,
}

impl<'a> Supervisor<'a> {
    /// Supervise the command from now on (the watchdog is told the kill line at once).
    pub(crate) fn new(options: &'a Options, context: Supervised<'a>) -> Self {
        let Supervised {
            pgid,
            sent,
            watchdog,
            lease,
            intake,
            terminal,
        } = context;
        let config = Config {
            ttl: options.ttl,
            kill_after: options.kill_after,
            stop_signal: options.stop_signal.into(),
            max_runtime: options.max_runtime,
        };
        let (core, actions) = Core::new(config, sent, Moment::now());
        let mut supervisor = Self {
            options,
            pgid,
            watchdog,
            lease,
            intake,
            terminal,
            core,
            escaped_stopped: HashSet::new(),
        };
        supervisor.perform(actions);
        supervisor
    }

    /// Run until the command and everything left in its group are gone.
    pub(crate) fn supervise(&mut self, rx: &Receiver<Event>) -> Ended {
        loop {
            let input = if self.core.watching_group() {
                let escaped = self.tend_escaped(self.core.stopping());
                Input::Group {
                    alive: escaped || process::group_alive(self.pgid),
                }
            } else {
                Input::Tick
            };
            self.step(input, Moment::now());
            if let Some(ended) = self.core.ended(Moment::now()) {
                return ended;
            }
            let wake = self.core.wake_at(Moment::now());
            match rx.recv_timeout(wake.until()) {
                Ok(event) => {
                    let (input, at) = self.input(event);
                    if let Some(input) = input {
                        self.step(input, at);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every sender is gone (the signal thread and the lease's): nothing more can
                // be heard; what the core knows is all there is.
                Err(RecvTimeoutError::Disconnected) => return self.core.abandoned(),
            }
        }
    }

    fn step(&mut self, input: Input, now: Moment) {
        let actions = self.core.step(input, now);
        self.perform(actions);
    }

    /// What `event` is for the core, and when it happened.
    fn input(&self, event: Event) -> (Option<Input>, Moment) {
        let now = Moment::now();
        let input = match event {
            Event::Signal(signal) => Some(match self.intake.meaning(signal) {
                Meaning::Stop => Input::StopRequest(signal),
                Meaning::Forward => Input::Forward(signal),
                Meaning::Suspend => Input::JobStop(signal),
                Meaning::Continued => Input::Continued,
            }),
            Event::Child(Ok(Waited::Exited(status)), seen) => {
                return (Some(Input::Exited(status)), seen);
            }
            // Stopped by the terminal (Ctrl-Z, or reading it from the background) or by
            // itself: the job stops, redlock with it, as under a shell.
            Event::Child(Ok(Waited::Stopped(signal)), _) if job_control(signal) => {
                Some(Input::JobStop(signal))
            }
            // Someone paused it on purpose with SIGSTOP (or redlock did): not a job stop.
            Event::Child(Ok(Waited::Stopped(signal)), _) => Some(Input::Paused(signal)),
            Event::Child(Err(err), _) => Some(Input::LostTrack(err.to_string())),
            Event::Watchdog(Waited::Exited(status)) => Some(Input::WatchdogDied(describe(status))),
            Event::Watchdog(Waited::Stopped(signal)) => Some(Input::WatchdogStopped(signal)),
            Event::Hold(event) => Some(match event {
                HoldEvent::Renewed { sent } => Input::Renewed { sent },
                HoldEvent::RenewFailed(failure) => Input::RenewFailed(failure.to_string()),
                HoldEvent::Unacknowledged(why) => Input::Unacknowledged(why),
                HoldEvent::Lost(held) => Input::Lost(held),
                HoldEvent::Released(_) => Input::LeaseEnded,
            }),
            // The lease thread reports the wait before the command starts, and nothing of it
            // after: a bug, said as one.
            Event::Wait(event) => {
                report::error(format!(
                    "internal error: news of the wait for the lock while it is held ({event:?})"
                ));
                None
            }
        };
        (input, now)
    }

    fn perform(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Signal(signal) => process::signal_group(self.pgid, signal),
                Action::Kill => process::kill_job(self.pgid),
                Action::Watch(kill_line) => self.watchdog.watch(self.pgid, kill_line),
                Action::RestartWatchdog(how) => {
                    let input = match self.watchdog.restart() {
                        Ok(()) => Input::WatchdogRestarted {
                            how,
                            pid: self.watchdog.pid().as_raw(),
                        },
                        Err(err) => Input::WatchdogFailed {
                            how,
                            error: err.to_string(),
                        },
                    };
                    self.step(input, Moment::now());
                }
                Action::RenewNow => self.lease.renew_now(),
                Action::Suspend(signal) => {
                    // SIGSTOP: the whole group stops, also what ignores or handles the
                    // terminal's stop.
                    process::signal_group(self.pgid, Signal::SIGSTOP);
                    if let Some(terminal) = self.terminal {
                        terminal.take_back(self.pgid);
                    }
                    self.stop_self(signal);
                }
                Action::StopSelf(signal) => self.stop_self(signal),
                Action::Continue => {
                    // With the terminal, if redlock's group has it again: `fg`, not `bg`.
                    if let Some(terminal) = self.terminal
                        && terminal.ours()
                    {
                        terminal.hand_to(self.pgid);
                    }
                    process::signal_group(self.pgid, Signal::SIGCONT);
                }
                Action::Note(note) => notes::say(&note, self.options),
            }
        }
    }

    /// Stop redlock as a shell job stops; once continued, tell the core.
    fn stop_self(&mut self, signal: Signo) {
        signals::stop_self(signal);
        self.step(Input::Continued, Moment::now());
    }

    /// Processes of the job outside the command's group (they left it, or redlock adopted them)
    /// share its fate: the stop signal once stopping (once each), SIGKILL once killing
    /// (`stopping`: Some(true)). True if any is left.
    fn tend_escaped(&mut self, stopping: Option<bool>) -> bool {
        if process::no_children() {
            return false;
        }
        let escaped = process::escaped(self.pgid);
        match stopping {
            Some(true) if !escaped.is_empty() => process::kill_job(self.pgid),
            Some(false) => {
                let new: Vec<_> = escaped
                    .iter()
                    .filter(|(pid, _)| self.escaped_stopped.insert(*pid))
                    .copied()
                    .collect();
                process::signal_escaped(&new, self.options.stop_signal);
            }
            Some(true) | None => {}
        }
        !escaped.is_empty()
    }
}

/// Whether `signal` is one of the job-control stops.
fn job_control(signal: Signo) -> bool {
    signal
        .standard()
        .is_some_and(|s| signals::JOB_CONTROL.contains(&s))
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
