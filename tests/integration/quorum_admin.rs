//! The admin commands on a quorum (several --url): `release --force` reaches every node,
//! `status` and `list` read every node and say what a majority holds.

use super::quorum::lock_keys_left;
use crate::common::*;

#[test]
fn release_force_reaches_every_node() {
    let dir = TempDir::new();
    let servers = start_servers(3);
    let (holder, _) = Redlock::run_quorum(&servers)
        .key("q")
        .ttl("1s")
        .hold(&dir, "a");
    let out = Redlock::admin_quorum("release", &servers)
        .key("q")
        .arg("--force")
        .any_stdout()
        .output();
    assert_eq!(out.stdout.lines().count(), 3, "{}", out.stdout);
    for (line, server) in out.stdout.lines().zip(&servers) {
        assert!(
            line.starts_with(&format!("127.0.0.1:{}: released lock 'q'", server.port())),
            "{line}"
        );
    }
    holder.finish().assert_code(76);
    for server in &servers {
        assert_eq!(lock_keys_left(server), Vec::<String>::new());
    }
}

/// `status` with several --url reads every node: the majority's verdict first, then each node's
/// view; a node that does not answer is a stderr line, a majority silent is exit 69.
#[test]
fn status_reads_every_node_and_says_what_the_majority_holds() {
    let dir = TempDir::new();
    let servers = start_servers(3);
    // Its stdout, read below.
    let status = |json: bool| {
        let args: &[&str] = if json {
            &["--key", "qs", "--json"]
        } else {
            &["--key", "qs"]
        };
        Redlock::admin_quorum("status", &servers)
            .args(args)
            .any_stdout()
    };

    let out = status(false).output();
    assert!(
        out.stdout
            .starts_with("lock 'qs' is free on 3 of 3 nodes (a majority)\n"),
        "{}",
        out.stdout
    );

    let (holder, token) = Redlock::run_quorum(&servers).key("qs").hold(&dir, "a");
    let token = token.as_str();
    let out = status(false).output();
    assert_eq!(
        out.stdout.lines().next(),
        Some(format!("lock 'qs' is held on 3 of 3 nodes (a majority), token {token}").as_str())
    );
    for server in &servers {
        let node = format!("127.0.0.1:{}: ", server.port());
        assert!(
            out.stdout
                .contains(&format!("{node}lock 'qs' (redlock:{{qs}}) is held\n"))
                && out.stdout.contains(&format!("{node}  token:    {token}\n")),
            "{node}: {}",
            out.stdout
        );
    }
    std::fs::write(dir.join("a.go"), "").unwrap();
    holder.finish().assert_code(0);

    // Nodes that stop answering (paused: their ports stay theirs). A lock written by hand, so
    // that no renewal or release changes it meanwhile.
    for server in &servers {
        let _: () = redis::cmd("SET")
            .arg(lock_key("qs"))
            .arg("tok")
            .arg("PX")
            .arg(60_000)
            .query(&mut server.conn())
            .unwrap();
    }
    servers[2].pause();
    let out = status(true)
        .stderr_lines(1)
        .stderr_contains(&format!(
            "127.0.0.1:{}: cannot read lock 'qs'",
            servers[2].port()
        ))
        .output();
    assert!(
        out.stdout.starts_with(
            r#"{"key":"qs","state":"held","token":"tok","agreeing":2,"nodes":3,"answered":2,"per_node":[{"node":"127.0.0.1:"#
        ),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches(r#""error":null"#).count(),
        2,
        "{}",
        out.stdout
    );

    servers[1].pause();
    let out = status(false)
        .status(69)
        .stderr_contains("on a majority: 2 of 3 nodes did not answer")
        .output();
    servers[1].resume();
    servers[2].resume();
    assert!(
        out.stdout.starts_with(
            "lock 'qs' has no majority on 3 nodes: held on 1, free on 0, unanswered on 2\n"
        ),
        "{}",
        out.stdout
    );
}

/// `list` with several --url scans every node and lists the locks a majority holds, and those
/// held on some nodes where no majority agrees on anything, as such; free on a majority is free.
#[test]
fn list_reads_every_node_and_shows_what_a_majority_holds() {
    let servers = start_servers(3);
    // a: held on all three nodes; b: on two; c: on one (free on a majority: not listed);
    // d: two tokens and one free node, no majority either way.
    for (i, server) in servers.iter().enumerate() {
        let mut conn = server.conn();
        let mut set = |name: &str| {
            redis::cmd("SET")
                .arg(lock_key(name))
                .arg(format!("tok-{name}"))
                .arg("PX")
                .arg(60_000)
                .query::<()>(&mut conn)
                .unwrap()
        };
        set("a");
        if i < 2 {
            set("b");
        }
        if i == 0 {
            set("c");
            set("d");
        }
    }
    let _: () = redis::cmd("SET")
        .arg(lock_key("d"))
        .arg("tok-other")
        .arg("PX")
        .arg(60_000)
        .query(&mut servers[1].conn())
        .unwrap();
    // Its stdout, read below.
    let list = |json: bool| {
        let args: &[&str] = if json { &["--json"] } else { &[] };
        Redlock::admin_quorum("list", &servers)
            .args(args)
            .any_stdout()
    };

    let out = list(false).output();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    for (line, (name, on)) in lines.iter().zip([
        ("a", "on 3 of 3 nodes"),
        ("b", "on 2 of 3 nodes"),
        ("d", "no majority: held on 2 of 3 nodes"),
    ]) {
        assert!(
            line.starts_with(&format!("{name}\texpires in "))
                && line.ends_with(&format!("\ttoken tok-{name}\t{on}")),
            "{line}"
        );
    }

    let out = list(true).output();
    assert!(
        out.stdout.starts_with(
            r#"[{"key":"a","state":"held","token":"tok-a","agreeing":3,"nodes":3,"answered":3,"per_node":["#
        ),
        "{}",
        out.stdout
    );
    // Per lock, then per node: a 1 + 3, b 1 + 2, d 0 + 2.
    assert_eq!(
        out.stdout.matches(r#""state":"held""#).count(),
        9,
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches(r#""state":"split""#).count(),
        1,
        "{}",
        out.stdout
    );

    // A majority silent: exit 69, each silent node named.
    servers[1].pause();
    servers[2].pause();
    list(false)
        .status(69)
        .stderr_lines(3)
        .stderr_contains("cannot list locks on a majority: 2 of 3 nodes did not answer")
        .output();
    servers[1].resume();
    servers[2].resume();
}
