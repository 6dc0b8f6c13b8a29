//! Test fixtures shared by the integration and chaos suites: a throwaway `redis-server` per
//! test, a fault-injecting proxy before it, etcd clusters and PostgreSQL servers, temp dirs, the
//! redlock command, and polling helpers that synchronise on files the worker scripts write
//! instead of on sleeps.

mod etcd;
mod poll;
mod postgres;
mod process;
mod procfs;
mod proxy;
mod redlock;
mod scripts;
mod server;
mod tempdir;

// The chaos suite starts no etcd: its allowance (on `mod common`) is for dead code only.
#[allow(unused_imports)]
pub use self::etcd::*;
pub use self::poll::*;
// Nor PostgreSQL.
#[allow(unused_imports)]
pub use self::postgres::*;
pub use self::process::*;
pub use self::procfs::*;
pub use self::proxy::*;
pub use self::redlock::*;
pub use self::scripts::*;
pub use self::server::*;
pub use self::tempdir::*;
