//! Test fixtures shared by the integration and chaos suites: a throwaway `redis-server` per
//! test, temp dirs, the redlock command, and polling helpers that synchronise on files the
//! worker scripts write instead of on sleeps.

mod poll;
mod process;
mod procfs;
mod redlock;
mod scripts;
mod server;
mod tempdir;

pub use poll::*;
pub use process::*;
pub use procfs::*;
pub use redlock::*;
pub use scripts::*;
pub use server::*;
pub use tempdir::*;
