//! The ZooKeeper ensemble fixture itself, against real ZooKeeper: three members elect a leader
//! and elect another when it is SIGKILLed, writes going on; the dead one restarted holds what
//! was written meanwhile; what was written survives a restart of every member; a SIGSTOPped
//! majority fails writes within a bound until it is resumed. And the fixture's own client
//! beside ZooKeeper's, on a standalone server.

use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn a_killed_leader_is_replaced_and_rejoins_when_restarted() {
    let mut zk = ZkEnsemble::start();
    let endpoints = zk.endpoints();
    assert_eq!(zk.size(), 3);
    assert_eq!(zk.url(), format!("zk://{}", endpoints.join(",")));
    assert!(endpoints.iter().all(|e| e.starts_with("127.0.0.1:")));
    assert!(!endpoints.contains(&"127.0.0.1:2181".to_owned()));

    let old = zk.leader();
    let mntr = zk.four_letter(old, "mntr").unwrap();
    assert!(mntr.contains("zk_server_state\tleader"), "{mntr}");
    assert!(mntr.contains("zk_synced_followers\t2"), "{mntr}");
    zk.create("/redlock", "");
    zk.create("/redlock/a", "before");
    let pid = zk.pid(old);
    zk.kill(old);
    let new = zk.leader();
    assert_ne!(new, old, "the killed member is still named leader");
    // Two of three still make a quorum: reads and writes go on.
    assert_eq!(zk.get("/redlock/a").as_deref(), Some("before"));
    zk.create("/redlock/b", "while it was down");

    zk.restart(old);
    assert_ne!(zk.pid(old), pid);
    // As the member it was, on its own data: it read back what it had logged before it was
    // killed (a new member's empty snapshot says `highest zxid is 0x0`).
    let log = zk.log(old);
    assert_eq!(log.matches("Starting quorum peer").count(), 2, "{log}");
    let loaded = log.lines().rfind(|l| l.contains("Snapshot loaded"));
    assert!(
        loaded.is_some_and(|l| !l.contains("highest zxid is 0x0,")),
        "{loaded:?}"
    );
    // Its own copy, with no sync: it holds what was written while it was dead, as the others do.
    let mut own = zk.client(old);
    let (data, stat) = own
        .get("/redlock/b")
        .unwrap()
        .expect("/redlock/b on the restarted one");
    assert_eq!(data, b"while it was down");
    assert_eq!(Some(stat), zk.stat("/redlock/b"));
    assert_eq!(own.ls("/redlock").unwrap(), ["a", "b"]);
}

#[test]
fn what_was_written_survives_a_restart_of_every_member() {
    let mut zk = ZkEnsemble::start();
    zk.create("/r", "");
    zk.create("/r/a", "1");
    zk.create("/r/b", "two words");
    zk.set("/r/b", "three words now");
    zk.create("/other", "3");
    assert!(zk.delete("/r/a"));
    assert!(!zk.delete("/r/a"), "deleted twice");
    let before = zk.stat("/r/b").unwrap();
    let pids: Vec<i32> = (0..3).map(|i| zk.pid(i)).collect();

    zk.restart_all();
    assert!(
        (0..3).all(|i| zk.pid(i) != pids[i]),
        "a member was not restarted"
    );
    assert_eq!(zk.ls("/r"), ["b"]);
    assert_eq!(zk.get("/r/b").as_deref(), Some("three words now"));
    assert_eq!(zk.stat("/r/b"), Some(before));
    assert_eq!(zk.ls("/"), ["other", "r", "zookeeper"]);
    zk.leader();
}

