//! What a partition case does on a consensus store (etcd, ZooKeeper) once its members run on
//! the net with the leader where the case wants it: the holder's redlock on host c0, a waiter's
//! (`--wait`) on c1; the cut; what the holder did (76 before its lease could end, or 0 when it
//! kept a majority), when the waiter began, the resource; and after the heal what `status` and
//! `history` say from both sides.

use std::time::Duration;

use serde_json::Value;

use super::scene::{Scene, Timing, ended, now, report};
use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, wait_until};

/// How the case splits the network.
pub enum Cut {
    /// The link between the switches.
    Link,
    /// One host's port.
    Host(&'static str),
}

/// What the holder must do.
#[derive(PartialEq)]
pub enum Expect {
    /// Cut off from a majority: stopped, exit 76, before its lease could end.
    Stopped,
    /// Still with a majority: its command runs to its end, exit 0.
    RunsThrough,
}

pub struct Case {
    pub name: String,
    pub layout: [(&'static str, Side); 5],
    pub leader: &'static str,
    pub cut: Cut,
    pub expect: Expect,
}

use Side::{A, B};

/// (a) The holder cut off with the leader (m0); two followers and the waiter on the other side.
pub fn with_the_leader(store: &str) -> Case {
    Case {
        name: format!("{store} (a) holder + leader | two followers + waiter"),
        layout: [("m0", A), ("c0", A), ("m1", B), ("m2", B), ("c1", B)],
        leader: "m0",
        cut: Cut::Link,
        expect: Expect::Stopped,
    }
}

/// (b) The holder cut off with a follower (m0); the leader, a follower and the waiter on the
/// other side.
pub fn with_a_follower(store: &str) -> Case {
    Case {
        name: format!("{store} (b) holder + follower | leader + follower + waiter"),
        leader: "m1",
        ..with_the_leader(store)
    }
}

/// (c) The holder's host cut off from everyone.
pub fn alone(store: &str) -> Case {
    Case {
        name: format!("{store} (c) holder alone | every member + waiter"),
        layout: [("c0", A), ("m0", A), ("m1", A), ("m2", B), ("c1", B)],
        leader: "m0",
        cut: Cut::Host("c0"),
        expect: Expect::Stopped,
    }
}

/// (d) One member, the leader (m2), cut off from the holder's side, where the others and the
/// waiter are.
pub fn keeping_a_majority(store: &str) -> Case {
    Case {
        name: format!("{store} (d) holder + two members + waiter | the leader"),
        layout: [("c0", A), ("m0", A), ("m1", A), ("c1", A), ("m2", B)],
        leader: "m2",
        cut: Cut::Link,
        expect: Expect::RunsThrough,
    }
}

/// A store's members on the net, as a case needs them.
pub trait Members {
    /// The URL redlock is given.
    fn url(&self) -> String;
    /// Waits until every member serves and one leads, asked from host `from`.
    fn wait_healthy(&self, from: &str);
}

/// Runs `case` on `members` with leases of `ttl`: a holder that is stopped must have stopped
/// within `bound` of the cut.
pub fn run(net: &Net, members: &impl Members, case: &Case, ttl: Duration, bound: Duration) {
    let scene = Scene::new(net, vec![members.url()], ttl);
    // -v: a holder stopped that should not have been says why (each failed renewal).
    let holder = scene.run("c0", &["-v"]);
    let start = scene.started("c0", PATIENCE);
    let waiter = scene.run("c1", &["--wait", "60s"]);
    wait_until(PATIENCE, "the waiter to be waiting", || {
        scene
            .status("c1")
            .is_some_and(|s| s["waiting"].as_u64() >= Some(1))
    });
    scene.ticked_after("c0", start.ns, 3);

    let cut_ns = now();
    match case.cut {
        Cut::Link => net.cut(),
        Cut::Host(h) => net.cut_host(h),
    }
    let holder_out = match case.expect {
        Expect::Stopped => {
            let out = ended(holder, bound + Duration::from_secs(5));
            out.assert_code(76);
            out
        }
        Expect::RunsThrough => {
            // It writes on past the moment its lease would have ended without a renewal.
            let past = cut_ns + (ttl + Duration::from_secs(1)).as_nanos() as i128;
            let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                scene.ticked_after("c0", past, 1);
            }));
            if ticked.is_err() {
                let out = ended(holder, PATIENCE);
                panic!(
                    "{}: the holder stopped writing ({:?}); its stderr:\n{}",
                    case.name, out.status, out.stderr
                );
            }
            scene.finish("c0");
            let out = ended(holder, PATIENCE);
            out.assert_code(0);
            out
        }
    };
    let begun = scene.started("c1", PATIENCE);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(&case.name, ttl, &timing);
    check_timing(case, &timing, bound);

