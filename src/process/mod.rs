//! The command: spawned without a shell in its own process group, handed the terminal's
//! foreground when redlock has it, signalled as a group, and killed if redlock dies.

pub mod signals;
pub mod spawn;

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::libc::{self, c_int, c_void};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg, pthread_sigmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, tcgetpgrp, tcsetpgrp};

use crate::exit;

/// The controlling terminal on stdin, when redlock's process group is its foreground group.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    owner: Pid,
}

fn stdin_fd() -> BorrowedFd<'static> {
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

/// Start `argv` in a new process group with `env` added, dying with SIGKILL if redlock dies.
/// Must be called from a thread that lives as long as the child: the parent-death signal
/// fires when the *thread* that started it exits.
pub fn spawn(
    argv: &[OsString],
    env: &[(&str, String)],
    terminal: Option<Terminal>,
) -> io::Result<Pid> {
    let mut vars: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(name, _)| {
            !env.iter()
                .any(|(ours, _)| name.as_bytes() == ours.as_bytes())
        })
        .map(|(name, value)| [name.as_bytes(), b"=", value.as_bytes()].concat())
        .collect();
    vars.extend(
        env.iter()
            .map(|(name, value)| format!("{name}={value}").into_bytes()),
    );
    let take_terminal = terminal.is_some();
    let pid = crate::process::spawn::spawn(
        argv,
        &vars,
        &crate::process::signals::RESET_IN_CHILD,
        take_terminal,
    )?;
    if take_terminal {
        // Also from the parent, as shells do, so the order of the two calls does not matter.
        with_sigttou_blocked(|| {
            let _ = tcsetpgrp(stdin_fd(), pid);
        });
    }
    Ok(pid)
}

/// What waiting on the command found.
#[derive(Debug)]
pub enum Waited {
    /// It ended, with this status.
    Exited(ExitStatus),
    /// A terminal stop signal (Ctrl-Z) stopped it.
    Stopped(Signal),
}

/// A child of redlock that ended or was stopped, if any: the command, or a process redlock
/// adopted as subreaper (or PID 1); None while children remain but none changed. Reaping
/// every child in one place is what keeps adopted orphans from staying zombies without ever
/// taking the command's status from its waiter: this is that waiter.
pub fn try_wait_any() -> Result<Option<(Pid, Waited)>, Errno> {
    use std::os::unix::process::ExitStatusExt;
    loop {
        match waitpid(
            Pid::from_raw(-1),
            Some(WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG),
        ) {
            Ok(WaitStatus::Exited(pid, code)) => {
                let status = ExitStatus::from_raw((code & 0xff) << 8);
                return Ok(Some((pid, Waited::Exited(status))));
            }
            Ok(WaitStatus::Signaled(pid, signal, core)) => {
                let raw = signal as i32 | if core { 0x80 } else { 0 };
                return Ok(Some((pid, Waited::Exited(ExitStatus::from_raw(raw)))));
            }
            Ok(WaitStatus::Stopped(pid, signal)) => {
                return Ok(Some((pid, Waited::Stopped(signal))));
            }
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(errno) => return Err(errno),
        }
    }
}

/// Make redlock the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER): a process that
/// double-forks out of the command's group is re-parented to redlock instead of to init, so
/// redlock can stop it with the rest of the job. Linux only; elsewhere it is a no-op.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Live processes redlock adopted: its children other than those in `known` (the command,
/// the guard), with their process groups. Zombies are left to [`try_wait_any`].
///
/// Reads `/proc/self/task/*/children` (a few tiny files, since this runs on every exit path),
/// and falls back to scanning all of `/proc` where the kernel lacks that file.
pub fn adopted(known: &[Pid]) -> Vec<(Pid, Pid)> {
    let candidates = children().unwrap_or_else(all_pids);
    let me = getpid().as_raw();
    let mut found = Vec::new();
    for pid in candidates {
        let pid = Pid::from_raw(pid);
        if known.contains(&pid) {
            continue;
        }
        if let Some((state, ppid, pgrp)) = stat(pid)
            && ppid == me
            && !matches!(state, 'Z' | 'X')
        {
            found.push((pid, Pid::from_raw(pgrp)));
        }
    }
    found
}

