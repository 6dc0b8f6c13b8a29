//! Signal intake: one thread takes the signals redlock acts on with `sigwait`, blocked in every
//! other thread, and turns them into supervisor events; and the two ways redlock acts on itself
//! with a signal: stopping (job control) and dying of one (as the command did).
//!
//! No handler is ever installed: a blocked signal waits, pending, for the intake thread. So the
//! command starts with the dispositions redlock was given, and the thread that reaps children
//! is the one that hears signals (one thread fewer to start on every run).
//!
//! A signal ignored when redlock starts (`nohup`, a shell's `cmd &`) stays ignored: redlock does
//! not take it, so it never hears it and never forwards it, and the command inherits the
//! ignored disposition, as under a POSIX shell. Every other signal reaches the command with its
//! default disposition: redlock installs no handler, and exec keeps only ignored ones.

use std::io;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::getpid;

use Signal::{
    SIGCHLD, SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1,
    SIGUSR2, SIGWINCH,
};

/// The signals forwarded to the command's group as they are: the command decides what they
/// mean (a reload, a thread dump, a resize, or its end).
pub(crate) const FORWARDED: [Signal; 6] = [SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH];

/// The job-control stops: redlock stops the command's group, then itself, as a shell job would.
pub(crate) const JOB_CONTROL: [Signal; 3] = [SIGTSTP, SIGTTIN, SIGTTOU];

/// What a signal asks of redlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// A stop request (TERM or `--stop-signal`): stop → grace → SIGKILL.
    Stop,
    /// Pass it to the command's group, nothing more.
    Forward,
    /// Job control: stop the command, then redlock.
    Suspend,
    /// redlock was continued after a stop (its own, or someone's SIGSTOP).
    Continued,
}

/// The signals redlock takes, and what each means: decided once, at start, from the stop
/// signal and the dispositions redlock was started with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Intake {
    stop_signal: Signal,
    taken: SigSet,
}

impl Intake {
    /// The signals to take, given the stop signal: the forwarded ones, TERM and the stop signal,
    /// the job-control ones and SIGCONT, SIGCHLD; less those ignored at start.
    pub(crate) fn new(stop_signal: Signal) -> Self {
        let ignored = ignored_at_start();
        let mut taken = SigSet::empty();
        for signal in FORWARDED
            .into_iter()
            .chain(JOB_CONTROL)
            .chain([SIGTERM, stop_signal])
        {
            if !ignored.contains(signal) {
                taken.add(signal);
            }
        }
        // SIGCONT continues a stopped process whatever its disposition; taking it is only
        // hearing that it happened. SIGCHLD: the reaper.
        taken.add(SIGCONT);
        taken.add(SIGCHLD);
        Self { stop_signal, taken }
    }

    /// What `signal` (one the intake thread took) asks of redlock.
    pub(crate) fn meaning(&self, signal: Signal) -> Meaning {
        if signal == SIGTERM || signal == self.stop_signal {
            Meaning::Stop
        } else if JOB_CONTROL.contains(&signal) {
            Meaning::Suspend
        } else if signal == SIGCONT {
            Meaning::Continued
        } else {
            Meaning::Forward
        }
    }

    /// Whether `signal` ends a redlock that is still waiting for the lock (there is no command
    /// yet): a stop request, or HUP, INT or QUIT, whose default action would end a bare command.
    pub(crate) fn ends_a_wait(&self, signal: Signal) -> bool {
        self.meaning(signal) == Meaning::Stop || matches!(signal, SIGHUP | SIGINT | SIGQUIT)
    }

    /// Block the signals the intake thread takes, in this thread and so in every thread it
    /// starts from now on. Call before starting any thread, and before [`start`].
    pub(crate) fn block(&self) -> io::Result<()> {
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&self.taken), None)?;
        Ok(())
    }
}

/// The signals ignored in this process, from the `SigIgn` line of `/proc/self/status` (a query
/// that changes nothing, unlike `signal(2)`); none where there is no `/proc`.
fn ignored_at_start() -> SigSet {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| parse_sig_ign(&status))
        .unwrap_or_else(SigSet::empty)
}

/// The set in a `/proc/PID/status` text's `SigIgn:` line (hex, bit N-1 for signal N).
fn parse_sig_ign(status: &str) -> Option<SigSet> {
    let hex = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?
        .trim();
    let mask = u64::from_str_radix(hex, 16).ok()?;
    let mut set = SigSet::empty();
    for signal in Signal::iterator() {
        if mask & (1 << (signal as i32 - 1)) != 0 {
            set.add(signal);
        }
    }
    Some(set)
}

