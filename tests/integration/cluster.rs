//! Redis Cluster: the lock lives on the node that owns its slot, found through any seed (MOVED);
//! waiters are woken there; `list` scans every master; renewals follow a slot migration and a
//! failover to the new owner; a
//! cluster URL to a standalone server treats it as the one node; a dead slot owner is named.

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
    let (holder, token) = Redlock::run_at(&url).key(key).hold(&dir, "a");
    assert_eq!(
        cluster.nodes[owner].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    // Busy for another client; a waiter blocks (BLPOP on the owner) and runs after the release.
    // A plain redis:// URL to a node that does not own the slot: a clear error, nothing run.
    Redlock::run(&cluster.nodes[other])
        .key(key)
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("use a redis+cluster:// URL")
        .output();
    assert!(!dir.join("marker").exists());
    Redlock::run_at(&cluster.url_of(&[0, 1, 2]))
        .key(key)
        .sh("true")
        .status(75)
        .output();
    let waiter = Redlock::run_at(&url)
        .key(key)
        .wait("30s")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the waiter to block on the owner", || {
        cluster.nodes[owner].info_field("blocked_clients") == 1
    });
    // Another lock lands elsewhere; `list` finds both, on every master.
    let key2 = (0..100)
        .map(|i| format!("other{i}"))
        .find(|k| cluster.owner(cluster.slot(&lock_key(k)), 0) != owner)
        .unwrap();
    let (holder2, _) = Redlock::run_at(&url).key(&key2).hold(&dir, "b");
    Redlock::admin_at("list", &url)
        .status(0)
        .stdout_contains(key)
        .stdout_contains(&key2)
        .output();
    Redlock::admin_at("status", &url)
        .key(key)
        .status(0)
        .stdout_contains(&token)
        .output();
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    assert!(dir.join("marker").exists());
    touch(&dir.join("b.go"));
    holder2.finish().assert_code(0);
    assert_eq!(cluster.nodes[owner].get(&lock_key(key)), None);
}

/// The lock's slot moves to another master while the lock is held. While the slot is half
/// moved a renewal follows ASK to the importing node, which has none of redlock's scripts
/// cached yet: it renews there (the renewal's keys all moved), or, for a script some of whose
/// keys are not there, gets TRYAGAIN and is retried; once it is moved, renewals follow the
/// MOVED reply to the new owner, which the lock's expiry there shows. The holder keeps its
/// lease throughout: a contender finds the lock busy, and the command runs to its end (0).
#[test]
fn renewals_follow_a_slot_migration() {
    let cluster = Cluster::start();
    let dir = TempDir::new();
    let key = "deploy";
    let slot = cluster.slot(&lock_key(key));
    let from = cluster.owner(slot, 0);
    let to = (from + 1) % 3;
    let url = cluster.url_of(&[0, 1, 2]);
    let (mut holder, token) = Redlock::run_at(&url)
        .key(key)
        .ttl("3s")
        .arg("-vv")
        .hold(&dir, "a");
    let renewed = |p: &Proc| p.stderr_so_far().matches("renewed lock").count();
    let before = renewed(&holder);
    cluster.begin_migration(slot, from, to);
    wait_until(
        PATIENCE,
        "a renewal mid-migration, renewed or refused",
        || {
            let so_far = holder.stderr_so_far();
            so_far.contains("TRYAGAIN") || renewed(&holder) > before || !holder.running()
        },
    );
    cluster.finish_migration(slot, from, to);
    assert_eq!(cluster.owner(slot, to), to);
    assert_eq!(
        cluster.nodes[to].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    // MIGRATE left no copy on the old owner, which answers MOVED now: only a renewal that
    // followed it raises the expiry on the new owner.
    wait_for_renewal_on(&cluster.nodes[to], key, &mut holder);
    Redlock::run_at(&url)
        .key(key)
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    touch(&dir.join("a.go"));
    let out = holder.finish();
    eprintln!("holder across the migration:\n{}", out.stderr);
    out.assert_code(0);
    assert!(!dir.join("marker").exists(), "two commands at once");
    assert_eq!(
        cluster.nodes[to].get(&lock_key(key)),
        None,
        "released on the new owner"
    );
}

/// The master that holds the lock hands over to its replica (CLUSTER FAILOVER) during a hold
/// under --min-replicas: the old master now answers MOVED, and renewals follow it to the new
/// one (the lock's expiry there rises), whose replica, the old master, acknowledges them. The
/// holder keeps its lease throughout: a contender finds the lock busy, and the command runs to
/// its end (0).
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
    Redlock::run_at(&url)
        .key(key)
        .args(["--min-replicas", "1"])
        .sh("true")
        .status(0)
        .output();
    // Renewals with WAIT behind them (--min-replicas) follow MOVED like any request: after the
    // failover the old master follows the new one and acknowledges them.
    let (mut holder, token) = Redlock::run_at(&url)
        .key(key)
        .ttl("3s")
        .args(["--min-replicas", "1", "-vv"])
        .hold(&dir, "a");
    cluster.failover(replica, slot);
    assert_eq!(
        cluster.nodes[replica].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    // Now a master, it takes no writes from the old one: a rise of its expiry is a renewal's.
    wait_for_renewal_on(&cluster.nodes[replica], key, &mut holder);
    Redlock::run_at(&url)
        .key(key)
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    touch(&dir.join("a.go"));
    let out = holder.finish();
    eprintln!("holder across the failover:\n{}", out.stderr);
    out.assert_code(0);
    assert!(!dir.join("marker").exists(), "two commands at once");
    assert_eq!(
        cluster.nodes[replica].get(&lock_key(key)),
        None,
        "released on the new master"
    );
}

#[test]
fn a_cluster_url_to_a_standalone_server_treats_it_as_the_one_node() {
    // `run` works there (no MOVED ever comes); `list`, `status` and `release` do too: CLUSTER
    // SLOTS is refused ("cluster support disabled") and the server is the one node.
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let url = format!("redis+cluster://127.0.0.1:{}", redis.port());
    let (holder, token) = Redlock::run_at(&url).key("solo").hold(&dir, "a");
    Redlock::admin_at("list", &url)
        .status(0)
        .stdout_contains("solo\t")
        .stderr("")
        .output();
    Redlock::admin_at("status", &url)
        .key("solo")
        .status(0)
        .stdout_contains(&token)
        .output();
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    assert_eq!(redis.get(&lock_key("solo")), None);
}

/// The master that owns the lock's slot dies, and no failover has happened yet: the seeds
/// still send the lock there (MOVED). A contender says it cannot reach that master, a failure
/// `--wait` rides out; it said the seed had "answered with an error: Moved".
#[test]
fn a_dead_slot_owner_is_named_not_the_seed_that_points_at_it() {
    let mut cluster = Cluster::start();
    let key = "dead";
    let owner = cluster.owner(cluster.slot(&lock_key(key)), 0);
    let other = (owner + 1) % 3;
    let port = cluster.nodes[owner].port();
    cluster.nodes[owner].kill();
    let out = Redlock::run_at(&cluster.url_of(&[other]))
        .key(key)
        .sh("true")
        .status(69)
        .any_stderr()
        .output();
    // Within the cluster's node timeout (1 s) the seeds still name the dead owner; past it
    // the cluster is down: either way the failure is the owner's, not the seed's.
    assert!(
        !out.stderr.contains("Moved")
            && (out
                .stderr
                .contains(&format!("cannot reach Redis at 127.0.0.1:{port}"))
                || out.stderr.contains("CLUSTERDOWN")),
        "{}",
        out.stderr
    );
}
