//! The process layer: the command and every other process redlock deals with.
//!
//! It owns spawning the command (`std::process::Command` in a process group of its own, with
//! the parent-death signal: `spawn`), the process group and redlock's other children (signalling
//! the group, the processes redlock adopts as child subreaper, waiting for and reaping every
//! child: `group`), the job as a tree of processes, what left the group included (`job`), signal intake (`signals`) and signal numbers nix cannot name, real-time
//! ones (`signo`), handing the terminal's foreground to the command and back (`terminal`), and
//! the watchdog that kills the group if redlock dies (`watchdog`).
//!
//! It may use std, nix, and the crate's `clock` (the watchdog's kill line), `exit` and `report`
//! modules; never `run`, `cli`, `lease` or `lock`, which sit above it.

mod group;
mod job;
pub(crate) mod signals;
mod signo;
mod spawn;
mod terminal;
mod watchdog;

pub(crate) use group::{
    Waited, become_subreaper, escaped, group_alive, kill_job, no_children, signal_escaped,
    signal_group, signal_own_group, try_wait_any,
};
pub(crate) use signo::Signo;
pub(crate) use spawn::{explain_failure, spawn};
pub(crate) use terminal::Terminal;
pub(crate) use watchdog::{
    Watchdog, announce as announce_to_watchdog, current_pid as watchdog_pid,
};
