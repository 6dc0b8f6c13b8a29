//! Redis Sentinel: the lock lives on the master a majority of the sentinels name; one sentinel
//! of three down or restarted stops nothing, every sentinel gone stops the holder (76); renewals
//! follow a forced failover; --min-replicas waits for a replica and refuses to run without one, and within
//! --wait rides out a failover until the promoted master has a replica.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::snapshots::assert_snapshot;
use super::topology::*;
use crate::common::*;

#[test]
fn locks_on_the_master_the_sentinels_name() {
    let mut setup = SentinelSetup::start();
    let dir = TempDir::new();
    // A sentinel that is down comes first: the next one answers.
    let dead = free_port();
    let url = setup.url().replace(
        "redis+sentinel://",
        &format!("redis+sentinel://127.0.0.1:{dead},"),
    );
    let (holder, token) = Redlock::run_at(&url).key("job").hold(&dir, "a");
    assert_eq!(setup.master.get(&lock_key("job")).as_deref(), Some(&*token));
    // A second client finds it busy through the sentinels.
    Redlock::run_at(&url)
        .key("job")
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    // The admin commands go through the sentinels too.
    Redlock::admin_at("status", &url)
        .key("job")
        .status(0)
        .stdout_contains(&token)
        .output();
    touch(&dir.join("a.go"));
    holder.finish().assert_code(0);
    assert_eq!(setup.master.get(&lock_key("job")), None);
    assert!(!dir.join("marker").exists());

    // An unknown service name: one line, 69, nothing run, nothing locked.
    let wrong = setup.url().replace(SERVICE, "nosuch");
    Redlock::run_at(&wrong)
        .key("job")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("no service 'nosuch'")
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    assert_eq!(setup.master.get(&lock_key("job")), None);
    // Taken once, on the master (the refused run took nothing).
    assert_eq!(
        setup
            .master
            .get(&fence_key("job"))
            .map(|c| fencing_token(&c)),
        Some(fencing_token(&read(&dir.join("a.fence"))))
    );

    // Every sentinel gone during a hold: no majority confirms the master, so the renewals
    // fail and the command is stopped (76) before the lease could end (its last renewal was
    // before the sentinels went).
    let (holder, _) = Redlock::run_at(&url)
        .key("job")
        .ttl("1500ms")
        .arg("-vv")
        .hold(&dir, "b");
    let gone = std::time::Instant::now();
    setup.sentinels.clear();
    let out = holder.finish_within(PATIENCE);
    let took = gone.elapsed();
    out.assert_code(76);
    assert!(took < Duration::from_millis(1500), "stopped {took:?} after");
    assert!(
        out.stderr.contains("no majority of the 4 sentinels"),
        "{}",
        out.stderr
    );
}

/// One sentinel of three down, then back, then restarted, during a hold: each renewal is still
/// confirmed by a majority (the other two), so nothing is stopped. -vv says what each
/// confirmation took; the test prints it.
#[test]
fn one_sentinel_of_three_down_or_restarted_during_a_hold_stops_nothing() {
    let mut setup = SentinelSetup::start();
    let dir = TempDir::new();
    let (mut holder, _) = Redlock::run_at(&setup.url())
        .key("job")
        .ttl("1500ms")
        .arg("-vv")
        .hold(&dir, "a");
    let renewed = |p: &Proc| p.stderr_so_far().matches("renewed lock").count();
    let mut three_renewals = |what: &str| {
        let before = renewed(&holder);
        wait_until(PATIENCE, what, || {
            renewed(&holder) >= before + 3 || !holder.running()
        });
        assert!(holder.running(), "{what}: {}", holder.stderr_so_far());
    };
    three_renewals("renewals with every sentinel");
    setup.sentinels[0].stop();
    three_renewals("renewals with a sentinel down");
    setup.sentinels[0].restart();
    three_renewals("renewals with it back");
    setup.sentinels[1].restart();
    three_renewals("renewals after another's restart");
    touch(&dir.join("a.go"));
    let out = holder.finish();
    out.assert_code(0);
    assert!(!out.stderr.contains("no majority"), "{}", out.stderr);
    assert!(!out.stderr.contains("renewing lock"), "{}", out.stderr);
    // What each confirmation took (the take's first, then one per renewal).
    let mut micros: Vec<u64> = out
        .stderr
        .lines()
        .filter(|l| l.contains("the sentinels confirm"))
        .filter_map(|l| l.rsplit("; ").next()?.strip_suffix(" µs)")?.parse().ok())
        .collect();
    assert!(micros.len() >= 12, "{}", out.stderr);
    let take = micros.remove(0);
    micros.sort_unstable();
    let at = |q: usize| micros[(micros.len() - 1) * q / 100];
    eprintln!(
        "sentinel confirmation: take {take} µs (new connections); {} renewals: median {} µs, \
         p90 {} µs, max {} µs",
        micros.len(),
        at(50),
        at(90),
        at(100)
    );
}

