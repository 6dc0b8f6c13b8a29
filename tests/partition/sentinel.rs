//! Redis Sentinel split while a holder runs (the start of the suite's step 2): the master m and
//! one sentinel with the holder's host c0 on side A; the replica r, two sentinels (on r and s)
//! and the waiter's host c1 on side B. The two sentinels of side B are a majority: they promote
//! r. The master on side A still accepts writes (Jepsen's Redis analysis), but redlock takes and
//! renews only on a master a majority of the URL's sentinels name: the holder on side A, which
//! reaches one sentinel, fails its renewals and is stopped (76) before its lease could end, and
//! the waiter takes the lock on r after it. With `--min-replicas 1` its renewals also need r's
//! acknowledgement. What the sentinels cannot tell: a renewal the majority confirmed that never
//! reached the replica before the promotion; the last case shows that window.

use std::process::Stdio;
use std::time::Duration;

use super::resource;
use super::scene::{Scene, ended, now, report};
use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, Proc, TempDir, server_binary, wait_until};

const TTL: Duration = Duration::from_secs(3);
const SERVICE: &str = "svc";

/// The hosts, and which run a sentinel.
const LAYOUT: [(&str, Side); 5] = [
    ("m", Side::A),
    ("c0", Side::A),
    ("r", Side::B),
    ("s", Side::B),
    ("c1", Side::B),
];
const SENTINELS: [&str; 3] = ["m", "r", "s"];

/// `redis-cli -h addr -p port args` from host `from`: its stdout, or "" when it failed.
fn cli(net: &Net, from: &str, addr: &str, port: u16, args: &[&str]) -> String {
    let mut cmd = net.command(from, "timeout");
    cmd.args(["2", "redis-cli", "-h", addr, "-p", &port.to_string()])
        .args(args)
        .stderr(Stdio::null());
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A master on m, its replica on r, and a sentinel on m, r and s, all agreeing on them.
fn start(net: &Net, dir: &TempDir) -> Vec<Proc> {
    let (m, r) = (net.host("m").addr.clone(), net.host("r").addr.clone());
    let mut procs = Vec::new();
    let data = |h: &str| {
        let mut cmd = net.command(h, server_binary());
        let addr = &net.host(h).addr;
        cmd.args(["--bind", addr, "--port", "6379", "--save", ""])
            .args(["--appendonly", "no", "--protected-mode", "no"]);
        cmd
    };
    procs.push(Proc::spawn(data("m")));
    let mut replica = data("r");
    replica.args(["--replicaof", &m, "6379"]);
    procs.push(Proc::spawn(replica));
    wait_until(PATIENCE, "the replica to follow the master", || {
        cli(net, "r", &r, 6379, &["info", "replication"]).contains("master_link_status:up")
    });
    for h in SENTINELS {
        let conf = dir.join(&format!("sentinel-{h}.conf"));
        let addr = &net.host(h).addr;
        let text = format!(
            "bind {addr}\nport 26379\nprotected-mode no\n\
             sentinel monitor {SERVICE} {m} 6379 2\n\
             sentinel down-after-milliseconds {SERVICE} 1000\n\
             sentinel failover-timeout {SERVICE} 3000\n"
        );
        std::fs::write(&conf, text).unwrap();
        let mut cmd = net.command(h, server_binary());
        cmd.arg(&conf).arg("--sentinel");
        procs.push(Proc::spawn(cmd));
    }
    // Every sentinel knows the replica and the two other sentinels: a failover needs both.
    for h in SENTINELS {
        let addr = net.host(h).addr.clone();
        wait_until(PATIENCE, &format!("sentinel {h} to know its peers"), || {
            let info = cli(net, h, &addr, 26379, &["sentinel", "master", SERVICE]);
            let field = |name: &str| {
                let lines: Vec<&str> = info.lines().collect();
                let at = lines.iter().position(|l| *l == name)?;
                lines.get(at + 1).map(|v| v.to_string())
            };
            field("num-slaves").as_deref() == Some("1")
                && field("num-other-sentinels").as_deref() == Some("2")
        });
    }
    procs
}

/// Which address the sentinel on host `h` names as the master.
fn master_of(net: &Net, h: &str) -> String {
    let addr = net.host(h).addr.clone();
    let args = ["sentinel", "get-master-addr-by-name", SERVICE];
    let out = cli(net, h, &addr, 26379, &args);
    out.lines().next().unwrap_or("").to_owned()
}

fn url(net: &Net) -> String {
    let hosts: Vec<String> = SENTINELS
        .iter()
        .map(|h| format!("{}:26379", net.host(h).addr))
        .collect();
    format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
}

/// Holder on c0, waiter on c1, the cut; returns the scene, the cut's time and the processes
/// for the case to judge.
fn split<'n>(net: &'n Net, extra: &[&str]) -> (Scene<'n>, i128, Proc, Proc) {
    let scene = Scene::new(net, vec![url(net)], TTL);
    let holder = scene.run("c0", extra);
    let start = scene.started("c0", PATIENCE);
    let waiter = scene.run("c1", &[&["--wait", "60s"], extra].concat());
    scene.ticked_after("c0", start.ns, 3);
    let cut_ns = now();
    net.cut();
    (scene, cut_ns, holder, waiter)
}

