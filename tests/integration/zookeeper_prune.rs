//! Nothing lives for ever on ZooKeeper without TTL nodes (the server's default): a lock name
//! unused for the record's lifetime (40 days) by the server's clock leaves every node once
//! another name's release prunes (one in 16, at random); a name younger than that, one with an
//! entry (a run holds or waits) or a child redlock did not make, a node of another stem or
//! folder, and one not named as a lock, stay. A name taken again gets a larger token. The
//! standalone member writes the names with its wall clock moved 41 days back by libfaketime,
//! then is restarted on its data with the host's clock, which the releases that prune see.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::*;

const DAY_MS: i64 = 24 * 3600 * 1000;

/// At most this many releases of another name until one has pruned: a release prunes with
/// probability 1/16, so 200 all miss about once in 400,000 tests.
const RELEASES: usize = 200;

/// The members' session bounds: up to 60 s, for [`TTL`].
const SESSIONS: &str = "maxSessionTimeout=60000";

/// The runs' `--ttl`: 5 s for a take (a third of it), room for a loaded machine.
const TTL: &str = "15s";

/// The fencing token of one run of `redlock run --key KEY ARGS` at `url`.
fn token_of(url: &str, key: &str, args: &[&str]) -> i64 {
    let out = Redlock::run_at(url)
        .key(key)
        .ttl(TTL)
        .args(args)
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout() // the token, parsed here
        .output();
    out.stdout.trim().parse().unwrap()
}

/// The host's clock, in ms since the epoch.
fn host_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Every node under `path` (itself first), with its children's names: what must not change.
fn tree(zk: &ZkEnsemble, path: &str) -> Vec<(String, Vec<String>)> {
    let children = zk.ls(path);
    let mut nodes = vec![(path.to_owned(), children.clone())];
    for child in children {
        nodes.extend(tree(zk, &format!("{path}/{child}")));
    }
    nodes
}