/// No sentinel of the URL reachable: one line that says no majority named a master, and why
/// the sentinels could not be asked; 69, nothing run.
#[test]
fn no_majority_of_the_sentinels_is_one_line_and_69() {
    let dir = TempDir::new();
    let ports = [free_port(), free_port(), free_port()];
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let url = format!("redis+sentinel://{}/{SERVICE}", hosts.join(","));
    let out = Redlock::run_at(&url)
        .key("k")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    let shown: Vec<(String, &str)> = ports
        .iter()
        .zip([":26379", ":26380", ":26381"])
        .map(|(p, s)| (format!(":{p}"), s))
        .collect();
    let shown: Vec<(&str, &str)> = shown.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    assert_snapshot("no-sentinel-majority.stderr", &out.stderr, &shown);
}

#[test]
fn bad_sentinel_and_cluster_urls_are_usage_errors() {
    let dir = TempDir::new();
    for url in [
        "redis+sentinel://127.0.0.1:26379",
        "redis+sentinel://127.0.0.1:26379/",
        "redis+sentinel://127.0.0.1:notaport/mymaster",
        "redis+sentinel://127.0.0.1:1,,127.0.0.1:2/mymaster",
        "redis+sentinel://127.0.0.1:1/mymaster?sentinel_username=u",
        "redis+sentinel://127.0.0.1:1/mymaster?colour=blue",
        "redis+cluster://",
        "redis+cluster://127.0.0.1:7000/0",
        "redis+cluster://127.0.0.1:0",
        "redis+sentinel://:s3cret@127.0.0.1:1/m?sentinel_password=t0psecret&x=1",
    ] {
        let out = Redlock::run_at(url)
            .key("job")
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_lines(1)
            .output();
        out.assert_no_secret(&["s3cret", "t0psecret"]);
        assert!(!dir.join("marker").exists(), "{url}");
    }
}

/// The holder's lock survives a failover the sentinels carry out while it runs: its renewals
/// go on on the new master (the lock's expiry there rises), a contender finds the lock busy,
/// and the command runs to its end (0).
#[test]
fn renewals_follow_a_forced_failover() {
    let setup = SentinelSetup::start();
    let dir = TempDir::new();
    let url = setup.url();
    let key = "nightly";
    let (mut holder, token) = Redlock::run_at(&url)
        .key(key)
        .ttl("3s")
        .arg("-vv")
        .hold(&dir, "a");
    // Replication is asynchronous: the replica has the key before we fail over to it.
    wait_until(PATIENCE, "the replica to have the lock", || {
        setup.replica.get(&lock_key(key)).as_deref() == Some(&*token)
    });
    setup.failover();
    assert_eq!(setup.master_port(), setup.replica.port());
    // Promoted, it takes no writes from the old master: a rise of its expiry is a renewal's.
    wait_for_renewal_on(&setup.replica, key, &mut holder);
    // A contender that asks the sentinels now finds the lock busy on the new master.
    Redlock::run_at(&url)
        .key(key)
        .sh(&marker_script(&dir))
        .status(75)
        .output();
    touch(&dir.join("a.go"));
    let out = holder.finish();
    eprintln!("holder after the failover:\n{}", out.stderr);
    out.assert_code(0);
    assert!(!dir.join("marker").exists(), "two commands at once");
    assert!(
        out.stderr.contains("the sentinels name a new master"),
        "{}",
        out.stderr
    );
    assert_eq!(
        setup.replica.get(&lock_key(key)),
        None,
        "released on the new master"
    );
}

