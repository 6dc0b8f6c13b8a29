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

use super::signo::{self, Signo};

use Signal::{
    SIGABRT, SIGALRM, SIGBUS, SIGCHLD, SIGCONT, SIGFPE, SIGHUP, SIGILL, SIGINT, SIGIO, SIGPIPE,
    SIGPROF, SIGPWR, SIGQUIT, SIGSEGV, SIGSTKFLT, SIGSYS, SIGTERM, SIGTRAP, SIGTSTP, SIGTTIN,
    SIGTTOU, SIGUSR1, SIGUSR2, SIGVTALRM, SIGWINCH, SIGXCPU, SIGXFSZ,
};

/// The standard signals forwarded to the command's group as they are, the command deciding what
/// they mean (a reload, a thread dump, a resize, or its end): every one whose default action
/// ends a process, but TERM (a stop request), and WINCH. The real-time signals (SIGRTMIN to
/// SIGRTMAX) are forwarded too. A fault of redlock's own (SEGV, BUS, FPE, ILL, SYS, ABRT from
/// abort) is not affected: the kernel delivers those to the faulting thread although blocked.
pub(crate) const FORWARDED: [Signal; 22] = [
    SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2,
    SIGPIPE, SIGALRM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO, SIGPWR,
    SIGSYS,
];

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
    /// glibc's signal 32 was ignored at start (see [`Intake::block`]).
    cancel_ignored: bool,
}

impl Intake {
    /// The signals to take, given the stop signal: the forwarded ones and the real-time ones,
    /// TERM and the stop signal, the job-control ones and SIGCONT, SIGCHLD; less those ignored
    /// at start. PIPE counts as not ignored: Rust's runtime ignores it before redlock's code
    /// runs (a write to a closed pipe is then an error, not death), so whether redlock's parent
    /// ignored it cannot be told; and a PIPE redlock's own write provokes is sent to the writing
    /// thread, where it stays pending, never to the signal thread.
    pub(crate) fn new(stop_signal: Signal) -> Self {
        // Read once: /proc/self/status is a few dozen lines the kernel formats on every read.
        let mut ignored = ignored_at_start();
        let cancel = Signo::new(32).expect("32 is a signal number");
        let cancel_ignored = ignored.contains(&cancel);
        ignored.retain(|&signal| signal != Signo::from(SIGPIPE));
        let standard = FORWARDED
            .into_iter()
            .chain(JOB_CONTROL)
            .chain([SIGTERM, stop_signal])
            .map(Signo::from);
        let taken = standard
            .chain(Signo::realtime())
            .filter(|signal| !ignored.contains(signal))
            // SIGCONT continues a stopped process whatever its disposition; taking it is only
            // hearing that it happened. SIGCHLD: the reaper.
            .chain([SIGCONT, SIGCHLD].map(Signo::from));
        Self {
            stop_signal,
            taken: signo::set_of(taken),
            cancel_ignored,
        }
    }

    /// What `signal` (one the intake thread took) asks of redlock.
    pub(crate) fn meaning(&self, signal: Signo) -> Meaning {
        match signal.standard() {
            Some(s) if s == SIGTERM || s == self.stop_signal => Meaning::Stop,
            Some(s) if JOB_CONTROL.contains(&s) => Meaning::Suspend,
            Some(SIGCONT) => Meaning::Continued,
            _ => Meaning::Forward,
        }
    }

    /// Whether `signal` ends a redlock that is still waiting for the lock (there is no command
    /// yet): a stop request, or any signal whose default action would end a bare command, but
    /// those an application defines for itself (USR1, USR2, the real-time ones: a reload
    /// request, say, means nothing before the command runs) and WINCH.
    pub(crate) fn ends_a_wait(&self, signal: Signo) -> bool {
        match self.meaning(signal) {
            Meaning::Stop => true,
            Meaning::Forward => {
                !matches!(signal.standard(), None | Some(SIGUSR1 | SIGUSR2 | SIGWINCH))
            }
            Meaning::Suspend | Meaning::Continued => false,
        }
    }

    /// Block the signals the intake thread takes, in this thread and so in every thread it
    /// starts from now on, and ignore glibc's signal 32, which no thread can take (see
    /// `signo::ignore_cancel_signal`). Call before starting any thread, and before [`start`].
    pub(crate) fn block(&self) -> io::Result<()> {
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&self.taken), None)?;
        signo::ignore_cancel_signal(self.cancel_ignored);
        Ok(())
    }
}

/// The signals ignored in this process, from the `SigIgn` line of `/proc/self/status` (a query
/// that changes nothing, unlike `signal(2)`); none where there is no `/proc`.
fn ignored_at_start() -> Vec<Signo> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| parse_sig_ign(&status))
        .unwrap_or_default()
}

/// The signals in a `/proc/PID/status` text's `SigIgn:` line (hex, bit N-1 for signal N).
fn parse_sig_ign(status: &str) -> Option<Vec<Signo>> {
    let hex = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?
        .trim();
    let mask = u64::from_str_radix(hex, 16).ok()?;
    Some(
        (1..=64)
            .filter(|n| mask & (1 << (n - 1)) != 0)
            .filter_map(Signo::new)
            .collect(),
    )
}

/// Start the intake thread: each signal taken but SIGCHLD goes to `deliver`, and
/// `children_changed` runs on each SIGCHLD (a child ended or stopped; several may coalesce).
pub(crate) fn start(
    intake: Intake,
    deliver: impl Fn(Signo) + Send + 'static,
    mut children_changed: impl FnMut() + Send + 'static,
) -> io::Result<()> {
    let set = intake.taken;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                match signo::wait(&set) {
                    Ok(signal) if signal == Signo::from(SIGCHLD) => children_changed(),
                    Ok(signal) => deliver(signal),
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    // sigwait fails only for a bad set: nothing more would ever come.
                    Err(_) => return,
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
pub(crate) fn stop_self(signal: Signo) {
    let one = signo::set_of([signal]);
    // Unblocked in this thread alone, and raised at it: the stop happens on the way out of
    // `raise`. The other threads keep it blocked, so a second one waits for the intake thread.
    if pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None).is_ok() {
        signo::raise(signal);
        let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&one), None);
    }
}

