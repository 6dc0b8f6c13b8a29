//! A 3-member etcd cluster split while a holder runs (`--ttl 3s`). Members m0, m1, m2; the
//! holder's redlock runs on host c0, a waiter's (`--wait`) on c1. Each case puts leadership
//! where it needs it with `etcdctl move-leader`, cuts, and then checks what consensus.rs says.

use std::time::Duration;

use super::consensus::{self, Case, Members};
use crate::common::etcd_net::{ELECTION_MS, EtcdNet};
use crate::common::net::Net;

const TTL: Duration = Duration::from_secs(3);

/// (a) The holder cut off with the leader: the leader is in a minority and steps down; the
/// other two elect a new one, on which the lease runs out.
#[test]
fn a_holder_cut_off_with_the_leader_is_stopped() {
    run(consensus::with_the_leader("etcd"));
}

/// (b) The holder cut off with a follower only: that follower has no leader and answers
/// nothing (redlock asks for a leader with every request), so no keep-alive gets through.
#[test]
fn a_holder_cut_off_with_a_follower_is_stopped() {
    run(consensus::with_a_follower("etcd"));
}

/// (c) The holder's host cut off from everyone.
#[test]
fn a_holder_cut_off_alone_is_stopped() {
    run(consensus::alone("etcd"));
}

/// (d) One member, the leader, cut off from the holder's side: the holder keeps a majority,
/// which elects a new leader within the lease; the command runs to its end.
#[test]
fn a_holder_that_keeps_a_majority_runs_to_its_end() {
    run(consensus::keeping_a_majority("etcd"));
}

fn run(case: Case) {
    let Some(net) = Net::new(&case.layout) else {
        return;
    };
    let etcd = EtcdNet::start(&net, &["m0", "m1", "m2"]);
    etcd.move_leader(case.leader);
    // A leader cut off with the holder may still renew its lease until it steps down, an
    // election timeout after the cut.
    let bound = TTL + Duration::from_millis(ELECTION_MS);
    consensus::run(&net, &etcd, &case, TTL, bound);
}

impl Members for EtcdNet<'_> {
    fn url(&self) -> String {
        EtcdNet::url(self)
    }

    fn wait_healthy(&self, from: &str) {
        EtcdNet::wait_healthy(self, from)
    }
}