#[test]
fn min_replicas_waits_for_a_replica_or_refuses_to_run() {
    let setup = SentinelSetup::start();
    let dir = TempDir::new();
    // With the replica up: acknowledged, runs.
    Redlock::run_at(&setup.url())
        .key("job")
        .args(["--min-replicas", "1"])
        .sh("true")
        .status(0)
        .output();
    // The same on the master's own URL: any single master works.
    Redlock::run(&setup.master)
        .key("job")
        .args(["--min-replicas", "1"])
        .sh("true")
        .status(0)
        .output();
    // The replica stopped: not acknowledged; released, not run, 69.
    kill(Pid::from_raw(setup.replica.pid()), Signal::SIGSTOP).unwrap();
    let out = Redlock::run_at(&setup.url())
        .key("job")
        .args(["--min-replicas", "1"])
        .ttl("2s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("only 0 of 1 replica")
        .stderr_lines(1)
        .output();
    kill(Pid::from_raw(setup.replica.pid()), Signal::SIGCONT).unwrap();
    assert!(!dir.join("marker").exists());
    assert_eq!(setup.master.get(&lock_key("job")), None);
    assert!(out.elapsed < Duration::from_secs(10));
}

/// A run that starts while the master is down waits (`--wait`) through the sentinels' failover
/// and takes the lock on the new master.
#[test]
fn a_wait_rides_out_a_failover_through_the_sentinels() {
    let mut setup = SentinelSetup::start();
    let dir = TempDir::new();
    setup.master.kill();
    let out = Redlock::run_at(&setup.url())
        .key("job")
        .wait("30s")
        .sh(&marker_script(&dir))
        .status(0)
        .stderr_contains("retrying until the wait ends (--wait 30s)")
        .output();
    assert!(dir.join("marker").exists());
    assert_eq!(
        setup.master_port(),
        setup.replica.port(),
        "no failover happened"
    );
    eprintln!("waited out the failover in {:?}", out.elapsed);
}

/// The failover of docs/high-availability.md: the master dies and the sentinels promote its
/// only replica, which has no replica of its own. A waiter with `--min-replicas 1` waits
/// through the outage, then through the takes no replica acknowledges (said once each), and
/// runs once a new replica follows the promoted master.
#[test]
fn a_wait_with_min_replicas_rides_out_a_failover_until_a_replica_follows() {
    let mut setup = SentinelSetup::start();
    let dir = TempDir::new();
    setup.master.kill();
    let waiter = Redlock::run_at(&setup.url())
        .key("job")
        .ttl("3s")
        .wait("60s")
        .args(["--min-replicas", "1"])
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(
        PATIENCE,
        "a take on the promoted master, unacknowledged",
        || waiter.stderr_so_far().contains("replica(s) acknowledged"),
    );
    // Taken there, and given back: the replica is the master now, the only server up.
    assert!(info(&setup.replica, "replication").contains("role:master"));
    assert!(!dir.join("marker").exists(), "ran without a replica");
    let _replica = replica_of(&setup.replica);
    let out = waiter.finish();
    eprintln!("waiter:\n{}", out.stderr);
    out.assert_code(0);
    out.assert_stderr_prefixed();
    assert!(dir.join("marker").exists());
    let said = |what: &str| out.stderr.lines().filter(|l| l.contains(what)).count();
    assert_eq!(said("replica(s) acknowledged"), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "redlock: warning: cannot take lock 'job': only 0 of 1 replica(s) acknowledged the \
             lock within 300ms (--min-replicas); released it; retrying until the wait ends \
             (--wait 1m)"
        ),
        "{}",
        out.stderr
    );
}

/// A sentinel counts once toward the majority, however the URL names it. A hostile tester made
/// one lying sentinel (monitoring another master under the same service name) a majority by
/// naming it twice beside one honest sentinel, and took a lock the honest side's holder held:
/// two holders at once. Named twice alike, the URL is refused (64); named under two names
/// (`127.0.0.1` and `localhost`), it speaks once, so no majority names its master (69), and the
/// other master never gets the lock.
#[test]
fn a_sentinel_named_twice_in_the_url_counts_once() {
    let honest_master = RedisServer::start();
    let honest = Sentinel::start(honest_master.port());
    let other_master = RedisServer::start();
    let liar = Sentinel::start(other_master.port());
    let dir = TempDir::new();
    let url = |hosts: &[String]| format!("redis+sentinel://{}/{SERVICE}", hosts.join(","));
    let (h, l) = (honest.port, liar.port);
    let same = url(&[
        format!("127.0.0.1:{l}"),
        format!("127.0.0.1:{l}"),
        format!("127.0.0.1:{h}"),
    ]);
    let out = Redlock::run_at(&same)
        .key("twice")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains(&format!("sentinel 127.0.0.1:{l} is given twice"))
        .stderr_lines(1)
        .output();
    // The line docs/messages.md quotes.
    let (shown_liar, shown_honest) = (format!("127.0.0.1:{l}"), format!("127.0.0.1:{h}"));
    assert_snapshot(
        "sentinel-given-twice.stderr",
        out.stderr.trim(),
        &[
            (&shown_liar, "127.0.0.1:26379"),
            (&shown_honest, "127.0.0.1:26380"),
        ],
    );
    let aliases = url(&[
        format!("127.0.0.1:{l}"),
        format!("localhost:{l}"),
        format!("127.0.0.1:{h}"),
    ]);
    Redlock::run_at(&aliases)
        .key("twice")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("was a sentinel already heard, under another name")
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    assert!(
        other_master.all_keys().is_empty(),
        "the lying sentinel's master took the lock: {:?}",
        other_master.all_keys()
    );
}