/// Die of `signal`, as the command did, so that redlock's parent sees a signal death (a shell
/// stops a script whose child died of SIGINT): no core dump (the command dumped its own, if
/// any), the default disposition, unblocked in this thread, raised. Returns only if redlock is
/// still alive: as PID 1 (in a container), the kernel does not let a process kill itself with
/// a signal it has no handler for; the caller then exits 128+N.
pub(crate) fn die_of(signal: Signo) {
    use nix::sys::resource::{Resource, setrlimit};
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    // A real-time signal keeps the disposition redlock was started with: it installs no handler.
    if let Some(standard) = signal.standard() {
        // SAFETY: SIG_DFL installs no handler, so no code of ours can run on a signal.
        let _ = unsafe { nix::sys::signal::signal(standard, nix::sys::signal::SigHandler::SigDfl) };
    }
    let _ = pthread_sigmask(
        SigmaskHow::SIG_UNBLOCK,
        Some(&signo::set_of([signal])),
        None,
    );
    signo::raise(signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intake(stop_signal: Signal) -> Intake {
        Intake {
            stop_signal,
            taken: SigSet::empty(),
            cancel_ignored: false,
        }
    }

    #[test]
    fn what_each_signal_means() {
        let intake = intake(SIGTERM);
        let meaning = |signal: Signal| intake.meaning(signal.into());
        assert_eq!(meaning(SIGTERM), Meaning::Stop);
        for signal in FORWARDED {
            assert_eq!(meaning(signal), Meaning::Forward, "{signal}");
        }
        for signal in JOB_CONTROL {
            assert_eq!(meaning(signal), Meaning::Suspend, "{signal}");
        }
        assert_eq!(meaning(SIGCONT), Meaning::Continued);
        for signal in Signo::realtime() {
            assert_eq!(intake.meaning(signal), Meaning::Forward, "{signal}");
            assert!(!intake.ends_a_wait(signal), "{signal}");
        }
        let ends = |signal: Signal| intake.ends_a_wait(signal.into());
        for signal in [
            SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM, SIGPIPE, SIGXCPU, SIGPWR,
        ] {
            assert!(ends(signal), "{signal}");
        }
        for signal in [SIGUSR1, SIGUSR2, SIGWINCH, SIGTSTP, SIGCONT] {
            assert!(!ends(signal), "{signal}");
        }

        // --stop-signal INT: INT is a stop request, and TERM still is one.
        let int = self::intake(SIGINT);
        assert_eq!(int.meaning(SIGINT.into()), Meaning::Stop);
        assert_eq!(int.meaning(SIGTERM.into()), Meaning::Stop);
        assert_eq!(int.meaning(SIGHUP.into()), Meaning::Forward);
    }

    #[test]
    fn every_signal_that_would_end_redlock_is_taken() {
        // Every signal whose default action ends a process, by the kernel's table (signal(7)):
        // taken, so that none can end redlock with its lock held. PIPE included, although
        // std's runtime ignores it in this test binary as in redlock.
        let mut ignored = ignored_at_start();
        ignored.retain(|&s| s != SIGPIPE.into());
        let ends = Signal::iterator()
            .filter(|&signal| {
                !matches!(
                    signal,
                    SIGCHLD
                        | SIGCONT
                        | Signal::SIGURG
                        | SIGWINCH
                        | Signal::SIGKILL
                        | Signal::SIGSTOP
                ) && !JOB_CONTROL.contains(&signal)
            })
            .map(Signo::from)
            .chain(Signo::realtime());
        let expected: Vec<Signo> = ends
            .chain(JOB_CONTROL.map(Signo::from))
            .chain([SIGWINCH].map(Signo::from))
            .filter(|signal| !ignored.contains(signal))
            .chain([SIGCONT, SIGCHLD].map(Signo::from))
            .collect();
        assert!(Signo::realtime().count() >= 30);
        let taken = Intake::new(SIGTERM).taken;
        for n in 1..=64 {
            let Some(signal) = Signo::new(n) else {
                continue;
            };
            assert_eq!(
                signo::contains(&taken, signal),
                expected.contains(&signal),
                "{signal}"
            );
        }
    }

    #[test]
    fn ignored_signals_are_read_from_sig_ign() {
        let status = "Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t8000000000001003\nSigCgt:\t0\n";
        let set = parse_sig_ign(status).unwrap();
        // Bits 0, 1, 12 and 63: HUP (1), INT (2), PIPE (13) and 64 (SIGRTMAX).
        assert_eq!(
            set,
            [SIGHUP, SIGINT, SIGPIPE]
                .map(Signo::from)
                .into_iter()
                .chain(Signo::new(64))
                .collect::<Vec<_>>()
        );
        assert!(parse_sig_ign("Name:\tx\n").is_none());
    }

    #[test]
    fn an_ignored_signal_is_not_taken_but_pipe_is() {
        // std's runtime ignores SIGPIPE in this test binary, as in redlock: it is taken anyway.
        assert!(ignored_at_start().contains(&SIGPIPE.into()));
        let intake = Intake::new(SIGTERM);
        assert!(intake.taken.contains(SIGPIPE));
        assert!(intake.taken.contains(SIGTERM) && intake.taken.contains(SIGCHLD));
    }
}