/// Without --min-replicas: the holder on side A reaches one sentinel of three, cannot confirm
/// its master with a majority, and is stopped (76) before its lease could end; the waiter takes
/// the lock on the promoted r after the holder's last write. One holder at a time.
#[test]
fn without_min_replicas_the_cut_off_holder_is_stopped_before_the_promoted_side_begins() {
    let Some(net) = Net::new(&LAYOUT) else {
        return;
    };
    let dir = TempDir::new();
    let _servers = start(&net, &dir);
    let (scene, cut_ns, holder, waiter) = split(&net, &[]);
    let out = ended(holder, TTL + Duration::from_secs(5));
    out.assert_code(76);
    assert!(
        out.stderr.contains("no majority of the 3 sentinels"),
        "the holder says why: {}",
        out.stderr
    );
    let r = net.host("r").addr.clone();
    wait_until(PATIENCE, "side B's sentinels to promote r", || {
        master_of(&net, "s") == r
    });
    let begun = scene.started("c1", PATIENCE);
    scene.ticked_after("c1", begun.ns, 3);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(
        "sentinel, no --min-replicas: holder + master | replica + 2 sentinels + waiter",
        TTL,
        &timing,
    );
    let stop = timing
        .stop_after_cut
        .expect("the holder wrote after the cut");
    assert!(stop < TTL, "the holder was stopped {stop:?} after the cut");
    scene.finish("c1");
    ended(waiter, PATIENCE).assert_code(0);
    let holders = scene.check();
    let order: Vec<&str> = holders.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c0", "c1"], "holders at the resource");
    net.heal();
}

