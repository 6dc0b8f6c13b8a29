//! Starting the command: `clone(CLONE_VM | CLONE_VFORK)` and exec, as `posix_spawn` does, but
//! with the parent-death signal set in between, which `posix_spawn` cannot do.
//!
//! A plain fork copies redlock's page tables (three threads, a few MiB) on every run and every
//! hand-over; the shared-memory child costs a fraction of that. The price is a child that shares
//! our memory until it execs: everything it needs is prepared beforehand, and it makes only
//! async-signal-safe system calls, allocates nothing and never returns.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::libc::{self, c_char, c_int, c_void};
use nix::unistd::Pid;

/// What the child needs, built by the parent before the clone.
struct Prepared {
    file: CString,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    /// Signals to reset to the default action (handlers and SIG_IGN survive until exec).
    reset: &'static [c_int],
    parent: libc::pid_t,
    take_terminal: bool,
    /// Set by the child when it fails before or at exec: the errno.
    failed: AtomicI32,
}

/// Stack for the child until it execs (the parent is suspended meanwhile). `execvpe` may use a
/// little of it for PATH lookups and the script fallback's argument copy.
const CHILD_STACK: usize = 256 * 1024;

/// Start `argv` (looked up in PATH) with `env` (NAME=VALUE strings, the whole environment) in a
/// new process group, dying with SIGKILL if the calling thread dies. `reset` lists the signals
/// whose handlers or SIG_IGN must not reach the command. With `take_terminal`, the child makes
/// its group the terminal's foreground group before exec.
pub fn spawn(
    argv: &[OsString],
    env: &[Vec<u8>],
    reset: &'static [c_int],
    take_terminal: bool,
) -> io::Result<Pid> {
    let nul = |_| io::Error::new(io::ErrorKind::InvalidInput, "nul byte in argument");
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(nul))
        .collect::<io::Result<_>>()?;
    let vars: Vec<CString> = env
        .iter()
        .map(|v| CString::new(v.as_slice()).map_err(nul))
        .collect::<io::Result<_>>()?;
    let Some(file) = args.first().cloned() else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let pointers = |strings: &[CString]| -> Vec<*const c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let mut prepared = Prepared {
        file,
        argv: pointers(&args),
        envp: pointers(&vars),
        reset,
        parent: std::process::id() as libc::pid_t,
        take_terminal,
        failed: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; CHILD_STACK];
    // The stack grows down: hand over its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;

    // No signal handler may run in the child while it shares our memory: block everything
    // around the clone; the child resets dispositions before unblocking.
    // SAFETY: plain signal-mask calls on this thread with valid, initialised sets.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: `child` runs on its own stack, reads `prepared` (alive until the clone returns,
    // which CLONE_VFORK delays until the child has exec'ed or exited), and never returns.
    let pid = unsafe {
        libc::clone(
            child,
            top as *mut c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut prepared as *mut Prepared as *mut c_void,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    drop(stack);
    if pid == -1 {
        return Err(clone_error);
    }
    let pid = Pid::from_raw(pid);
    match prepared.failed.load(Ordering::SeqCst) {
        0 => Ok(pid),
        errno => {
            // It exited without exec'ing; reap it here, nobody else waits for it yet.
            let _ = nix::sys::wait::waitpid(pid, None);
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// The child, between clone and exec. Only async-signal-safe calls; never returns.
extern "C" fn child(data: *mut c_void) -> c_int {
    // SAFETY: `data` is the parent's `Prepared`, alive while the parent is suspended.
    let prepared = unsafe { &*(data as *const Prepared) };
    // SAFETY: raw system calls on values prepared by the parent; no allocation, no locks.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for &signal in prepared.reset {
            libc::sigaction(signal, &default, std::ptr::null_mut());
        }
        let fail = |errno: c_int| -> ! {
            prepared.failed.store(errno.max(1), Ordering::SeqCst);
            libc::_exit(127)
        };
        if libc::setpgid(0, 0) != 0 {
            fail(*libc::__errno_location());
        }
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            fail(*libc::__errno_location());
        }
        // redlock may have died before the prctl; then nobody would ever kill us.
        if libc::getppid() != prepared.parent {
            fail(libc::ESRCH);
        }
        if prepared.take_terminal {
            // SIGTTOU is blocked (everything is): a background group may take the terminal.
            libc::tcsetpgrp(0, libc::getpid());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execvpe(
            prepared.file.as_ptr(),
            prepared.argv.as_ptr(),
            prepared.envp.as_ptr(),
        );
        fail(*libc::__errno_location())
    }
}