#[test]
fn a_name_unused_for_40_days_by_the_servers_clock_leaves_no_node() {
    let mut zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        extra_config: vec![SESSIONS.to_owned()],
        ..ZkOpts::default()
    });
    let url = zk.url();
    let dir = TempDir::new();
    // What follows is written 41 days ago, by the server's clock: its nodes say so.
    zk.restart_with_clock(0, Some("-41d"));
    zk.create("/probe", "");
    let then = zk.stat("/probe").unwrap().mtime;
    assert!(
        then < host_ms() - 40 * DAY_MS,
        "the member's clock is not moved: {then}"
    );
    // Every node a name leaves: the record and its counters (a success, a busy run, a lost
    // one), and `fence` from a forced release.
    let mut tokens = vec![
        token_of(&url, "old", &[]),
        token_of(&url, "old", &["--limit", "2"]),
    ];
    let (holder, _) = Redlock::run_at(&url).key("old").ttl(TTL).hold(&dir, "h");
    Redlock::run_at(&url)
        .key("old")
        .ttl(TTL)
        .sh("true")
        .status(75)
        .any_stderr()
        .output();
    let forced = Redlock::admin_at("release", &url)
        .key("old")
        .args(["--force"])
        .stdout_contains("fencing counter now ")
        .output();
    tokens.push(
        forced
            .stdout
            .rsplit("fencing counter now ")
            .next()
            .unwrap()
            .trim()
            .trim_end_matches(')')
            .parse()
            .unwrap(),
    );
    assert_eq!(
        holder
            .finish_within(std::time::Duration::from_secs(20))
            .code(),
        76
    );
    let old = zk.ls("/redlock:{old}");
    for child in [
        "record",
        "count-success",
        "count-busy",
        "count-lock_lost",
        "fence",
    ] {
        assert!(old.contains(&child.to_owned()), "{child} not in {old:?}");
    }
    // Names that must stay however old: one with an entry's node (a holder of 41 days), one
    // with a stranger's child, one of another folder and one of another stem, and a node of
    // the folder not named as a lock.
    token_of(&url, "held", &[]);
    let entry = "lock-0b9c7e4e-5a2e-4f0e-9d7c-2b1e3c4d5e6f-0000000099";
    zk.create(&format!("/redlock:{{held}}/{entry}"), "");
    token_of(&url, "foreign", &[]);
    zk.create("/redlock:{foreign}/x", "");
    token_of(&url, "old", &["--prefix", "jobs/"]);
    token_of(&url, "old", &["--prefix", "other:"]);
    zk.create("/redlock:weird", "");
    zk.create("/redlock:weird/record", "");
    // Nodes made by hand, named as redlock names a lock, shaped as no lock redlock leaves:
    // with data and no child; with a child named as the record's that is not a record; a name
    // no run can have.
    zk.create("/redlock:{handmade}", "hand-made configuration, keep me");
    zk.create("/redlock:{fakerec}", "");
    zk.create("/redlock:{fakerec}/record", "not json at all");
    zk.create("/redlock:{}", "");
    zk.create("/redlock:{}/record", r#"{"runs":[]}"#);
    let kept = [
        "/redlock:{held}",
        "/redlock:{foreign}",
        "/jobs",
        "/other:{old}",
        "/redlock:weird",
        "/redlock:{handmade}",
        "/redlock:{fakerec}",
        "/redlock:{}",
    ];
    let before: Vec<_> = kept.iter().map(|path| tree(&zk, path)).collect();

    // Today, by the server's clock.
    zk.restart_with_clock(0, None);
    // A name used since is younger than 40 days.
    token_of(&url, "fresh", &[]);

    let mut runs = 0;
    while zk.stat("/redlock:{old}").is_some() {
        assert!(
            runs < RELEASES,
            "{RELEASES} releases of another name and none pruned"
        );
        tokens.push(token_of(&url, "other", &[]));
        runs += 1;
    }
    eprintln!("pruned after {runs} releases");
    // Every prune looked at every name of the folder (fewer than 64): the rest stayed.
    let after: Vec<_> = kept.iter().map(|path| tree(&zk, path)).collect();
    assert_eq!(after, before);
    assert_eq!(
        zk.get("/redlock:{handmade}").as_deref(),
        Some("hand-made configuration, keep me")
    );
    assert!(zk.ls("/redlock:{fresh}").contains(&"record".to_owned()));
    // The name taken again: a larger token than every one given out before.
    let token = token_of(&url, "old", &[]);
    let top = tokens.iter().max().unwrap();
    assert!(token > *top, "{token} after {top}");
}

/// A server given TTL nodes later keeps the plain nodes a name got before, which it never
/// deletes itself: releases prune them as on a server without TTL nodes (a client cannot tell
/// the two kinds of node apart, so every server's releases prune).
#[test]
fn names_made_before_the_server_had_ttl_nodes_are_pruned_too() {
    let mut zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        extra_config: vec![SESSIONS.to_owned()],
        ..ZkOpts::default()
    });
    let url = zk.url();
    let refused = zk.zkcli(&["create", "-t", "100000", "/ttl", "x"]);
    assert!(!refused.stderr.contains("Created /ttl"), "{refused:?}");
    zk.restart_with_clock(0, Some("-41d"));
    token_of(&url, "old", &[]);
    // Today, and with TTL nodes: a zoo.cfg key ZooKeeper does not know is its system property
    // `zookeeper.KEY`.
    zk.add_config(0, "extendedTypesEnabled=true");
    zk.restart_with_clock(0, None);
    let made = zk.zkcli(&["create", "-t", "100000", "/ttl", "x"]);
    assert!(made.stderr.contains("Created /ttl"), "{made:?}");
    let mut runs = 0;
    while zk.stat("/redlock:{old}").is_some() {
        assert!(
            runs < RELEASES,
            "{RELEASES} releases of another name and none pruned"
        );
        token_of(&url, "other", &[]);
        runs += 1;
    }
    eprintln!("pruned after {runs} releases");
    assert!(zk.ls("/redlock:{other}").contains(&"record".to_owned()));
}
