//! Test fixtures shared by the integration, chaos and partition suites: a throwaway
//! `redis-server` per test, a fault-injecting proxy before it, etcd clusters, ZooKeeper
//! ensembles and PostgreSQL servers, hosts in network namespaces, temp dirs, the redlock
//! command, and polling helpers that synchronise on files the worker scripts write instead of on
//! sleeps.

mod etcd;
// Hosts in network namespaces on two switches, and etcd members on them: the partition suite's
// and the chaos suite's partition phase. The integration suite uses neither.
#[allow(dead_code)]
pub mod etcd_net;
// ZooKeeper members on such hosts: the partition suite's only.
#[allow(dead_code)]
pub mod net;
mod poll;
mod postgres;
mod process;
mod procfs;
mod proxy;
mod redlock;
mod scripts;
mod server;
mod tempdir;
#[allow(dead_code)]
pub mod zk_net;
mod zookeeper;

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
// Nor ZooKeeper.
#[allow(unused_imports)]
pub use self::zookeeper::*;
