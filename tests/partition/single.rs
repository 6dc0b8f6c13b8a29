//! One redis-server split from the holder: the holder's host c0 alone on side A; the server r
//! and the waiter's host c1 on side B. The holder cannot renew: it must be stopped (76) before
//! its lease could end on r, and the waiter begins after it, with a larger token.

use std::time::Duration;

use super::scene::{Scene, ended, now, report};
use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, Proc, server_binary, wait_until};

const TTL: Duration = Duration::from_secs(3);

#[test]
fn a_holder_cut_off_from_its_server_is_stopped_before_the_waiter_begins() {
    let layout = [("c0", Side::A), ("r", Side::B), ("c1", Side::B)];
    let Some(net) = Net::new(&layout) else {
        return;
    };
    let addr = net.host("r").addr.clone();
    let mut cmd = net.command("r", server_binary());
    cmd.args(["--bind", &addr, "--port", "6379", "--save", ""])
        .args(["--appendonly", "no", "--protected-mode", "no"]);
    let _server = Proc::spawn(cmd);
    let scene = Scene::new(&net, vec![format!("redis://{addr}:6379")], TTL);
    wait_until(PATIENCE, "the server to answer", || {
        scene.status("c1").is_some()
    });
    let holder = scene.run("c0", &[]);
    let start = scene.started("c0", PATIENCE);
    let waiter = scene.run("c1", &["--wait", "60s"]);
    scene.ticked_after("c0", start.ns, 3);

    let cut_ns = now();
    net.cut();
    ended(holder, TTL + Duration::from_secs(5)).assert_code(76);
    let begun = scene.started("c1", PATIENCE);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report("one server: holder | server + waiter", TTL, &timing);
    let stop = timing
        .stop_after_cut
        .expect("the holder wrote after the cut");
    assert!(stop < TTL, "the holder was stopped {stop:?} after the cut");

    let heal_ns = now();
    net.heal();
    for host in ["c0", "c1"] {
        let s = scene.status(host).expect("status answers once healed");
        assert_eq!(s["state"], "held", "status from {host}: {s}");
        assert_eq!(s["last_run"]["host"], "c1", "status from {host}: {s}");
    }
    scene.ticked_after("c1", heal_ns.max(begun.ns), 3);
    scene.finish("c1");
    ended(waiter, PATIENCE).assert_code(0);
    let holders = scene.check();
    let order: Vec<&str> = holders.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c0", "c1"], "holders at the resource");
    assert!(
        !holders[0].ended,
        "the cut-off holder's command ran to its end"
    );
}
