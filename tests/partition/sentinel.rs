//! Redis Sentinel split while a holder runs (the start of the suite's step 2): the master m and
//! one sentinel with the holder's host c0 on side A; the replica r, two sentinels (on r and s)
//! and the waiter's host c1 on side B. The two sentinels of side B are a majority: they promote
//! r. The master on side A still accepts writes, so a holder that renews there without replica
//! acknowledgements runs on beside the waiter that takes the lock on r (Jepsen's Redis
//! analysis; docs/guarantees.md says so). With `--min-replicas 1` its renewals need r's
//! acknowledgement, fail, and the holder is stopped (76) before its lease could end.

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

/// Without --min-replicas the promise does not hold across this partition, as documented: the
/// check at the resource finds two holders at once. The test shows it, and how long.
#[test]
fn without_min_replicas_the_masters_side_runs_on_beside_the_promoted_side() {
    let Some(net) = Net::new(&LAYOUT) else {
        return;
    };
    let dir = TempDir::new();
    let _servers = start(&net, &dir);
    let (scene, cut_ns, holder, waiter) = split(&net, &[]);
    let r = net.host("r").addr.clone();
    wait_until(PATIENCE, "side B's sentinels to promote r", || {
        master_of(&net, "s") == r
    });
    let begun = scene.started("c1", PATIENCE);
    // Both write on: the overlap at the resource.
    scene.ticked_after("c0", begun.ns, 3);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(
        "sentinel, no --min-replicas: holder + master | replica + 2 sentinels + waiter",
        TTL,
        &timing,
    );
    let violation = resource::check(&scene.stamps()).expect_err("two holders at once");
    eprintln!("sentinel, no --min-replicas: {violation}");
    net.heal();
    scene.finish("c0");
    scene.finish("c1");
    for proc in [holder, waiter] {
        let out = ended(proc, PATIENCE);
        assert!(matches!(out.code(), 0 | 76), "{out:?}");
    }
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
