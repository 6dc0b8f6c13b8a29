//! The partition suite: hosts in network namespaces on two switches whose link the test cuts,
//! so that both sides keep running and each side's clients still reach some servers. A 3-member
//! etcd cluster, a 3-member ZooKeeper ensemble, one redis-server, a quorum of three Redis masters, a Sentinel service, a Redis
//! Cluster and a PostgreSQL primary with its standby are split while a holder runs; the
//! resource its commands write to shows whether two ran at once. Needs root
//! (`ip netns`); without it each test says so in one line and returns, except under `CI`,
//! where it fails.
//!
//! `cargo test --locked --test partition` (as root). docs/testing.md has the measured numbers.

// Fixtures shared with the other suites: the redlock binary, temp dirs, etcd's binaries, and
// the network (namespaces on two switches: cut, heal, one host cut, a one-way cut) with an etcd
// cluster on its hosts, which the chaos suite's partition phase uses too.
// This suite uses only a few of them; the allowance stays on this one declaration.
#[allow(dead_code, unused_imports)]
mod common;

// The suite's parts, in tests/partition/.
mod partition {
    // The resource the holders write to, and the check over it.
    pub mod resource;
    // What every case does around its cut: the lock, the resource, redlock on a host.
    pub mod scene;
    // What a case on a consensus store (etcd, ZooKeeper) does around its cut.
    mod consensus;
    // etcd split: the holder with the leader, with a follower, alone; a member cut off.
    mod etcd;
    // ZooKeeper split: the same four cases.
    mod zookeeper;
    // One redis-server split from the holder.
    mod single;
    // A quorum of three Redis masters split: the holder keeps one of them.
    mod quorum;
    // Redis Sentinel split: the master's side and the promoted replica's, --min-replicas.
    mod sentinel;
    // Redis Cluster split: the lock's slot's master with the holder, failed over on the other side.
    mod cluster;
    // PostgreSQL servers on hosts of the net: a primary and its streaming standby.
    pub mod pg;
    // PostgreSQL split, the standby promoted: synchronous, and asynchronous.
    mod postgres;
    // The harness itself: a cut drops packets between the sides and only there; heal undoes it.
    mod net_test;
}
