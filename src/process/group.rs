//! The command's process group and redlock's other children: signalling the group, the
//! processes redlock adopts as child subreaper, and reaping.
//!
//! redlock's children are the command, the processes it adopted, and the watchdog. The
//! watchdog is never counted as adopted or taken for a leftover of the command; the reaper
//! collects it like any child if someone kills it, and says so (`run` starts another).

use std::io;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpid};

use super::job::Job;
use super::signo::{self, Change, Signo};
use super::watchdog;

/// What waiting on a child found.
#[derive(Debug)]
pub(crate) enum Waited {
    /// It ended, with this status.
    Exited(ExitStatus),
    /// A signal stopped it (a terminal's Ctrl-Z, or someone's SIGSTOP).
    Stopped(Signo),
}

/// A child of redlock that ended or was stopped, if any: the command, a process redlock
/// adopted as subreaper (or PID 1), or the watchdog (which only someone else can have killed or
/// stopped: the caller tells it by its pid); None while children remain but none changed.
/// Reaping every child in one place is what keeps adopted orphans from staying zombies without
/// ever taking the command's status from its waiter: this is that waiter. ECHILD: no child.
pub(crate) fn try_wait_any() -> io::Result<Option<(Pid, Waited)>> {
    use std::os::unix::process::ExitStatusExt;
    Ok(signo::try_wait(None)?.map(|(pid, change)| {
        let waited = match change {
            Change::Ended(status) => Waited::Exited(ExitStatus::from_raw(status)),
            Change::Stopped(signal) => Waited::Stopped(signal),
        };
        (pid, waited)
    }))
}

/// Make redlock the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER): a process that
/// double-forks out of the command's group is re-parented to redlock instead of to init, so
/// redlock can stop it with the rest of the job. Linux only; elsewhere it is a no-op.
pub(crate) fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// The job's live processes outside the command's group `pgid`, with their groups: those that
/// left it (setsid, setpgid: timeout(1)), also while their parent still runs, and the orphans
/// redlock adopted; the watchdog aside (see `job`). Zombies are left to [`try_wait_any`].
pub(crate) fn escaped(pgid: Pid) -> Vec<(Pid, Pid)> {
    let spare: Vec<Pid> = watchdog::current_pid().into_iter().collect();
    let job = Job {
        group: pgid,
        parent: Some(getpid()),
        spare: &spare,
    };
    let mut found = job.processes();
    found.retain(|&(_, pgrp)| pgrp != pgid);
    found
}

/// SIGKILL the whole job of the command's group `pgid`: the group, what left it and what
/// redlock adopted, frozen first so that nothing forks out of reach (see `job`).
pub(crate) fn kill_job(pgid: Pid) {
    let spare: Vec<Pid> = watchdog::current_pid().into_iter().collect();
    Job {
        group: pgid,
        parent: Some(getpid()),
        spare: &spare,
    }
    .kill();
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

/// Send `signal` to each of the job's processes outside its group ([`escaped`]), one by one: a
/// group they made lists its members each, so none gets it twice.
pub(crate) fn signal_escaped(escaped: &[(Pid, Pid)], signal: impl Into<Signo>) {
    let signal = signal.into();
    for &(pid, _) in escaped {
        let _ = signo::send(pid, false, signal);
    }
}

/// Send `signal` to every process of the group `pgid`; a group already gone is not an error.
pub(crate) fn signal_group(pgid: Pid, signal: impl Into<Signo>) {
    let _ = signo::send(pgid, true, signal.into());
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
    fn escaped_lists_the_jobs_processes_outside_its_group() {
        use std::os::unix::process::CommandExt;
        let mut sleeper = std::process::Command::new("sleep")
            .arg("5")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(sleeper.id() as i32);
        let listed = |group: Pid| escaped(group).iter().any(|&(p, _)| p == pid);
        // A child of this process outside the group asked about, and not in its own group.
        assert!(listed(Pid::from_raw(i32::MAX)));
        assert!(!listed(pid));
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert!(!listed(Pid::from_raw(i32::MAX)), "a reaped child");
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