    match case.cut {
        Cut::Link => net.heal(),
        Cut::Host(h) => net.heal_host(h),
    }
    let heal_ns = now();
    // The old side rejoins: every member healthy, asked from either side.
    members.wait_healthy("c0");
    members.wait_healthy("c1");
    let token = scene.of("c0")[0].token;
    for host in ["c0", "c1"] {
        tells_the_truth(&scene, host, token, begun.token, &case.expect);
    }
    // The new holder writes on after the heal; the old one never writes again (the check
    // refuses any line of it after the new holder's first).
    scene.ticked_after("c1", heal_ns, 5);
    scene.finish("c1");
    ended(waiter, PATIENCE).assert_code(0);
    let holders = scene.check();
    let order: Vec<&str> = holders.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c0", "c1"], "holders at the resource");
    assert_eq!(holders[0].ended, case.expect == Expect::RunsThrough);
    if case.expect == Expect::Stopped {
        assert!(
            holder_out.stderr.contains("stopping the command"),
            "the stopped holder says why:\n{}",
            holder_out.stderr
        );
    }
}

/// A stopped holder's command ended before its lease could end (the lease's ttl from the cut,
/// plus the election timeout in which a leader cut off with it may still renew), and the other
/// side's holder began after it.
fn check_timing(case: &Case, t: &Timing, bound: Duration) {
    let begin = t.begin_after_cut.expect("the waiter began after the cut");
    if case.expect == Expect::Stopped {
        let stop = t.stop_after_cut.expect("the holder wrote after the cut");
        assert!(
            stop < bound,
            "{}: stopped {stop:?} after the cut",
            case.name
        );
        assert!(
            stop < begin,
            "{}: the waiter began before the holder stopped",
            case.name
        );
    }
}

/// After the heal, from `host`: `status` names the new holder (c1, its token), and `history`
/// records the cut-off run as lost (or, when it kept a majority, as a success), never as
/// something it was not.
fn tells_the_truth(scene: &Scene, host: &str, old: u64, new: u64, expect: &Expect) {
    let mut seen = None;
    wait_until(PATIENCE, &format!("status from {host} to answer"), || {
        seen = scene.status(host);
        seen.is_some()
    });
    let s = seen.unwrap();
    assert_eq!(s["state"], "held", "status from {host}: {s}");
    assert_eq!(s["holder"]["host"], "c1", "status from {host}: {s}");
    assert_eq!(s["fence"].as_u64(), Some(new), "status from {host}: {s}");

    let out = scene
        .redlock("history", host)
        .arg("--json")
        .any_stdout()
        .output();
    let runs: Value = serde_json::from_str(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    let of = |fence: u64| runs.iter().find(|r| r["fence"].as_u64() == Some(fence));
    let cut_off = of(old).unwrap_or_else(|| panic!("history from {host} lacks the cut-off run"));
    let outcome = cut_off["outcome"].as_str().unwrap_or("");
    eprintln!("history from {host}: the cut-off run's outcome is {outcome}");
    match expect {
        Expect::Stopped => assert!(
            ["lock_lost", "vanished"].contains(&outcome),
            "history from {host} records the cut-off run as {outcome}: {cut_off}"
        ),
        Expect::RunsThrough => assert_eq!(outcome, "success", "history from {host}: {cut_off}"),
    }
    let current = of(new).unwrap_or_else(|| panic!("history from {host} lacks the new run"));
    assert_eq!(
        current["outcome"], "running",
        "history from {host}: {current}"
    );
}
