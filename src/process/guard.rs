//! The guard: a tiny process that SIGKILLs the command's group if redlock dies.

use std::io;
use std::os::fd::AsRawFd;

use nix::libc::{self, c_int, c_void};
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use nix::unistd::Pid;

/// A tiny process that SIGKILLs the command's whole process group if redlock dies without
/// saying it is done (the parent-death signal reaches only the command's first process). It
/// lives in its own process group, away from terminal signals.
///
/// It is cloned with `CLONE_VM`, sharing redlock's memory rather than copying it as fork would:
/// a fork copied the page tables and then made every page redlock wrote copy-on-write, about
/// 0.2 ms of every run. Its exit signal is none, so `waitpid(-1)` never sees it: no child of
/// redlock's but the guard means nothing is left of the command (see `group::no_children`).
pub struct Guard {
    pipe: std::io::PipeWriter,
    pid: Pid,
}

/// What the guard needs, leaked: it may outlive every thread of redlock.
struct GuardFds {
    read: c_int,
    write: c_int,
}

/// Stack of the guard for its whole life; its loop needs a few hundred bytes.
const GUARD_STACK: usize = 32 * 1024;

impl Guard {
    /// Start the guard.
    pub fn start() -> io::Result<Self> {
        let (reader, writer) = std::io::pipe()?;
        let fds: &'static GuardFds = Box::leak(Box::new(GuardFds {
            read: reader.as_raw_fd(),
            write: writer.as_raw_fd(),
        }));
        let stack: &'static mut [u8] = Vec::leak(vec![0u8; GUARD_STACK]);
        // The stack grows down: hand over its 16-byte aligned top.
        let top = (stack.as_mut_ptr() as usize + GUARD_STACK) & !15;
        // Every signal stays blocked in the guard, from its first instruction on: it inherits
        // this thread's mask at the clone.
        let all = SigSet::all();
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&all), Some(&mut old))?;
        // SAFETY: `guard` runs on its own leaked stack, reads the leaked `fds`, and calls only
        // async-signal-safe functions; with exit signal 0 it is a "clone child".
        let pid = unsafe {
            libc::clone(
                guard,
                top as *mut c_void,
                libc::CLONE_VM,
                fds as *const GuardFds as *mut c_void,
            )
        };
        let clone_error = io::Error::last_os_error();
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
        if pid == -1 {
            return Err(clone_error);
        }
        let pid = Pid::from_raw(pid);
        // From here, not from the guard, so that no call the guard makes can fail before it is
        // needed (see `guard`).
        let _ = nix::unistd::setpgid(pid, pid);
        drop(reader);
        Ok(Self { pipe: writer, pid })
    }

    /// The guard's pid (a child of redlock, not to be mistaken for an adopted one).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Watch the group `pgid` (or nothing, with None) from now on.
    pub fn watch(&mut self, pgid: Option<Pid>) {
        use std::io::Write;
        let word = pgid.map_or(0, Pid::as_raw).to_ne_bytes();
        let _ = self.pipe.write_all(&word);
    }
}

/// The guard, between clone and its end. It shares redlock's memory, errno included, so it
/// makes no call that can fail while redlock runs: its descriptors are valid (0-2 are open:
/// std's runtime reopens closed ones on `/dev/null`), and the only call that may fail, `kill` on a group already gone,
/// comes after the pipe's end of file, once every thread of redlock has exited.
extern "C" fn guard(data: *mut c_void) -> c_int {
    // SAFETY: `data` is the leaked `GuardFds`.
    let fds = unsafe { &*(data as *const GuardFds) };
    // SAFETY: plain system calls on descriptors of the guard's own table (a copy of redlock's);
    // no allocation, no lock, no thread-local state besides errno (see above).
    unsafe {
        // Stdio closed keeps pipes and terminals free; redlock's write end closed gives the
        // end of file when redlock is gone.
        for fd in [fds.write, 0, 1, 2] {
            libc::close(fd);
        }
        let mut group: libc::pid_t = 0;
        let mut word = [0u8; 4];
        // Four-byte writes to a pipe are atomic: a read returns a whole word or end of file.
        while libc::read(fds.read, word.as_mut_ptr().cast(), 4) == 4 {
            group = i32::from_ne_bytes(word);
        }
        if group > 0 {
            libc::kill(-group, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}