/// Stops `stopped` (a majority), and checks that a write on a session of the member left fails,
/// not by the client's own 5 s timeout but as the member gives up on its quorum (after 2 s:
/// `syncLimit`), and that it then grants no session; resumes them and writes.
fn majority_stopped(zk: &mut ZkEnsemble, stopped: &[usize], name: &str) {
    let left = (0..3).find(|i| !stopped.contains(i)).unwrap();
    let mut session = zk.client(left);
    for &i in stopped {
        zk.stop(i);
    }
    let started = Instant::now();
    let failed = session.create(&format!("/{name}-stopped"), b"no quorum");
    let took = started.elapsed();
    let err = failed.expect_err("a write went through with a majority stopped");
    assert!(
        took < Duration::from_millis(4500),
        "the write failed after {took:?}: {err}"
    );
    let err = zk
        .try_create("/later", "")
        .expect_err("a session with no quorum");
    assert!(err.contains("no live member granted a session"), "{err}");
    for &i in stopped {
        zk.resume(i);
    }
    zk.wait_healthy();
    // The write that failed may yet have been committed (its outcome was unknown): another.
    zk.create(&format!("/{name}-resumed"), "");
    assert_eq!(zk.get(&format!("/{name}-resumed")).as_deref(), Some(""));
}

#[test]
fn a_stopped_majority_fails_writes_in_time_until_resumed() {
    let mut zk = ZkEnsemble::start();
    // The leader left alone with no follower.
    let leader = zk.leader();
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    majority_stopped(&mut zk, &followers, "leader-alone");
    // A follower left alone with no leader.
    let leader = zk.leader();
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let others: Vec<usize> = (0..3).filter(|&i| i != follower).collect();
    majority_stopped(&mut zk, &others, "follower-alone");
}

#[test]
fn a_standalone_member_and_the_fixture_client_beside_zookeepers_own() {
    let zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        tick_ms: 100,
        extra_config: vec!["maxSessionTimeout=3000".to_owned()],
        tls: false,
    });
    assert_eq!(zk.size(), 1);
    assert_eq!(zk.leader(), 0);
    let conf = zk.four_letter(0, "conf").unwrap();
    assert!(conf.contains("tickTime=100"), "{conf}");
    assert!(conf.contains("minSessionTimeout=200"), "{conf}");
    assert!(conf.contains("maxSessionTimeout=3000"), "{conf}");
    let srvr = zk.four_letter(0, "srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");

    let mut c = zk.client(0);
    assert_ne!(c.session_id(), 0);
    assert_eq!(c.get("/nothing").unwrap(), None);
    assert_eq!(c.stat("/nothing").unwrap(), None);
    assert!(c.ls("/nothing").unwrap_err().is(ZkError::NO_NODE));
    c.create("/p", b"").unwrap();
    c.create("/p/c", b"\x00binary\xff").unwrap();
    assert!(c.create("/p", b"").unwrap_err().is(ZkError::NODE_EXISTS));
    assert!(c.delete("/p").unwrap_err().is(ZkError::NOT_EMPTY));
    let (data, created) = c.get("/p/c").unwrap().unwrap();
    assert_eq!(data, b"\x00binary\xff");
    assert_eq!((created.version, created.data_length), (0, 8));
    assert_eq!(
        (created.czxid, created.ctime),
        (created.mzxid, created.mtime)
    );
    assert_eq!((created.ephemeral_owner, created.num_children), (0, 0));
    assert_eq!((created.cversion, created.aversion), (0, 0));
    let parent = c.stat("/p").unwrap().unwrap();
    assert_eq!((parent.num_children, parent.cversion), (1, 1));
    assert_eq!(parent.pzxid, created.czxid);
    let changed = c.set("/p/c", b"new").unwrap();
    assert_eq!((changed.version, changed.data_length), (1, 3));
    assert!(changed.mzxid > created.mzxid && changed.czxid == created.czxid);
    assert!(changed.mtime >= created.mtime);

    // ZooKeeper's own client reads what this one wrote, and the other way round.
    let out = zk.zkcli(&["get", "/p/c"]);
    assert!(
        out.status.success() && out.stdout.lines().any(|l| l == "new"),
        "{out:?}"
    );
    let out = zk.zkcli(&["create", "/from-cli", "hi"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(c.get("/from-cli").unwrap().unwrap().0, b"hi");
    c.delete("/p/c").unwrap();
    assert_eq!(zk.ls("/p"), Vec::<String>::new());
    assert_eq!((zk.get("/p/c"), zk.stat("/p/c")), (None, None));
}