/// With --min-replicas 1 the holder's renewals need the replica, which is on the other side:
/// stopped (76) before its lease could end. The waiter on the promoted replica waits on (its
/// takes there are acknowledged by nobody) until, healed, the old master follows the promoted
/// one: then it takes the lock, after the holder's last write.
#[test]
fn with_min_replicas_the_cut_off_holder_is_stopped_before_the_promoted_side_begins() {
    let Some(net) = Net::new(&LAYOUT) else {
        return;
    };
    let dir = TempDir::new();
    let _servers = start(&net, &dir);
    let (scene, cut_ns, holder, mut waiter) = split(&net, &["--min-replicas", "1"]);
    let out = ended(holder, TTL + Duration::from_secs(5));
    out.assert_code(76);
    let r = net.host("r").addr.clone();
    wait_until(PATIENCE, "side B's sentinels to promote r", || {
        master_of(&net, "s") == r
    });
    // The promoted replica has no replica of its own until the old master, back, follows it:
    // the waiter's takes there are acknowledged by nobody, and --wait waits that out as it
    // waits out an outage, with one warning.
    wait_until(PATIENCE, "the waiter to warn of too few replicas", || {
        waiter.stderr_so_far().contains("acknowledged the lock")
    });
    assert!(
        waiter.running(),
        "the waiter gave up: {}",
        waiter.stderr_so_far()
    );
    let timing = scene.timing(cut_ns, "c0", "c1");
    let stop = timing
        .stop_after_cut
        .expect("the holder wrote after the cut");
    assert!(stop < TTL, "the holder was stopped {stop:?} after the cut");
    // Healed, the sentinels make the old master follow r (Sentinel waits 8 s before it
    // reconfigures an instance that still says it is a master); then the waiter's next take is
    // acknowledged.
    let heal_ns = now();
    net.heal();
    let begun = scene.started("c1", Duration::from_secs(45));
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(
        "sentinel --min-replicas 1: holder + master | replica + 2 sentinels + waiter",
        TTL,
        &timing,
    );
    scene.ticked_after("c1", heal_ns.max(begun.ns), 5);
    scene.finish("c1");
    let out = ended(waiter, PATIENCE);
    out.assert_code(0);
    assert_eq!(
        out.stderr.matches("acknowledged the lock").count(),
        1,
        "one warning per wait: {}",
        out.stderr
    );
    let m = net.host("m").addr.clone();
    let info = cli(&net, "m", &m, 6379, &["info", "replication"]);
    assert!(
        info.contains("role:slave"),
        "the old master rejoined as a replica: {info}"
    );
    let holders = scene.check();
    let order: Vec<&str> = holders.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c0", "c1"], "holders at the resource");
}

/// What asking the sentinels cannot cover: renewals that the master took while the replica was
/// cut off from it (m's packets to r dropped), confirmed all the while by a majority that still
/// names m. Once side B promotes r, r's copy of the lock has lapsed, and the waiter takes it
/// there while the holder, renewed on m, still runs: two holders at once, for up to a lease.
/// The test shows it, and how long; `--min-replicas 1` is what closes this window.
#[test]
fn a_renewal_the_replica_never_received_is_a_window_the_sentinels_cannot_close() {
    // Long enough that the holder outlives the failover (4-6 s after the cut here) by seconds.
    const LONG: Duration = Duration::from_secs(20);
    let Some(net) = Net::new(&LAYOUT) else {
        return;
    };
    let dir = TempDir::new();
    let _servers = start(&net, &dir);
    let scene = Scene::new(&net, vec![url(&net)], LONG);
    let holder = scene.run("c0", &[]);
    let start = scene.started("c0", PATIENCE);
    scene.ticked_after("c0", start.ns, 2);
    // The replica stops hearing from the master; every sentinel still names m.
    net.cut_one_way("m", &["r"]);
    let r = net.host("r").addr.clone();
    // A lease and a second for r's copy of the lock to lapse: time itself is what this waits on.
    std::thread::sleep(LONG + Duration::from_secs(1));
    assert_eq!(master_of(&net, "s"), net.host("m").addr, "no failover yet");
    let cut_ns = now();
    net.cut();
    wait_until(PATIENCE, "side B's sentinels to promote r", || {
        master_of(&net, "s") == r
    });
    // A waiter that asks now, on the promoted r (one that waited on m would first wait out its
    // question there).
    let waiter = scene.run("c1", &["--wait", "60s"]);
    let begun = scene.started("c1", PATIENCE);
    let out = ended(holder, LONG + Duration::from_secs(5));
    out.assert_code(76);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(
        "sentinel, replica deaf to the master, then split: holder + master | replica + waiter",
        LONG,
        &timing,
    );
    let violation = resource::check(&scene.stamps()).expect_err("two holders at once");
    eprintln!("sentinel, renewals the replica never got: {violation}");
    let stop = timing
        .stop_after_cut
        .expect("the holder wrote after the cut");
    assert!(stop < LONG, "the holder was stopped {stop:?} after the cut");
    assert!(
        begun.ns < cut_ns + stop.as_nanos() as i128,
        "the waiter began after the holder"
    );
    net.heal();
    net.heal_one_way("m");
    scene.finish("c1");
    let out = ended(waiter, PATIENCE);
    assert!(matches!(out.code(), 0 | 76), "{out:?}");
}