/// Start the intake thread: each signal taken but SIGCHLD goes to `deliver`, and
/// `children_changed` runs on each SIGCHLD (a child ended or stopped; several may coalesce).
pub(crate) fn start(
    intake: Intake,
    deliver: impl Fn(Signal) + Send + 'static,
    mut children_changed: impl FnMut() + Send + 'static,
) -> io::Result<()> {
    let set = intake.taken;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(signal) = set.wait() {
                if signal == SIGCHLD {
                    children_changed();
                } else {
                    deliver(signal);
                }
            }
        })?;
    Ok(())
}

/// Have the intake thread look at the children now, as if a SIGCHLD had come.
pub(crate) fn check_children() {
    let _ = nix::sys::signal::kill(getpid(), SIGCHLD);
}

/// Stop redlock with `signal` (TSTP, TTIN or TTOU: its default action stops the whole process),
/// as a shell job stops, so the shell that started it sees it stopped by that signal. Returns
/// once redlock is continued, or at once where the kernel discards the stop (a process group
/// with no parent outside it in its session, an "orphaned" one: no shell would continue it).
pub(crate) fn stop_self(signal: Signal) {
    let mut one = SigSet::empty();
    one.add(signal);
    // Unblocked in this thread alone, and raised at it: the stop happens on the way out of
    // `raise`. The other threads keep it blocked, so a second one waits for the intake thread.
    if pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None).is_ok() {
        let _ = nix::sys::signal::raise(signal);
        let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&one), None);
    }
}

/// Die of `signal`, as the command did, so that redlock's parent sees a signal death (a shell
/// stops a script whose child died of SIGINT): no core dump (the command dumped its own, if
/// any), the default disposition, unblocked in this thread, raised. Returns only if redlock is
/// still alive: as PID 1 (in a container), the kernel does not let a process kill itself with
/// a signal it has no handler for; the caller then exits 128+N.
pub(crate) fn die_of(signal: Signal) {
    use nix::sys::resource::{Resource, setrlimit};
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    // SAFETY: SIG_DFL installs no handler, so no code of ours can run on a signal.
    let _ = unsafe { nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigDfl) };
    let mut one = SigSet::empty();
    one.add(signal);
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None);
    let _ = nix::sys::signal::raise(signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_signal_means() {
        let intake = Intake {
            stop_signal: SIGTERM,
            taken: SigSet::empty(),
        };
        assert_eq!(intake.meaning(SIGTERM), Meaning::Stop);
        for signal in FORWARDED {
            assert_eq!(intake.meaning(signal), Meaning::Forward, "{signal}");
        }
        for signal in JOB_CONTROL {
            assert_eq!(intake.meaning(signal), Meaning::Suspend, "{signal}");
        }
        assert_eq!(intake.meaning(SIGCONT), Meaning::Continued);
        assert!(intake.ends_a_wait(SIGTERM) && intake.ends_a_wait(SIGINT));
        assert!(!intake.ends_a_wait(SIGUSR1) && !intake.ends_a_wait(SIGWINCH));

        // --stop-signal INT: INT is a stop request, and TERM still is one.
        let int = Intake {
            stop_signal: SIGINT,
            taken: SigSet::empty(),
        };
        assert_eq!(int.meaning(SIGINT), Meaning::Stop);
        assert_eq!(int.meaning(SIGTERM), Meaning::Stop);
        assert_eq!(int.meaning(SIGHUP), Meaning::Forward);
    }

    #[test]
    fn ignored_signals_are_read_from_sig_ign() {
        let status = "Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000001003\nSigCgt:\t0\n";
        let set = parse_sig_ign(status).unwrap();
        // Bits 0, 1 and 12: HUP (1), INT (2) and PIPE (13).
        assert!(set.contains(SIGHUP) && set.contains(SIGINT) && set.contains(Signal::SIGPIPE));
        assert!(!set.contains(SIGTERM) && !set.contains(SIGQUIT));
        assert!(parse_sig_ign("Name:\tx\n").is_none());
    }

    #[test]
    fn an_ignored_signal_is_not_taken() {
        // std's runtime ignores SIGPIPE in this test binary, as in redlock.
        assert!(ignored_at_start().contains(Signal::SIGPIPE));
        let intake = Intake::new(SIGTERM);
        assert!(!intake.taken.contains(Signal::SIGPIPE));
        assert!(intake.taken.contains(SIGTERM) && intake.taken.contains(SIGCHLD));
    }
}
