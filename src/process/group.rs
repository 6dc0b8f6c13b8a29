//! The command's process group and redlock's other children: signalling the group, the
//! processes redlock adopted as subreaper, and reaping.

use std::process::ExitStatus;

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpid};

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

/// Send `signal` to every process of the group `pgid`; a group already gone is not an error.
pub fn signal_group(pgid: Pid, signal: Signal) {
    let _ = killpg(pgid, signal);
}

/// Whether any process (zombies included) is left in the group `pgid`.
pub fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
