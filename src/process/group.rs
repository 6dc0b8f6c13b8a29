//! The command's process group and redlock's other children: signalling the group, the
//! processes redlock adopts as child subreaper, and reaping.
//!
//! redlock's children are the command, the processes it adopted, and the watchdog. The
//! watchdog is never waited for, counted as adopted or taken for a leftover of the command.

use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::{Pid, getpid};

use super::watchdog;

/// What waiting on the command found.
#[derive(Debug)]
pub(crate) enum Waited {
    /// It ended, with this status.
    Exited(ExitStatus),
    /// A terminal stop signal (Ctrl-Z) stopped it.
    Stopped(Signal),
}

/// A child of redlock that ended or was stopped, if any: the command, or a process redlock
/// adopted as subreaper (or PID 1); None while children remain but none changed. Reaping
/// every child in one place is what keeps adopted orphans from staying zombies without ever
/// taking the command's status from its waiter: this is that waiter.
///
/// It looks first (`waitid` with WNOWAIT) and collects only what is not the watchdog.
pub(crate) fn try_wait_any() -> Result<Option<(Pid, Waited)>, Errno> {
    let changed = loop {
        match waitid(
            Id::All,
            WaitPidFlag::WEXITED
                | WaitPidFlag::WSTOPPED
                | WaitPidFlag::WNOHANG
                | WaitPidFlag::WNOWAIT,
        ) {
            Err(Errno::EINTR) => {}
            other => break other?.pid(),
        }
    };
    match changed {
        None => Ok(None),
        Some(pid) if Some(pid) == watchdog::current_pid() => wait_others(pid),
        Some(pid) => wait_for(pid),
    }
}

/// [`try_wait_any`] when the watchdog ended or stopped while redlock runs (someone killed or
/// stopped it): it is the first child `waitid` reports, in fork order, so every other child is
/// asked by its pid. Left a zombie, its pid is not reused while redlock runs.
fn wait_others(watchdog: Pid) -> Result<Option<(Pid, Waited)>, Errno> {
    // Without /proc, other children could not be told apart from it: redlock has lost track.
    let others = children().ok_or(Errno::ENOENT)?;
    for pid in others.into_iter().filter(|&pid| pid != watchdog) {
        if let Some(found) = wait_for(pid)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Collect the child `pid` if it ended or stopped.
fn wait_for(pid: Pid) -> Result<Option<(Pid, Waited)>, Errno> {
    use std::os::unix::process::ExitStatusExt;
    loop {
        match waitpid(pid, Some(WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG)) {
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
            Err(Errno::EINTR) => {}
            // Gone already, or nothing to report.
            Ok(_) | Err(Errno::ECHILD) => return Ok(None),
            Err(errno) => return Err(errno),
        }
    }
}

/// Make redlock the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER): a process that
/// double-forks out of the command's group is re-parented to redlock instead of to init, so
/// redlock can stop it with the rest of the job. Linux only; elsewhere it is a no-op.
pub(crate) fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Live processes redlock adopted: its children other than those in `known` (the command) and
/// the watchdog, with their process groups. Zombies are left to [`try_wait_any`].
pub(crate) fn adopted(known: &[Pid]) -> Vec<(Pid, Pid)> {
    let me = getpid().as_raw();
    let mut found = Vec::new();
    for pid in children().unwrap_or_default() {
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

/// Whether redlock has no children, the watchdog aside: then nothing is left of the command,
/// in its group or adopted. Where [`adopted`] also reads each child's `stat`, this reads only
/// the list, on the path of every run that ends.
pub(crate) fn no_children() -> bool {
    // The kernel documents the children files as unreliable while children come and go: a read
    // during which another child is reaped can skip a survivor. The answer that lets the run
    // end, "none", is read twice (a few microseconds) to make that vanishingly unlikely.
    let none = || children().is_some_and(|children| children.is_empty());
    none() && none()
}

/// redlock's children (zombies included) but the watchdog, from `/proc/self/task/*/children`
/// (a few tiny files), or from a scan of all of `/proc` where the kernel lacks those files;
/// None without `/proc`.
fn children() -> Option<Vec<Pid>> {
    let watchdog = watchdog::current_pid();
    let mut pids = listed_children().or_else(scanned_children)?;
    pids.retain(|&pid| Some(pid) != watchdog);
    Some(pids)
}

fn listed_children() -> Option<Vec<Pid>> {
    // The kernel has the file or not; the main thread's says which (it outlives every other).
    let main = format!("/proc/self/task/{}/children", getpid());
    if !std::path::Path::new(&main).exists() {
        return None;
    }
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        // A thread that ended since the listing has no file any more, and no children.
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        pids.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .map(Pid::from_raw),
        );
    }
    Some(pids)
}

fn scanned_children() -> Option<Vec<Pid>> {
    let me = getpid().as_raw();
    let pids = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .map(Pid::from_raw)
        .filter(|&pid| stat(pid).is_some_and(|(_, ppid, _)| ppid == me))
        .collect();
    Some(pids)
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
pub(crate) fn signal_adopted(adopted: &[(Pid, Pid)], signal: Signal) {
    for &(pid, pgrp) in adopted {
        if pgrp == pid {
            signal_group(pgrp, signal);
        } else {
            let _ = nix::sys::signal::kill(pid, signal);
        }
    }
}

/// Send `signal` to every process of the group `pgid`; a group already gone is not an error.
pub(crate) fn signal_group(pgid: Pid, signal: Signal) {
    let _ = killpg(pgid, signal);
}

/// Send `signal` to redlock's own process group (redlock included; it takes the signal like
/// any other, on its signal thread).
pub(crate) fn signal_own_group(signal: Signal) {
    let _ = killpg(nix::unistd::getpgrp(), signal);
}

/// Whether any process (zombies included) is left in the group `pgid`.
pub(crate) fn group_alive(pgid: Pid) -> bool {
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

    #[test]
    fn the_two_ways_of_listing_children_agree() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(sleeper.id() as i32);
        // The kernel documents the children files as unreliable while children come and go:
        // other tests' threads end meanwhile and their children move to this process's other
        // threads, and a read can skip an entry then (it flaked once in a loaded run). So:
        // found within a few tries, never missing for good.
        let found = |list: fn() -> Option<Vec<Pid>>| {
            (0..50).any(|_| {
                let seen = list().unwrap().contains(&pid);
                if !seen {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                seen
            })
        };
        assert!(found(listed_children), "not in /proc/self/task/*/children");
        assert!(found(scanned_children), "not found by a scan of /proc");
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
    }
}
