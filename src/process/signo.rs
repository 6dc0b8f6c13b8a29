//! Signal numbers as the kernel has them, real-time ones included, and the system calls
//! redlock makes with them.
//!
//! nix 0.32 names signals with an enum that stops at SIGSYS: its `SigSet::wait`, `waitpid`,
//! `waitid` and `killpg` turn a real-time signal (SIGRTMIN to SIGRTMAX, 34 to 64 on Linux with
//! glibc) into EINVAL. A command that died of one left redlock unable to reap it ("lost track of
//! the command") and holding its lock for ever, and one sent to redlock ended its signal thread.
//! So these calls go to libc directly, each once, here; everything else stays with nix.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;
use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;

/// A signal number: a standard signal (which nix's [`Signal`] names) or a real-time one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Signo(i32);

impl Signo {
    /// The number as the kernel has it (a death by it is status 128+N).
    pub(crate) fn raw(self) -> i32 {
        self.0
    }

    /// `n`, if it is a signal a process can be sent (1 to SIGRTMAX).
    pub(crate) fn new(n: i32) -> Option<Self> {
        (1..=libc::SIGRTMAX()).contains(&n).then_some(Self(n))
    }

    /// The standard signal this is, None for a real-time one.
    pub(crate) fn standard(self) -> Option<Signal> {
        Signal::try_from(self.0).ok()
    }

    /// Every real-time signal (SIGRTMIN to SIGRTMAX; glibc keeps the two below SIGRTMIN).
    pub(crate) fn realtime() -> impl Iterator<Item = Signo> {
        (libc::SIGRTMIN()..=libc::SIGRTMAX()).map(Signo)
    }
}

impl From<Signal> for Signo {
    fn from(signal: Signal) -> Self {
        Self(signal as i32)
    }
}

impl fmt::Display for Signo {
    /// `SIGTERM`; `SIGRTMIN+3`, `SIGRTMAX` (as kill -l names them); `signal 32` for the two
    /// glibc keeps for itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
        match self.standard() {
            Some(signal) => f.write_str(signal.as_str()),
            None if self.0 == min => f.write_str("SIGRTMIN"),
            None if self.0 == max => f.write_str("SIGRTMAX"),
            None if self.0 > min && self.0 < max => write!(f, "SIGRTMIN+{}", self.0 - min),
            None => write!(f, "signal {}", self.0),
        }
    }
}

/// glibc's thread-cancellation signal, 32, below SIGRTMIN. Its default action ends the process,
/// and glibc installs its own handler only once a thread is cancelled (redlock never cancels
/// one), so a stray `kill -32` would end redlock on the spot with its lock held. glibc refuses
/// it to sigaction, to the signal mask and to sigwait alike, and nix goes through glibc: only
/// the kernel's own rt_sigaction can set it ignored, so it is called here directly. (33, glibc's
/// set*id signal, has glibc's handler from the start: harmless.)
const SIGCANCEL: i32 = 32;

/// Set by [`ignore_cancel_signal`]: the command gets 32's default action back ([`default_cancel_signal`]).
static CANCEL_IGNORED_HERE: AtomicBool = AtomicBool::new(false);

/// `struct sigaction` as the kernel takes it (x86_64 and arm64 alike): no handler is installed,
/// so no restorer is needed.
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

