//! The etcd cluster fixture itself, against real etcd: three members elect a leader and elect
//! another when it is SIGKILLed; the dead one restarted catches up; what was written survives
//! a restart of every member; compaction forgets old revisions; revoking a lease deletes its
//! keys.

use crate::common::*;

#[test]
fn a_killed_leader_is_replaced_and_rejoins_when_restarted() {
    let mut etcd = EtcdCluster::start();
    let endpoints = etcd.endpoints();
    assert_eq!(endpoints.len(), 3);
    assert_eq!(etcd.url(), format!("etcd://{}", endpoints.join(",")));
    assert!(endpoints.iter().all(|e| e.starts_with("127.0.0.1:")));
    assert!(!endpoints.contains(&"127.0.0.1:2379".to_owned()));

    let old = etcd.leader();
    etcd.put("k1", "before");
    etcd.kill(old);
    let new = etcd.leader();
    assert_ne!(new, old, "the killed member is still named leader");
    // Two of three still make a quorum: reads and writes go on.
    assert_eq!(etcd.get("k1").as_deref(), Some("before"));
    etcd.put("k2", "while it was down");

    etcd.restart(old);
    etcd.wait_healthy();
    // On its own data, as the member it was: not a new member that happened to get its name.
    assert!(etcd.log(old).contains("restarting local member"));
    // Only the restarted member left to answer: a serializable read is its own copy, and
    // it holds what was written while it was dead.
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    for &i in &others {
        etcd.stop(i);
    }
    let read = etcd.etcdctl(["get", "--consistency=s", "--print-value-only", "k2"]);
    assert!(read.status.success(), "{read:?}");
    assert_eq!(read.stdout.trim(), "while it was down");
    for &i in &others {
        etcd.resume(i);
    }
    etcd.wait_healthy();
    etcd.leader();
}

#[test]
fn what_was_written_survives_a_restart_of_every_member() {
    let mut etcd = EtcdCluster::start();
    etcd.put("redlock/a", "1");
    etcd.put("redlock/b", "two words");
    etcd.put("other", "3");
    etcd.del("redlock/a");
    let pid = etcd.pid(0);

    etcd.restart_all();
    assert_ne!(etcd.pid(0), pid, "member 0 was not restarted");
    assert_eq!(
        etcd.get_prefix("redlock/"),
        [("redlock/b".to_owned(), "two words".to_owned())]
    );
    assert_eq!(etcd.get_prefix("").len(), 2);
    etcd.leader();
}

#[test]
fn compaction_forgets_old_revisions_and_revoking_a_lease_deletes_its_keys() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    assert_eq!(etcd.size(), 1);
    assert_eq!(etcd.leader(), 0);

    etcd.put("k", "v1");
    let first = etcd.revision();
    let rev = first.to_string();
    etcd.put("k", "v2");
    let old = etcd.etcdctl(["get", "--rev", &rev, "--print-value-only", "k"]);
    assert_eq!(old.stdout.trim(), "v1", "{old:?}");
    assert_eq!(etcd.compact_to_current(), first + 1);
    let old = etcd.etcdctl(["get", "--rev", &rev, "k"]);
    assert!(
        !old.status.success() && old.stderr.contains("required revision has been compacted"),
        "{old:?}"
    );
    // Again, with nothing written since: no error.
    etcd.compact_to_current();
    assert_eq!(etcd.get("k").as_deref(), Some("v2"));

    let granted = etcd.etcdctl(["lease", "grant", "60"]);
    // `lease 694d7b1c2e3f4a05 granted with TTL(60s)`
    let id = granted.stdout.split_whitespace().nth(1).unwrap().to_owned();
    let put = etcd.etcdctl(["put", "--lease", &id, "held", "by a lease"]);
    assert!(put.status.success(), "{put:?}");
    assert_eq!(etcd.leases(), [id]);
    assert_eq!(etcd.revoke_all_leases(), 1);
    assert!(etcd.leases().is_empty());
    assert_eq!(etcd.get("held"), None);
}
