//! The controlling terminal: whether redlock may hand it to the command, and taking it back.

use std::os::fd::BorrowedFd;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::{Pid, getpgrp, tcgetpgrp, tcsetpgrp};

/// The controlling terminal on stdin, when redlock's process group is its foreground group.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    owner: Pid,
}

pub(super) fn stdin_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process; we only pass it to tc*pgrp.
    unsafe { BorrowedFd::borrow_raw(0) }
}

impl Terminal {
    /// The terminal redlock may hand to the command: stdin is a tty and we are in the foreground.
    pub fn foreground() -> Option<Self> {
        let owner = getpgrp();
        match tcgetpgrp(stdin_fd()) {
            Ok(fg) if fg == owner => Some(Self { owner }),
            _ => None,
        }
    }

    /// Give the terminal back to redlock's group. Redlock is in the background by now, so
    /// SIGTTOU is blocked in this thread for the call (a blocked SIGTTOU lets tcsetpgrp through).
    pub fn restore(self) {
        with_sigttou_blocked(|| {
            let _ = tcsetpgrp(stdin_fd(), self.owner);
        });
    }
}

pub(super) fn with_sigttou_blocked(f: impl FnOnce()) {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_ok();
    f();
    if blocked && !old.contains(Signal::SIGTTOU) {
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&ttou), None);
    }
}
