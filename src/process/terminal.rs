//! The controlling terminal: whether redlock may hand it to the command, handing it over, and
//! taking it back.
//!
//! A command in a background process group that reads the terminal is stopped by SIGTTIN, so
//! when redlock's group is the foreground one, the command's group is made the foreground
//! instead (from both sides of the fork, as shells do) and redlock takes it back at the end.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::{Pid, getpgrp, tcgetpgrp, tcsetpgrp};

/// The controlling terminal on stdin, when redlock's process group is its foreground group.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terminal {
    owner: Pid,
}

impl Terminal {
    /// The terminal redlock may hand to the command: stdin is a tty and we are in the foreground.
    pub(crate) fn foreground() -> Option<Self> {
        let owner = getpgrp();
        match tcgetpgrp(io::stdin()) {
            Ok(fg) if fg == owner => Some(Self { owner }),
            _ => None,
        }
    }

    /// Make `pgid` the terminal's foreground group, from redlock's side.
    pub(super) fn hand_to(self, pgid: Pid) {
        with_sigttou_blocked(|| {
            let _ = tcsetpgrp(io::stdin(), pgid);
        });
    }

    /// Give the terminal back to redlock's group.
    pub(crate) fn restore(self) {
        self.hand_to(self.owner);
    }

    /// A descriptor of the terminal (close-on-exec) for [`take_foreground`] in a forked child.
    pub(super) fn descriptor(self) -> io::Result<OwnedFd> {
        io::stdin().as_fd().try_clone_to_owned()
    }
}

/// Make `pgid` the foreground group of the terminal `tty`, from the forked child's side.
/// Async-signal-safe.
pub(super) fn take_foreground(tty: &OwnedFd, pgid: Pid) {
    with_sigttou_blocked(|| {
        let _ = tcsetpgrp(tty, pgid);
    });
}

/// Run `f` with SIGTTOU blocked in this thread: a process outside the foreground group may then
/// call tcsetpgrp (with SIGTTOU at its default, the call would stop it instead).
fn with_sigttou_blocked(f: impl FnOnce()) {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_ok();
    f();
    if blocked && !old.contains(Signal::SIGTTOU) {
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&ttou), None);
    }
}
