//! The controlling terminal: whether redlock may hand it to the command, handing it over,
//! taking it back, and its modes.
//!
//! A command in a background process group that reads the terminal is stopped by SIGTTIN, so
//! when redlock's group is the foreground one, the command's group is made the foreground
//! instead (from both sides of the fork, as shells do) and redlock takes it back at the end,
//! and when the command stops (Ctrl-Z), before redlock stops in turn; after `fg` it hands it
//! over again. After `bg` the terminal stays with the shell: the command runs in the
//! background, as a bare command would, and is stopped by SIGTTIN if it reads the terminal.
//!
//! The terminal's modes are saved when it is handed over; if the command is killed (a vi
//! stopped by `--max-runtime`), redlock puts them back, so the shell does not get a raw
//! terminal.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::termios::{SetArg, Termios, tcgetattr, tcsetattr};
use nix::unistd::{Pid, getpgrp, tcgetpgrp, tcsetpgrp};

/// The controlling terminal on stdin, when redlock's process group is its foreground group,
/// with its modes at that moment.
#[derive(Debug, Clone)]
pub(crate) struct Terminal {
    owner: Pid,
    modes: Option<Termios>,
}

impl Terminal {
    /// The terminal redlock may hand to the command: stdin is a tty and we are in the foreground.
    pub(crate) fn foreground() -> Option<Self> {
        let owner = getpgrp();
        match tcgetpgrp(io::stdin()) {
            Ok(fg) if fg == owner => Some(Self {
                owner,
                modes: tcgetattr(io::stdin()).ok(),
            }),
            _ => None,
        }
    }

    /// Whether redlock's group is the terminal's foreground group (again: after `fg`, not after
    /// `bg`).
    pub(crate) fn ours(&self) -> bool {
        tcgetpgrp(io::stdin()).is_ok_and(|fg| fg == self.owner)
    }

    /// Make `pgid` the terminal's foreground group, from redlock's side.
    pub(crate) fn hand_to(&self, pgid: Pid) {
        with_sigttou_blocked(|| {
            let _ = tcsetpgrp(io::stdin(), pgid);
        });
    }

    /// Give the terminal back to redlock's group, if the group `pgid` (the command's) has it, or
    /// a group that no longer exists does (one the command made, an interactive shell's job):
    /// after `bg` the shell has it, and must keep it. True if taken back.
    pub(crate) fn take_back(&self, pgid: Pid) -> bool {
        let has_it = tcgetpgrp(io::stdin()).is_ok_and(|fg| {
            fg == pgid || nix::sys::signal::killpg(fg, None) == Err(nix::errno::Errno::ESRCH)
        });
        if has_it {
            self.hand_to(self.owner);
        }
        has_it
    }

    /// Put back the modes saved when the terminal was handed over, if redlock's group has it.
    pub(crate) fn restore_modes(&self) {
        if let Some(modes) = &self.modes
            && self.ours()
        {
            with_sigttou_blocked(|| {
                let _ = tcsetattr(io::stdin(), SetArg::TCSADRAIN, modes);
            });
        }
    }

    /// A descriptor of the terminal (close-on-exec) for [`take_foreground`] in a forked child.
    pub(super) fn descriptor(&self) -> io::Result<OwnedFd> {
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
