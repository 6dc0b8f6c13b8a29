//! The harness itself, before any lock is put on it: a cut drops what crosses between the sides
//! and nothing else, a host cut off reaches nobody, a one-way cut stops one direction, heal
//! undoes each, and the root namespace never has an address in the range.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, Proc, server_binary, wait_until};

/// Whether a TCP connection from host `from` to `addr:port` is made within a second.
fn reaches(net: &Net, from: &str, addr: &str, port: u16) -> bool {
    let mut cmd = net.command(from, "timeout");
    cmd.args([
        "1",
        "bash",
        "-c",
        &format!("exec 3<>/dev/tcp/{addr}/{port}"),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    cmd.status().unwrap().success()
}

#[test]
fn cut_heal_host_and_one_way() {
    let Some(net) = Net::new(&[("a", Side::A), ("s", Side::B), ("b", Side::B)]) else {
        return;
    };
    let addr = net.host("s").addr.clone();
    let mut server = net.command("s", server_binary());
    server.args(["--bind", &addr, "--port", "6379", "--save", ""]);
    server.args(["--appendonly", "no", "--protected-mode", "no"]);
    let _server = Proc::spawn(server);
    wait_until(PATIENCE, "redis-server in host s", || {
        reaches(&net, "b", &addr, 6379)
    });
    assert!(reaches(&net, "a", &addr, 6379), "side A reaches side B");

    net.cut();
    assert!(
        !reaches(&net, "a", &addr, 6379),
        "a cut still lets A reach B"
    );
    assert!(
        reaches(&net, "b", &addr, 6379),
        "a cut stops traffic within side B"
    );
    net.heal();
    assert!(
        reaches(&net, "a", &addr, 6379),
        "heal does not restore A to B"
    );

    net.cut_host("s");
    assert!(!reaches(&net, "a", &addr, 6379));
    assert!(
        !reaches(&net, "b", &addr, 6379),
        "a host cut off is still reached"
    );
    net.heal_host("s");
    assert!(reaches(&net, "b", &addr, 6379));

    net.cut_one_way("b", &["s"]);
    assert!(
        !reaches(&net, "b", &addr, 6379),
        "b's packets to s still arrive"
    );
    assert!(
        reaches(&net, "a", &addr, 6379),
        "a one-way cut of b stops a"
    );
    net.heal_one_way("b");
    assert!(reaches(&net, "b", &addr, 6379));

    let root = Command::new("ip").args(["-o", "addr"]).output().unwrap();
    let root = String::from_utf8_lossy(&root.stdout);
    assert!(
        !root.contains("10.199."),
        "the root namespace has an address in the range"
    );
    assert_eq!(net.side(Side::B), ["s", "b"]);
}

/// Dropped, a net leaves no namespace and no process behind, a panicking test's neither.
#[test]
fn nothing_left_after_a_panic() {
    let names = || {
        let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let me = format!("rlp-{}-", std::process::id());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .filter(|l| l.starts_with(&me) && l.contains("-lone"))
            .count()
    };
    let mut pid = 0;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(net) = Net::new(&[("lone", Side::A)]) else {
            return;
        };
        let mut sleeper = net.command("lone", "sleep");
        sleeper.arg("600");
        pid = sleeper.spawn().unwrap().id() as i32;
        assert_eq!(names(), 1);
        panic!("the test fails here");
    }));
    if pid == 0 {
        return;
    }
    assert!(caught.is_err());
    assert_eq!(names(), 0, "a namespace left behind");
    wait_until(
        Duration::from_secs(5),
        "the host's process to be killed",
        || !crate::common::pid_alive(pid),
    );
}

/// A namespace of a run whose process is gone (a crashed run's) is swept; a live run's stays.
#[test]
fn a_dead_runs_namespaces_are_swept() {
    // Made only where namespaces can be made: a net says so.
    let Some(net) = Net::new(&[("live", Side::A)]) else {
        return;
    };
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!("rlp-{dead}-0-sw");
    let made = Command::new("ip").args(["netns", "add", &stale]).status();
    assert!(made.unwrap().success(), "ip netns add {stale}");
    crate::common::net::sweep_stale();
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let names = String::from_utf8_lossy(&out.stdout).into_owned();
    let left = |name: &str| {
        names
            .lines()
            .any(|l| l.split_whitespace().next() == Some(name))
    };
    if left(&stale) {
        // Never leave it behind, even when the sweep failed.
        let _ = Command::new("ip").args(["netns", "del", &stale]).status();
        panic!("{stale}, of a process that is gone, was not swept");
    }
    let mine = format!("rlp-{}-", std::process::id());
    assert!(
        names
            .lines()
            .any(|l| l.starts_with(&mine) && l.contains("-live"))
    );
    drop(net);
}
