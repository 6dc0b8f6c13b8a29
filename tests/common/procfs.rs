//! Processes as /proc shows them: alive or a zombie, the members of a process group, TCP
//! connections to a port and bytes sent to it unread.

use std::collections::HashSet;
use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use super::{now_ns, wait_until};

/// `(state, pgrp)` from /proc/<pid>/stat, or None if the pid is gone.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses; the fields we want follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

fn live(state: char) -> bool {
    !matches!(state, 'Z' | 'X' | 'x')
}

/// The state letter of `pid` in /proc (`R`, `S`, `T` stopped, `Z` zombie...), None if gone.
pub fn proc_state(pid: i32) -> Option<char> {
    proc_stat(pid).map(|(state, _)| state)
}

/// `pid` is stopped as a job stops: `T`, or, for a shell caught between `vfork` and `exec` (dash
/// vforks each command it runs), `D` waiting on a vforked child that is itself stopped: that
/// shell can stop only once its child has run `exec`, which a stopped child never does.
pub fn job_stopped(pid: i32) -> bool {
    match proc_state(pid) {
        Some('T') => true,
        Some('D') => fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|child| child.parse().ok())
            .any(|child| proc_state(child) == Some('T')),
        _ => false,
    }
}

/// The signals `pid` ignores (the `SigIgn` mask of /proc/<pid>/status, bit N-1 for signal N).
pub fn ignored_signals(pid: i32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

/// The pid exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| live(state))
}

/// Live (non-zombie) members of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((state, pgrp)) = proc_stat(pid)
            && pgrp == pgid
            && live(state)
        {
            pids.push(pid);
        }
    }
    pids
}

pub fn group_alive(pgid: i32) -> bool {
    !group_members(pgid).is_empty()
}

/// Waits until `pid` is gone or a zombie.
#[track_caller]
pub fn wait_pid_dead(pid: i32, timeout: Duration) {
    wait_until(timeout, &format!("pid {pid} to die"), || !pid_alive(pid));
}

/// Polls (every ~2 ms) until process group `pgid` has no live member and returns the wall-clock
/// time (ns since the epoch) at which that was first seen; panics after `timeout`.
#[track_caller]
pub fn wait_group_dead_at(pgid: i32, timeout: Duration) -> i128 {
    let deadline = Instant::now() + timeout;
    loop {
        if !group_alive(pgid) {
            return now_ns();
        }
        if Instant::now() > deadline {
            panic!(
                "process group {pgid} still alive after {timeout:?}: {:?}",
                group_members(pgid)
            );
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Does `pid` have an established TCP connection to 127.0.0.1:`port`?
pub fn has_tcp_connection(pid: i32, port: u16) -> bool {
    tcp_connections(pid, port) > 0
}

/// How many established TCP connections `pid` has to 127.0.0.1:`port`.
pub fn tcp_connections(pid: i32, port: u16) -> usize {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let inodes: HashSet<String> = fds
        .flatten()
        .filter_map(|fd| fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let l = link.to_string_lossy().into_owned();
            l.strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .map(str::to_string)
        })
        .collect();
    let tcp = fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    let want = format!(":{port:04X}");
    tcp.lines()
        .skip(1)
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() > 9 && f[2].ends_with(&want) && f[3] == "01" && inodes.contains(f[9])
        })
        .count()
}

/// Whether bytes sent to 127.0.0.1:`port` wait unread in the kernel (a receive queue of one of
/// its sockets, in /proc/net/tcp). With the listener SIGSTOPped, that is a request sent since.
pub fn unread_at(port: u16) -> bool {
    let want = format!(":{port:04X}");
    let tcp = fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    tcp.lines().skip(1).any(|line| {
        // sl local_address rem_address st tx_queue:rx_queue ...
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 4
            && f[1].ends_with(&want)
            && f[3] == "01"
            && f[4]
                .split_once(':')
                .and_then(|(_, rx)| u64::from_str_radix(rx, 16).ok())
                .is_some_and(|rx| rx > 0)
    })
}

/// redlock's watchdog: its child named `redlock-watch` (a fork of redlock, renamed). A
/// watchdog just forked (a replacement redlock has announced) renames itself a moment later:
/// waited for, within the test patience.
pub fn watchdog_of(redlock: i32) -> i32 {
    let watchdogs = || {
        let mut children = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{redlock}/task"))
            .unwrap()
            .flatten()
        {
            children.extend(
                super::read(&task.path().join("children"))
                    .split_whitespace()
                    .map(|pid| pid.parse::<i32>().unwrap()),
            );
        }
        let named =
            |pid: &i32| super::read(format!("/proc/{pid}/comm").as_ref()).trim() == "redlock-watch";
        children.into_iter().filter(named).collect::<Vec<i32>>()
    };
    let deadline = std::time::Instant::now() + super::PATIENCE;
    loop {
        let found = watchdogs();
        if found.len() == 1 {
            return found[0];
        }
        assert!(
            std::time::Instant::now() < deadline,
            "redlock's watchdogs: {found:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
