//! Every process of the job, from one scan of `/proc`: the members of the command's process
//! group, redlock's children but those spared (the watchdog): the command itself, also once it
//! left its group, and the orphans redlock adopted as subreaper, and every descendant of any of
//! them. A process that calls `setsid` or `setpgid` (timeout(1), `sh -m`, a daemon) leaves the
//! group but not the tree, so it is still the job's: stopped with it, killed with it.
//!
//! Killing the job freezes it first: every process found is SIGSTOPped, and the tree read again
//! until it shows none not yet stopped, so that no process forks a child the kill misses, and
//! none dies early leaving an orphan that the kernel re-parents out of the tree; then all get
//! SIGKILL. A pid is signalled only while its process is found in the tree; a stopped process
//! cannot exit, so its pid is not reused before the SIGKILL.

use std::collections::{HashMap, HashSet};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// How many times the frozen tree is read again, at most, before the kill: each round catches
/// what was forked during the one before.
const FREEZE_ROUNDS: usize = 16;

/// Where the job is: its process group, and the process whose children are its own (redlock:
/// None once redlock is gone), but for `spare`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job<'a> {
    pub(crate) group: Pid,
    pub(crate) parent: Option<Pid>,
    pub(crate) spare: &'a [Pid],
}

/// One line of `/proc/PID/stat`: what the tree needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    pid: Pid,
    ppid: Pid,
    pgrp: Pid,
    /// A zombie (or a process being reaped): nothing left to signal.
    dead: bool,
}

impl Job<'_> {
    /// The live processes of the job, with their process groups, from a scan of `/proc`.
    pub(crate) fn processes(&self) -> Vec<(Pid, Pid)> {
        self.of(&scan())
    }

    /// The live processes of the job among `entries`, with their groups.
    fn of(&self, entries: &[Entry]) -> Vec<(Pid, Pid)> {
        let mut children: HashMap<Pid, Vec<&Entry>> = HashMap::new();
        for entry in entries {
            children.entry(entry.ppid).or_default().push(entry);
        }
        let spared = |pid: Pid| self.spare.contains(&pid) || Some(pid) == self.parent;
        let mut seen = HashSet::new();
        let mut todo: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.pgrp == self.group || Some(e.ppid) == self.parent)
            .filter(|e| !spared(e.pid))
            .collect();
        let mut found = Vec::new();
        while let Some(entry) = todo.pop() {
            if !seen.insert(entry.pid) {
                continue;
            }
            if !entry.dead {
                found.push((entry.pid, entry.pgrp));
            }
            // A zombie's children were re-parented already; a live one's are the job's.
            for child in children.get(&entry.pid).into_iter().flatten() {
                if !spared(child.pid) {
                    todo.push(child);
                }
            }
        }
        found
    }

    /// Stop every process of the job, then SIGKILL them all (see the module's header).
    pub(crate) fn kill(&self) {
        let mut stopped = HashSet::new();
        for _ in 0..FREEZE_ROUNDS {
            let _ = killpg(self.group, Signal::SIGSTOP);
            let new: Vec<Pid> = self
                .processes()
                .into_iter()
                .map(|(pid, _)| pid)
                .filter(|pid| !stopped.contains(pid))
                .collect();
            if new.is_empty() {
                break;
            }
            for pid in new {
                let _ = kill(pid, Signal::SIGSTOP);
                stopped.insert(pid);
            }
        }
        let _ = killpg(self.group, Signal::SIGKILL);
        for pid in stopped {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }
}

/// Every process in `/proc` (those that end during the scan may be missing).
fn scan() -> Vec<Entry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse(pid, &stat)
        })
        .collect()
}

/// An [`Entry`] from the text of `/proc/PID/stat`.
fn parse(pid: i32, stat: &str) -> Option<Entry> {
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Entry {
        pid: Pid::from_raw(pid),
        ppid: Pid::from_raw(ppid),
        pgrp: Pid::from_raw(pgrp),
        dead: matches!(state, "Z" | "X"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i32, ppid: i32, pgrp: i32) -> Entry {
        Entry {
            pid: Pid::from_raw(pid),
            ppid: Pid::from_raw(ppid),
            pgrp: Pid::from_raw(pgrp),
            dead: false,
        }
    }

    fn pids(found: Vec<(Pid, Pid)>) -> Vec<i32> {
        let mut pids: Vec<i32> = found.into_iter().map(|(pid, _)| pid.as_raw()).collect();
        pids.sort();
        pids
    }

    #[test]
    fn the_job_is_the_group_redlocks_children_and_every_descendant() {
        // redlock 10 (its own group 10) with the watchdog 11; the command 20 leads group 20.
        // 21 is in the group; 22 called setsid (group 22) and forked 23; timeout(1) 24 took
        // group 24, and 25 is its child; 30 left for redlock's own group; 40 was adopted;
        // 50 is someone else's.
        let mut entries = vec![
            entry(1, 0, 1),
            entry(10, 1, 10),
            entry(11, 10, 11),
            entry(20, 10, 20),
            entry(21, 20, 20),
            entry(22, 21, 22),
            entry(23, 22, 22),
            entry(24, 20, 24),
            entry(25, 24, 24),
            entry(30, 10, 10),
            entry(40, 10, 40),
            entry(50, 1, 50),
        ];
        let spare = [Pid::from_raw(11)];
        let job = |parent| Job {
            group: Pid::from_raw(20),
            parent,
            spare: &spare,
        };
        let alive = job(Some(Pid::from_raw(10)));
        assert_eq!(pids(alive.of(&entries)), [20, 21, 22, 23, 24, 25, 30, 40]);
        // redlock gone: its children are init's; the group and what descends from it remain.
        entries.retain(|e| e.pid.as_raw() != 10);
        assert_eq!(pids(job(None).of(&entries)), [20, 21, 22, 23, 24, 25]);
        // A zombie is not signalled; its descendants were re-parented (here to init, 1).
        entries = vec![entry(20, 10, 20), entry(21, 20, 20)];
        entries[0].dead = true;
        assert_eq!(pids(alive.of(&entries)), [21]);
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let got = parse(7, "7 (a) b (c)) S 3 5 5 0 -1").unwrap();
        assert_eq!(got, entry(7, 3, 5));
        assert!(parse(8, "8 (z) Z 1 8 8").unwrap().dead);
        assert_eq!(parse(9, "garbage"), None);
    }
}