fn set_cancel_signal(handler: libc::sighandler_t) -> io::Result<()> {
    let action = KernelSigaction {
        handler,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction reads a whole KernelSigaction (the kernel's layout, its sigset the
    // 8 bytes passed as its size) and writes nothing, the old action being null.
    let res = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            SIGCANCEL,
            &action as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            std::mem::size_of::<u64>(),
        )
    };
    match res {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Ignore signal 32 in redlock (see [`SIGCANCEL`]), unless it was ignored already when redlock
/// started (`ignored`), as it then stays for the command too.
pub(crate) fn ignore_cancel_signal(ignored: bool) {
    if !ignored && set_cancel_signal(libc::SIG_IGN).is_ok() {
        CANCEL_IGNORED_HERE.store(true, Ordering::Relaxed);
    }
}

/// In the command, before exec: signal 32 back to its default action where redlock ignored it
/// (an ignored signal stays ignored across exec). One system call: async-signal-safe.
pub(crate) fn default_cancel_signal() -> io::Result<()> {
    if CANCEL_IGNORED_HERE.load(Ordering::Relaxed) {
        set_cancel_signal(libc::SIG_DFL)?;
    }
    Ok(())
}

/// The set of `signals`.
pub(crate) fn set_of(signals: impl IntoIterator<Item = Signo>) -> SigSet {
    // SAFETY: `raw` is initialised by sigemptyset before any other use, and sigaddset only
    // writes inside it (an invalid number is refused with EINVAL, leaving it as it was).
    unsafe {
        let mut raw = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut raw);
        for signal in signals {
            libc::sigaddset(&mut raw, signal.0);
        }
        SigSet::from_sigset_t_unchecked(raw)
    }
}

/// Whether `set` holds `signal` (nix's `SigSet::contains` cannot ask about a real-time one).
#[cfg(test)]
pub(crate) fn contains(set: &SigSet, signal: Signo) -> bool {
    // SAFETY: a valid sigset_t to read, and an integer (an invalid one gives -1, not a member).
    unsafe { libc::sigismember(set.as_ref(), signal.0) == 1 }
}

/// Wait for one of `set` (blocked in the calling thread) to be pending, and take it.
pub(crate) fn wait(set: &SigSet) -> io::Result<Signo> {
    let mut signal = 0;
    // SAFETY: both pointers are valid for the call: a whole sigset_t, and an int to write.
    let res = unsafe { libc::sigwait(set.as_ref(), &mut signal) };
    match res {
        0 => Ok(Signo(signal)),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Send `signal` to the process `pid`, or with `group`, to every process of the group `pid`.
pub(crate) fn send(pid: Pid, group: bool, signal: Signo) -> io::Result<()> {
    let target = if group { -pid.as_raw() } else { pid.as_raw() };
    if target == 0 || target == -1 {
        // kill(0) and kill(-1) mean "my group" and "everyone": never what is meant here.
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: kill takes two integers and touches no memory of ours.
    match unsafe { libc::kill(target, signal.0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Send `signal` to the calling thread (where it is unblocked, so that it is not taken by the
/// signal thread's sigwait instead, as a signal sent to the whole process could be).
pub(crate) fn raise(signal: Signo) {
    // SAFETY: raise takes an integer and touches no memory of ours.
    let _ = unsafe { libc::raise(signal.0) };
}

/// How a child changed, as `waitpid` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// It ended; the wait status, as std's `ExitStatus::from_raw` takes it.
    Ended(i32),
    /// A signal stopped it.
    Stopped(Signo),
}

/// Collect a child that ended or stopped, without blocking: `pid`, or any child (`None`).
/// Ok(None) while none changed; ECHILD when there is no such child.
pub(crate) fn try_wait(pid: Option<Pid>) -> io::Result<Option<(Pid, Change)>> {
    let mut status = 0;
    let pid = pid.map_or(-1, Pid::as_raw);
    loop {
        // SAFETY: `status` is a valid int for waitpid to write.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        match got {
            0 => return Ok(None),
            -1 => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
            got => {
                let change = if libc::WIFSTOPPED(status) {
                    Change::Stopped(Signo(libc::WSTOPSIG(status)))
                } else {
                    Change::Ended(status)
                };
                return Ok(Some((Pid::from_raw(got), change)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::ExitStatus;

    #[test]
    fn real_time_signals_are_named_as_kill_does() {
        let min = libc::SIGRTMIN();
        assert_eq!(Signo(min).to_string(), "SIGRTMIN");
        assert_eq!(Signo(min + 3).to_string(), "SIGRTMIN+3");
        assert_eq!(Signo(libc::SIGRTMAX()).to_string(), "SIGRTMAX");
        assert_eq!(Signo::from(Signal::SIGTERM).to_string(), "SIGTERM");
        assert_eq!(Signo(32).to_string(), "signal 32");
        assert_eq!(Signo::new(0), None);
        assert_eq!(Signo::new(libc::SIGRTMAX() + 1), None);
        assert_eq!(
            Signo::realtime().count(),
            (libc::SIGRTMAX() - min + 1) as usize
        );
    }

    #[test]
    fn sets_hold_real_time_signals() {
        let rt = Signo(libc::SIGRTMIN() + 1);
        let set = set_of([rt, Signal::SIGHUP.into()]);
        assert!(set.contains(Signal::SIGHUP) && !set.contains(Signal::SIGINT));
        assert!(contains(&set, rt) && contains(&set, Signal::SIGHUP.into()));
        assert!(!contains(&set, Signo(rt.0 + 1)));
    }

    #[test]
    fn a_child_killed_by_a_real_time_signal_is_reaped_with_its_status() {
        let rt = Signo(libc::SIGRTMIN() + 2);
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        // Reaped below, by pid: the `Child` is not needed for that.
        drop(child);
        send(pid, true, rt).unwrap();
        let (reaped, change) = loop {
            if let Some(found) = try_wait(Some(pid)).unwrap() {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(reaped, pid);
        let Change::Ended(status) = change else {
            panic!("{change:?}")
        };
        assert_eq!(ExitStatus::from_raw(status).signal(), Some(rt.raw()));
        assert_eq!(
            try_wait(Some(pid)).unwrap_err().raw_os_error(),
            Some(libc::ECHILD)
        );
        assert!(send(Pid::from_raw(0), true, rt).is_err());
    }
}
