//! A 3-member ZooKeeper ensemble split while a holder runs (`--ttl 3s`; 6 s in (d)): the cases
//! of etcd.rs, on ZooKeeper. Members m0, m1, m2; the holder's redlock runs on host c0, a
//! waiter's (`--wait`) on c1. Each case makes the leader it needs (zk_net.rs says how), cuts,
//! and then checks what consensus.rs says.
//!
//! A renewal is a write, which only a leader with a majority commits; a member's answer to a
//! ping (which a follower gives alone) renews nothing. So a holder cut off from a majority is
//! stopped within its lease of its last renewal before the cut, whichever member it is with,
//! and the server ends its session no sooner than that.

use std::time::Duration;

use super::consensus::{self, Case, Expect, Members};
use crate::common::net::Net;
use crate::common::zk_net::ZkNet;

const TTL: Duration = Duration::from_secs(3);

/// Case (d)'s: long enough to ride out the loss of the leader (see it).
const RIDES_OUT_AN_ELECTION: Duration = Duration::from_secs(6);

/// (a) The holder cut off with the leader: the leader, without a majority, drops its clients;
/// the other two elect a new one, which ends the holder's session.
#[test]
fn a_holder_cut_off_with_the_leader_is_stopped() {
    run(consensus::with_the_leader("zookeeper"));
}

/// (b) The holder cut off with a follower only: the follower still answers its pings until it
/// gives its leader up (`syncLimit`), but no renewal, a write, gets through.
#[test]
fn a_holder_cut_off_with_a_follower_is_stopped() {
    run(consensus::with_a_follower("zookeeper"));
}

/// (c) The holder's host cut off from everyone.
#[test]
fn a_holder_cut_off_alone_is_stopped() {
    run(consensus::alone("zookeeper"));
}

/// (d) One member, the leader, cut off from the holder's side: the holder keeps a majority,
/// which elects a new leader (a second after the cut, `syncLimit`, then the election, 0.2 to 0.4
/// s); its session moves with it, and its command runs to its end. With `--ttl 6s`: its last
/// renewal before the cut was up to a third of the ttl before, and its member, which went
/// looking for a leader too, dropped it; it may try the cut-off member first and wait a quarter
/// of the ttl for it. With `--ttl 3s` that left it under 2 s for 2.1 s of work, and it was
/// stopped (76) in 6 runs of 20. docs/zookeeper.md gives the rule.
#[test]
fn a_holder_that_keeps_a_majority_runs_to_its_end() {
    run(consensus::keeping_a_majority("zookeeper"));
}

fn run(case: Case) {
    let Some(net) = Net::new(&case.layout) else {
        return;
    };
    let zk = ZkNet::start(&net, &["m0", "m1", "m2"], case.leader);
    let ttl = match case.expect {
        Expect::Stopped => TTL,
        Expect::RunsThrough => RIDES_OUT_AN_ELECTION,
    };
    // No member renews alone: the last renewal a holder cut off from a majority got was sent
    // before the cut, and its command is stopped before a lease from then ends.
    consensus::run(&net, &zk, &case, ttl, ttl);
}

impl Members for ZkNet<'_> {
    fn url(&self) -> String {
        ZkNet::url(self)
    }

    fn wait_healthy(&self, from: &str) {
        ZkNet::wait_healthy(self, from)
    }
}
