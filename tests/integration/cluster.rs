//! Redis Cluster: the lock lives on the node that owns its slot, found through any seed (MOVED);
//! waiters are woken there; `list` scans every master; renewals follow a slot migration.

use super::topology::*;
use crate::common::*;

#[test]
fn locks_on_the_slot_owner_through_any_seed() {
    let cluster = Cluster::start();
    let dir = TempDir::new();
    let key = "report";
    let slot = cluster.slot(&lock_key(key));
    let owner = cluster.owner(slot, 0);
    let other = (owner + 1) % 3;
    // The only seed given does not own the slot: its MOVED reply leads to the owner.
    let url = cluster.url_of(&[other]);
    let (holder, token) = spawn_holder_at(&url, key, &[], &dir, "a");
    assert_eq!(
        cluster.nodes[owner].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    // Busy for another client; a waiter blocks (BLPOP on the owner) and runs after the release.
    // A plain redis:// URL to a node that does not own the slot: a clear error, nothing run.
    let plain = run_timeout(
        run_sh(&cluster.nodes[other], key, &[], &marker_script(&dir)),
        PATIENCE,
    );
    plain.assert_code(69);
    assert!(
        plain.stderr.contains("use a redis+cluster:// URL"),
        "{}",
        plain.stderr
    );
    assert!(!dir.join("marker").exists());
    let busy = run_timeout(
        run_url(&cluster.url_of(&[0, 1, 2]), key, &[], "true"),
        PATIENCE,
    );
    busy.assert_code(75);
    let waiter = Proc::spawn(run_url(&url, key, &["--wait", "30s"], &marker_script(&dir)));
    wait_until(PATIENCE, "the waiter to block on the owner", || {
        cluster.nodes[owner].info_field("blocked_clients") == 1
    });
    // Another lock lands elsewhere; `list` finds both, on every master.
    let key2 = (0..100)
        .map(|i| format!("other{i}"))
        .find(|k| cluster.owner(cluster.slot(&lock_key(k)), 0) != owner)
        .unwrap();
    let (holder2, _) = spawn_holder_at(&url, &key2, &[], &dir, "b");
    let list = run_timeout(
        {
            let mut cmd = redlock();
            cmd.args(["list", "--url", &url]);
            cmd
        },
        PATIENCE,
    );
    let mut status = redlock();
    status.args(["status", "--url", &url, "--key", key]);
    let status = run_timeout(status, PATIENCE);
    status.assert_code(0);
    assert!(status.stdout.contains(&token), "{}", status.stdout);
    list.assert_code(0);
    assert!(
        list.stdout.contains(key) && list.stdout.contains(&key2),
        "{}",
        list.stdout
    );
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    assert!(dir.join("marker").exists());
    touch(&dir.join("b.go"));
    holder2.finish().assert_code(0);
    assert_eq!(cluster.nodes[owner].get(&lock_key(key)), None);
}

/// The lock's slot moves to another master while the lock is held. While the slot is half
/// moved the lock's scripts get TRYAGAIN (after following ASK) and renewals are retried; once
/// it is moved, renewals follow the MOVED reply to the new owner. Or the holder stops its
/// command with 76. Never two at once.
#[test]
fn renewals_follow_a_slot_migration() {
    let cluster = Cluster::start();
    let dir = TempDir::new();
    let key = "deploy";
    let slot = cluster.slot(&lock_key(key));
    let from = cluster.owner(slot, 0);
    let to = (from + 1) % 3;
    let url = cluster.url_of(&[0, 1, 2]);
    let (mut holder, token) = spawn_holder_at(&url, key, &["--ttl", "3s", "-vv"], &dir, "a");
    cluster.begin_migration(slot, from, to);
    wait_until(PATIENCE, "a renewal refused mid-migration", || {
        holder.stderr_so_far().contains("TRYAGAIN") || !holder.running()
    });
    cluster.finish_migration(slot, from, to);
    assert_eq!(cluster.owner(slot, to), to);
    assert_eq!(
        cluster.nodes[to].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    let renewed = |p: &Proc| p.stderr_so_far().matches("renewed lock").count();
    let before = renewed(&holder);
    wait_until(PATIENCE, "renewals after the migration, or an exit", || {
        renewed(&holder) >= before + 2 || !holder.running()
    });
    let contender = run_timeout(run_url(&url, key, &[], &marker_script(&dir)), PATIENCE);
    touch(&dir.join("a.go"));
    let out = holder.finish();
    eprintln!("holder across the migration:\n{}", out.stderr);
    // Exit 0 means the holder never lost its lease: the contender must have found it busy.
    if out.code() == 0 {
        contender.assert_code(75);
        assert!(!dir.join("marker").exists(), "two commands at once");
        assert_eq!(
            cluster.nodes[to].get(&lock_key(key)),
            None,
            "released on the new owner"
        );
    } else {
        // Lost and stopped in time; the contender may then have run, after it.
        out.assert_code(76);
    }
}

/// The master that holds the lock hands over to its replica (CLUSTER FAILOVER) during a hold:
/// the old master now answers MOVED, renewals follow it to the new one, or the holder stops
/// its command with 76. Never two at once.
#[test]
fn renewals_follow_a_cluster_failover() {
    let cluster = Cluster::start_with(true);
    let dir = TempDir::new();
    let key = "rotate";
    let slot = cluster.slot(&lock_key(key));
    let master = cluster.owner(slot, 0);
    let replica = cluster.replica_of(master);
    let url = cluster.url_of(&[0, 1, 2]);
    // --min-replicas works on a Cluster master too: WAIT goes to the lock's node.
    let out = run_timeout(
        run_url(&url, key, &["--min-replicas", "1"], "true"),
        PATIENCE,
    );
    out.assert_code(0);
    let (mut holder, token) = spawn_holder_at(&url, key, &["--ttl", "3s", "-vv"], &dir, "a");
    cluster.failover(replica, slot);
    assert_eq!(
        cluster.nodes[replica].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    let renewed = |p: &Proc| p.stderr_so_far().matches("renewed lock").count();
    let before = renewed(&holder);
    wait_until(PATIENCE, "renewals after the failover, or an exit", || {
        renewed(&holder) >= before + 2 || !holder.running()
    });
    let contender = run_timeout(run_url(&url, key, &[], &marker_script(&dir)), PATIENCE);
    touch(&dir.join("a.go"));
    let out = holder.finish();
    eprintln!("holder across the failover:\n{}", out.stderr);
    // Exit 0 means the holder never lost its lease: the contender must have found it busy.
    if out.code() == 0 {
        contender.assert_code(75);
        assert!(!dir.join("marker").exists(), "two commands at once");
        assert_eq!(
            cluster.nodes[replica].get(&lock_key(key)),
            None,
            "released on the new master"
        );
    } else {
        // Lost and stopped in time; the contender may then have run, after it.
        out.assert_code(76);
    }
}
