//! Signal intake: one thread takes the forwarded signals and SIGCHLD with `sigwait`, blocked in
//! every other thread, and turns them into supervisor events.
//!
//! No handler is ever installed: a blocked signal waits, pending, for the intake thread. So the
//! command starts with the dispositions redlock was given, and the thread that reaps children
//! is the one that hears signals (one thread fewer to start on every run).

use std::io;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::getpid;

use Signal::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};

/// The signals forwarded to the command's process group.
pub(crate) const FORWARDED: [Signal; 7] =
    [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH];

/// Signals whose disposition in redlock must not reach the command: the forwarded ones, in case
/// redlock was started with one ignored (as `nohup` does), since an ignored signal stays ignored
/// across exec. SIGPIPE, which std's runtime ignores in redlock, std's `Command` resets itself.
pub(crate) const RESET_IN_CHILD: [Signal; 7] = FORWARDED;

/// Whether `signal` asks redlock (and the command) to end.
pub(crate) fn is_terminating(signal: Signal) -> bool {
    matches!(signal, SIGHUP | SIGINT | SIGQUIT | SIGTERM)
}

/// The signals the intake thread takes.
fn taken() -> SigSet {
    let mut set = SigSet::empty();
    for signal in FORWARDED {
        set.add(signal);
    }
    set.add(SIGCHLD);
    set
}

/// Block the signals the intake thread takes, in this thread and so in every thread it starts
/// from now on. Call before starting any thread, and before [`start`].
pub(crate) fn block() -> io::Result<()> {
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&taken()), None)?;
    Ok(())
}

/// Start the intake thread: each forwarded signal goes to `deliver`, and `children_changed` runs
/// on each SIGCHLD (a child ended or stopped; several may coalesce into one).
pub(crate) fn start(
    deliver: impl Fn(Signal) + Send + 'static,
    mut children_changed: impl FnMut() + Send + 'static,
) -> io::Result<()> {
    let set = taken();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminating_signals() {
        assert!(
            is_terminating(SIGTERM)
                && is_terminating(SIGINT)
                && is_terminating(SIGHUP)
                && is_terminating(SIGQUIT)
        );
        assert!(!is_terminating(SIGUSR1) && !is_terminating(SIGWINCH) && !is_terminating(SIGUSR2));
    }
}