/// Whether redlock has no children at all, the guard aside (a "clone child", which waitid does
/// not see): then nothing is left of the command, in its group or adopted. One system call
/// where [`adopted`] reads a few files, on the path of every run that ends.
pub fn no_children() -> bool {
    // SAFETY: waitid with WNOWAIT | WNOHANG only asks, and writes `info`.
    let found = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    found == -1 && Errno::last() == Errno::ECHILD
}

/// The pids listed in `/proc/self/task/*/children`, or None when the kernel has no such file.
fn children() -> Option<Vec<i32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).ok()?;
        pids.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    Some(pids)
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// (state, parent pid, process group) from `/proc/PID/stat`.
fn stat(pid: Pid) -> Option<(char, i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

/// Send `signal` to adopted processes: to the whole group of one that leads its own group
/// (`setsid`), else to the process alone (its own children are adopted in turn when it dies).
pub fn signal_adopted(adopted: &[(Pid, Pid)], signal: Signal) {
    for &(pid, pgrp) in adopted {
        if pgrp == pid {
            signal_group(pgrp, signal);
        } else {
            let _ = nix::sys::signal::kill(pid, signal);
        }
    }
}

/// The exit status for a command that could not be started, as shells report it.
pub fn spawn_failure_status(err: &io::Error) -> i32 {
    match err.kind() {
        io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::NOT_EXECUTABLE,
    }
}

/// Send `signal` to every process of the group `pgid`; a group already gone is not an error.
pub fn signal_group(pgid: Pid, signal: Signal) {
    let _ = killpg(pgid, signal);
}

/// Whether any process (zombies included) is left in the group `pgid`.
pub fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// A tiny process that SIGKILLs the command's whole process group if redlock dies without
/// saying it is done (the parent-death signal reaches only the command's first process). It
/// lives in its own process group, away from terminal signals.
///
/// It is cloned with `CLONE_VM`, sharing redlock's memory rather than copying it as fork would:
/// a fork copied the page tables and then made every page redlock wrote copy-on-write, about
/// 0.2 ms of every run. Its exit signal is none, so `waitpid(-1)` never sees it: no child of
/// redlock's but the guard means nothing is left of the command (see [`no_children`]).
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
/// makes no call that can fail while redlock runs: its descriptors are valid (0-2 are open,
/// see `crate::startup`), and the only call that may fail, `kill` on a group already gone,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_failures_map_like_shells() {
        assert_eq!(
            spawn_failure_status(&io::Error::from(io::ErrorKind::NotFound)),
            127
        );
        assert_eq!(
            spawn_failure_status(&io::Error::from(io::ErrorKind::PermissionDenied)),
            126
        );
        assert_eq!(
            spawn_failure_status(&io::Error::from_raw_os_error(Errno::ENOEXEC as i32)),
            126
        );
    }

    #[test]
    fn adopted_lists_children_not_known() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(sleeper.id() as i32);
        assert!(adopted(&[]).iter().any(|&(p, _)| p == pid));
        assert!(!adopted(&[pid]).iter().any(|&(p, _)| p == pid));
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert!(
            !adopted(&[]).iter().any(|&(p, _)| p == pid),
            "a reaped child"
        );
    }

    #[test]
    fn child_gets_its_own_group_and_environment() {
        let script =
            r#"read -r _ _ _ _ pgrp _ < /proc/$$/stat; test "$pgrp" = $$ && test "$X" = y"#;
        let argv = ["sh", "-c", script].map(OsString::from);
        let pid = spawn(&argv, &[("X", "y".into())], None).unwrap();
        assert_eq!(waitpid(pid, None), Ok(WaitStatus::Exited(pid, 0)));
        assert!(!group_alive(pid));
    }

    #[test]
    fn failures_to_exec_are_errors_and_leave_no_child() {
        let missing = spawn(&[OsString::from("/nonexistent/redlock-test")], &[], None).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let plain = std::env::temp_dir().join(format!("redlock-plain-{}", std::process::id()));
        std::fs::write(&plain, "echo not executable\n").unwrap();
        let not_executable = spawn(&[plain.clone().into_os_string()], &[], None).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert_eq!(not_executable.kind(), io::ErrorKind::PermissionDenied);
        let nul = spawn(&[OsString::from("a\0b")], &[], None).unwrap_err();
        assert_eq!(nul.kind(), io::ErrorKind::InvalidInput);
    }
}
