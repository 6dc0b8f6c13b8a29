//! A quorum of three independent redis-server masters (r0, r1, r2), redlock with three --url,
//! split while a holder runs: the holder's host c0 keeps only r0; r1, r2 and the waiter's host
//! c1 are the other side. The holder cannot renew on a majority: it must be stopped (76) before
//! its lease could end there, and the waiter, which can reach a majority, begins after it with a
//! larger token.

use std::time::Duration;

use serde_json::Value;

use super::scene::{KEY, Scene, ended, now, report};
use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, Proc, Redlock, server_binary, wait_until};

const TTL: Duration = Duration::from_secs(3);

#[test]
fn a_holder_cut_off_from_two_of_three_masters_is_stopped() {
    let layout = [
        ("c0", Side::A),
        ("r0", Side::A),
        ("r1", Side::B),
        ("r2", Side::B),
        ("c1", Side::B),
    ];
    let Some(net) = Net::new(&layout) else {
        return;
    };
    let masters = ["r0", "r1", "r2"];
    let _servers: Vec<Proc> = masters
        .iter()
        .map(|&h| {
            let addr = &net.host(h).addr;
            let mut cmd = net.command(h, server_binary());
            cmd.args(["--bind", addr, "--port", "6379", "--save", ""])
                .args(["--appendonly", "no", "--protected-mode", "no"]);
            Proc::spawn(cmd)
        })
        .collect();
    let urls: Vec<String> = masters
        .iter()
        .map(|h| format!("redis://{}:6379", net.host(h).addr))
        .collect();
    let scene = Scene::new(&net, urls.clone(), TTL);
    for url in &urls {
        let answers = || {
            let status = Redlock::admin_at("status", url).through(net.within("c1"));
            let status = status.key(KEY);
            let out = status.any_status().any_stdout().any_stderr().output();
            out.status.success()
        };
        wait_until(PATIENCE, &format!("{url} to answer"), answers);
    }

    let holder = scene.run("c0", &[]);
    let start = scene.started("c0", PATIENCE);
    let waiter = scene.run("c1", &["--wait", "60s"]);
    // (A quorum's status counts no waiters; the waiter, on the majority's side, waits there
    // whether it asked before the cut or after.)
    scene.ticked_after("c0", start.ns, 3);

    let cut_ns = now();
    net.cut();
    let out = ended(holder, TTL + Duration::from_secs(5));
    out.assert_code(76);
    let begun = scene.started("c1", PATIENCE);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report("quorum: holder + r0 | r1 + r2 + waiter", TTL, &timing);
    let stop = timing
        .stop_after_cut
        .expect("the holder wrote after the cut");
    let begin = timing
        .begin_after_cut
        .expect("the waiter began after the cut");
    // No renewal reaches a majority after the cut: the lease there ends a ttl after the last
    // one before it, at the earliest.
    assert!(stop < TTL, "the holder was stopped {stop:?} after the cut");
    assert!(stop < begin, "the waiter began before the holder stopped");

    let heal_ns = now();
    net.heal();
    // From either side: every node answers, status says the lock is held and its last run
    // is the new holder's, running; history records the cut-off run as lost, with its token.
    let old = scene.of("c0")[0].token;
    for host in ["c0", "c1"] {
        let mut seen = None;
        // The old side rejoins: every node answers, from either side.
        wait_until(PATIENCE, &format!("every node to answer {host}"), || {
            seen = scene.status(host);
            seen.as_ref().is_some_and(|s| s["answered"] == 3)
        });
        let s = seen.unwrap();
        assert_eq!(s["state"], "held", "status from {host}: {s}");
        assert_eq!(s["last_run"]["host"], "c1", "status from {host}: {s}");
        assert_eq!(
            s["last_run"]["outcome"], "running",
            "status from {host}: {s}"
        );
        let cut_off = run_of(&scene, host, old);
        let outcome = cut_off["outcome"].as_str().unwrap_or("");
        eprintln!("history from {host}: the cut-off run's outcome is {outcome}");
        assert!(
            ["lock_lost", "vanished"].contains(&outcome),
            "history from {host} records the cut-off run as {outcome}: {cut_off}"
        );
    }
    scene.ticked_after("c1", heal_ns, 5);
    scene.finish("c1");
    ended(waiter, PATIENCE).assert_code(0);
    let holders = scene.check();
    let order: Vec<&str> = holders.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c0", "c1"], "holders at the resource");
    assert!(
        !holders[0].ended,
        "the cut-off holder's command ran to its end"
    );
    // Ended, the new holder's run is a success under the token its command got. (While it ran,
    // each node's record held the fence that node gave, which a quorum's token may exceed.)
    for host in ["c0", "c1"] {
        let run = run_of(&scene, host, begun.token);
        assert_eq!(run["outcome"], "success", "history from {host}: {run}");
    }
}

/// The run `history --json` from `host` shows with fencing token `fence`.
#[track_caller]
fn run_of(scene: &Scene, host: &str, fence: u64) -> Value {
    let out = scene.redlock("history", host).arg("--json").any_stdout();
    let runs: Value = serde_json::from_str(&out.output().stdout).unwrap();
    let found = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["fence"].as_u64() == Some(fence));
    found
        .unwrap_or_else(|| panic!("history from {host} has no run of token {fence}: {runs}"))
        .clone()
}
