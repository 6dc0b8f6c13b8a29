//! The command: spawned without a shell in its own process group, handed the terminal's
//! foreground when redlock has it, signalled as a group, and killed if redlock dies.

mod group;
mod guard;
pub mod signals;
mod spawn;
mod terminal;

pub use group::{
    Waited, adopted, become_subreaper, group_alive, no_children, signal_adopted, signal_group,
    try_wait_any,
};
pub use guard::Guard;
pub(crate) use spawn::{spawn, spawn_failure_status};
pub(crate) use terminal::Terminal;
