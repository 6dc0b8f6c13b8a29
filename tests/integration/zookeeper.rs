//! What only ZooKeeper shows, on real 3-member ensembles: a member that dies or hangs costs a
//! request, not the run (the leader SIGKILLed or SIGSTOPped during a hold); with no majority
//! the command is stopped before the session could end on the server (76); a session the
//! server ended, or an entry an operator deleted, stops the command (76); fencing tokens rise
//! across a restart of every member; a session shorter than `--ttl` is refused; the URL's
//! chroot, and what nothing is left of; the documented recipe as pasted.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// A command that beats every 50 ms into `<tag>.hb` until `<tag>.go` exists, then exits 0.
fn beating(dir: &TempDir, tag: &str) -> String {
    format!(
        "touch {ready}; while [ ! -e {go} ]; do date +%s%N >> {hb}; sleep 0.05; done",
        ready = dir.sh(&format!("{tag}.ready")),
        go = dir.sh(&format!("{tag}.go")),
        hb = dir.sh(&format!("{tag}.hb")),
    )
}

/// An ensemble whose sessions may last up to a minute (the fixture's default allows 4 s).
fn ensemble() -> ZkEnsemble {
    ZkEnsemble::start_with(ZkOpts {
        extra_config: vec!["maxSessionTimeout=60000".to_owned()],
        ..ZkOpts::default()
    })
}

/// The children of lock `name`'s node under the default prefix.
fn children(zk: &ZkEnsemble, name: &str) -> Vec<String> {
    zk.ls(&format!("/redlock:{{{name}}}"))
}

/// The leader SIGKILLed, then the leader SIGSTOPped: the session moves to another member, and
/// the command runs on to its end and exits 0.
#[test]
fn the_leader_killed_or_frozen_during_a_hold_costs_nothing() {
    let mut zk = ensemble();
    let dir = TempDir::new();
    for fault in ["kill", "stop"] {
        let tag = format!("h-{fault}");
        let holder = Redlock::run_at(&zk.url())
            .key("steady")
            // A frozen leader keeps every member from serving until its followers give up on it
            // (syncLimit: 2 s here) and elect another (0.4 s, more under load); the client
            // leaves its silent member after a quarter of the session's timeout (2 s), and may
            // try the frozen one again (2 s more). 8 s covers that on a loaded machine, as the
            // default 30 s covers ZooKeeper's default 10 s of syncLimit.
            .ttl("8s")
            .sh(&beating(&dir, &tag))
            .spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        let leader = zk.leader();
        match fault {
            "kill" => zk.kill(leader),
            _ => zk.stop(leader),
        }
        // Longer than the lease: the run holds on only if a renewal got through the fault.
        std::thread::sleep(Duration::from_secs(10));
        touch(&dir.join(&format!("{tag}.go")));
        let out = holder.finish_within(Duration::from_secs(20));
        assert_eq!(out.code(), 0, "{fault}: {}", out.stderr);
        match fault {
            "kill" => zk.restart(leader),
            _ => zk.resume(leader),
        }
        zk.wait_healthy();
    }
}

/// Two members of three SIGSTOPped under a hold: no renewal is answered, and the command is
/// stopped (76) before the session could have ended on the server.
#[test]
fn with_no_majority_the_command_is_stopped_before_its_session_could_end() {
    let mut zk = ensemble();
    let dir = TempDir::new();
    let holder = Redlock::run_at(&zk.url())
        .key("minority")
        .ttl("3s")
        .sh(&beating(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    // The last renewal that could have counted was sent before this.
    let cut = now_ns();
    let leader = zk.leader();
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    zk.stop(others[0]);
    zk.stop(others[1]);
    let out = holder.finish_within(Duration::from_secs(20));
    out.assert_code(76);
    let last = *read_stamps(&dir.join("h.hb")).last().unwrap();
    assert!(
        last < cut + 3_000_000_000,
        "the command beat {} ms after the session could have ended",
        (last - cut - 3_000_000_000) / 1_000_000
    );
    for i in others {
        zk.resume(i);
    }
}

/// An operator deletes the holder's entry; then a holder whose redlock froze (its lease thread
/// and all) past the session's timeout, whose session the server ended: each command is
/// stopped (76), and the record says the run lost its lock.
#[test]
fn a_deleted_entry_or_an_ended_session_stops_the_command() {
    let zk = ensemble();
    let dir = TempDir::new();
    let holder = Redlock::run_at(&zk.url())
        .key("deleted")
        .ttl("3s")
        .sh(&beating(&dir, "deleted"))
        .spawn();
    wait_for_file(&dir.join("deleted.ready"));
    let entries: Vec<String> = children(&zk, "deleted")
        .into_iter()
        .filter(|c| c.starts_with("lock-"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(zk.delete(&format!("/redlock:{{deleted}}/{}", entries[0])));
    let out = holder.finish_within(Duration::from_secs(10));
    out.assert_code(76);
    assert!(out.stderr.contains("lost lock"), "{}", out.stderr);
    Redlock::admin_at("history", &zk.url())
        .key("deleted")
        .stdout_contains("lock_lost (exit 76)")
        .output();

    // A redlock frozen whole (SIGSTOP; its watchdog, a process of its own, is not): the
    // watchdog stops the command at the lease's end, the server ends the session a little
    // after, and a waiter takes the lock.
    let holder = Redlock::run_at(&zk.url())
        .key("expired")
        .ttl("2s")
        .sh(&beating(&dir, "expired"))
        .spawn();
    wait_for_file(&dir.join("expired.ready"));
    holder.signal(Signal::SIGSTOP);
    let waiter = Redlock::run_at(&zk.url())
        .key("expired")
        .ttl("2s")
        .wait("20s")
        .sh("true")
        .spawn();
    waiter.finish_within(Duration::from_secs(20)).assert_code(0);
    holder.signal(Signal::SIGCONT);
    let out = holder.finish_within(Duration::from_secs(20));
    out.assert_code(76);
}

/// Every member killed and started again on its data: the next tokens are larger still.
#[test]
fn tokens_rise_across_a_restart_of_every_member() {
    let mut zk = ensemble();
    let dir = TempDir::new();
    let token = |zk: &ZkEnsemble| {
        Redlock::run_at(&zk.url())
            .key("t")
            .sh(&format!(
                "echo $REDLOCK_FENCING_TOKEN >> {}",
                dir.sh("tokens")
            ))
            .output()
            .assert_code(0);
    };
    token(&zk);
    token(&zk);
    zk.restart_all();
    token(&zk);
    let tokens: Vec<i64> = read(&dir.join("tokens"))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 3);
    assert!(tokens.windows(2).all(|w| w[1] > w[0]), "{tokens:?}");
}

/// A `--ttl` longer than the longest session the ensemble gives is refused in one line (69),
/// the command not run, nothing left queued; a chroot that is not there likewise, and every
/// admin command says it is not there.
#[test]
fn a_ttl_past_the_ensembles_sessions_or_a_missing_chroot_is_refused() {
    let zk = ZkEnsemble::start();
    let dir = TempDir::new();
    let out = Redlock::run_at(&zk.url())
        .key("long")
        .ttl("30s")
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    let url = zk.url();
    assert_snapshot(
        "zk-ttl-past-sessions.stderr",
        &out.stderr,
        &[
            (url.as_str(), "zk://10.0.0.1:2181"),
            ("lock 'long'", "lock 'k'"),
        ],
    );
    assert!(!dir.join("marker").exists());
    assert_eq!(
        zk.stat("/redlock:{long}"),
        None,
        "nothing queued, not even the lock's node"
    );

    let out = Redlock::run_at(&format!("{}/no/such", zk.url()))
        .key("c")
        .ttl("2s")
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    let url = format!("{}/no/such", zk.url());
    assert_snapshot(
        "zk-no-chroot.stderr",
        &out.stderr,
        &[
            (url.as_str(), "zk://10.0.0.1:2181/no/such"),
            ("lock 'c'", "lock 'k'"),
        ],
    );
    assert!(!dir.join("marker").exists());
    // Every admin command says so too, rather than read every lock as free (or list none).
    for (sub, key, extra) in [
        ("status", true, &[][..]),
        ("history", true, &[]),
        ("check", true, &["--max-age", "1h"]),
        ("release", true, &["--force"]),
        ("list", false, &[]),
    ] {
        let admin = Redlock::admin_at(sub, &url);
        let admin = if key { admin.key("c") } else { admin };
        let out = admin
            .args(extra)
            .any_status()
            .any_stdout()
            .any_stderr()
            .output();
        assert!(
            out.stderr.contains("has no node for the URL's chroot"),
            "{sub}: {}",
            out.stderr
        );
        // check speaks as a monitoring plugin: UNKNOWN is 3.
        let code = if sub == "check" { 3 } else { 69 };
        assert_eq!(out.status.code(), Some(code), "{sub}: {}", out.stderr);
    }
    // Made, it takes the locks under it, and nothing of them outside it.
    zk.create("/no", "");
    zk.create("/no/such", "");
    Redlock::run_at(&format!("{}/no/such", zk.url()))
        .key("c")
        .ttl("2s")
        .sh("true")
        .output()
        .assert_code(0);
    assert!(zk.ls("/no/such").contains(&"redlock:{c}".to_owned()));
    assert!(!zk.ls("/").iter().any(|c| c.starts_with("redlock:")));
}

/// docs/zookeeper.md's access control as written: the digest its `openssl` line gives, the
/// chroot its `zkCli.sh` line makes, a run as the user it names (and its recipe line, once a
/// night), and a run without the user refused. The ensemble allows a minute's sessions, as the
/// page says the recipe's `--ttl 60s` needs.
#[test]
fn the_documented_access_control_and_recipe_run_as_written() {
    let zk = ensemble();
    let dir = TempDir::new();
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/zookeeper.md"));
    let block = |starts: &str| -> String {
        page.lines()
            .map(str::trim)
            .find(|l| l.starts_with(starts))
            .unwrap_or_else(|| panic!("no line starting {starts:?} in docs/zookeeper.md"))
            .to_owned()
    };
    let hash = block("echo -n 'redlock:PASSWORD'").replace("PASSWORD", "s3cret");
    let out = std::process::Command::new("sh")
        .args(["-c", &hash])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let digest = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let create = block("create /jobs").replace("DIGEST", &digest);
    let words: Vec<&str> = create.split_whitespace().collect();
    // zkCli's quoting: "" is the empty data.
    let args: Vec<&str> = words
        .iter()
        .map(|w| if *w == "\"\"" { "" } else { w })
        .collect();
    let made = zk.zkcli(&args);
    assert!(
        made.stderr.contains("Created /jobs") || made.stdout.contains("Created /jobs"),
        "{made:?}"
    );

    std::fs::write(dir.join("password"), "s3cret\n").unwrap();
    let hosts = zk.url().strip_prefix("zk://").unwrap().to_owned();
    let url = format!("zk://redlock@{hosts}/jobs");
    let line = block("0 3 * * *");
    let options: Vec<&str> = line
        .split("redlock run ")
        .nth(1)
        .unwrap()
        .split(" -- ")
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let mut words = Vec::new();
    let mut iter = options.iter();
    while let Some(word) = iter.next() {
        if *word == "--splay" {
            iter.next();
            words.extend(["--splay", "1ms"]);
        } else {
            words.push(*word);
        }
    }
    let as_user = || {
        Redlock::run_at(&url)
            .env("REDLOCK_PASSWORD_FILE", dir.join("password"))
            .args(&words)
    };
    as_user().sh("true").output();
    // Once a night: the next run within --min-interval skips.
    as_user().sh("true").status(75).output();
    Redlock::admin_at("history", &url)
        .env("REDLOCK_PASSWORD_FILE", dir.join("password"))
        .key("backup")
        .stdout_contains("success (exit 0)")
        .output();
    // The nodes are the user's: without it, ZooKeeper refuses.
    let out = Redlock::run_at(&format!("zk://{hosts}/jobs"))
        .key("backup")
        .ttl("5s")
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    let url = format!("zk://{hosts}/jobs");
    assert_snapshot(
        "zk-not-authorized.stderr",
        &out.stderr,
        &[
            (url.as_str(), "zk://10.0.0.1:2181/jobs"),
            ("lock 'backup'", "lock 'k'"),
        ],
    );
    assert!(!dir.join("marker").exists());
}

/// `release --force` with three waiters queued: the counter it prints is below the token of
/// every run let in after it (a hostile round found a waiter's token at or below it, when the
/// counter was read after the waiters had queued again).
#[test]
fn a_forced_release_prints_a_counter_every_later_token_exceeds() {
    let zk = ensemble();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&zk.url())
        .key("f")
        .ttl("6s")
        .hold(&dir, "h");
    let waiters: Vec<Proc> = (0..3)
        .map(|i| {
            Redlock::run_at(&zk.url())
                .key("f")
                .ttl("6s")
                .wait("30s")
                .sh(&format!(
                    "echo $REDLOCK_FENCING_TOKEN > {}",
                    dir.sh(&format!("w{i}"))
                ))
                .spawn()
        })
        .collect();
    // Every waiter queued: four entries.
    let queued = std::time::Instant::now();
    while children(&zk, "f")
        .iter()
        .filter(|c| c.starts_with("lock-"))
        .count()
        < 4
    {
        assert!(
            queued.elapsed() < Duration::from_secs(15),
            "the waiters did not queue"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Redlock::admin_at("release", &zk.url())
        .key("f")
        .args(["--force"])
        .stdout_contains("fencing counter now ")
        .output();
    let counter: i64 = out
        .stdout
        .rsplit("fencing counter now ")
        .next()
        .and_then(|s| s.trim().trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no counter in {:?}", out.stdout));
    for (i, w) in waiters.into_iter().enumerate() {
        w.finish_within(Duration::from_secs(40)).assert_code(0);
        let token: i64 = wait_for_line(&dir.join(&format!("w{i}"))).parse().unwrap();
        assert!(
            token > counter,
            "waiter {i}'s token {token} after counter {counter}"
        );
    }
    assert_eq!(holder.finish_within(Duration::from_secs(20)).code(), 76);
}

/// A node named as redlock names an entry but holding no holder's record (made by hand) is
/// told as a node redlock did not make, as etcd tells a key that is not a holder's: `status`
/// says so (69) and names the way out, `release --force` removes it, and a run then takes the
/// lock. Before, `status` showed it as a holder with a blank token.
#[test]
fn a_hand_made_node_in_the_queue_is_told_as_not_redlocks() {
    let zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        ..ZkOpts::default()
    });
    zk.create("/redlock:{f}", "");
    zk.create("/redlock:{f}/lock-abc-0000000001", "x");
    let out = Redlock::admin_at("status", &zk.url())
        .key("f")
        .status(69)
        .any_stderr()
        .output();
    assert!(
        out.stderr
            .contains("lock-abc-0000000001 is a node in its queue that redlock did not make"),
        "{}",
        out.stderr
    );
    let out = Redlock::admin_at("release", &zk.url())
        .key("f")
        .arg("--force")
        .any_stdout()
        .output();
    assert!(
        out.stdout.contains("redlock did not make"),
        "{}",
        out.stdout
    );
    Redlock::run_at(&zk.url())
        .key("f")
        .ttl("2s")
        .sh("true")
        .output()
        .assert_code(0);
}

/// A lock node this user may not read (another user's ACL) is said on stderr by `list`, the
/// locks it can read are listed all the same, and the exit status (69) says the listing is not
/// whole.
#[test]
fn list_says_which_lock_it_may_not_read_and_exits_69() {
    let zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        ..ZkOpts::default()
    });
    let dir = TempDir::new();
    // Another user's digest (of "other:pw"), with every right; nobody else may read it.
    let made = zk.zkcli(&[
        "create",
        "/redlock:{private}",
        "",
        "digest:other:5bkAUg/cPk53D2U+ZeVFEoNSa2c=:cdrwa",
    ]);
    assert!(made.stderr.contains("Created"), "{made:?}");
    let (holder, _) = Redlock::run_at(&zk.url())
        .key("mine")
        .ttl("3s")
        .hold(&dir, "mine");
    let out = Redlock::admin_at("list", &zk.url())
        .status(69)
        .any_stdout()
        .stderr_lines(1)
        .stderr_contains("cannot read lock 'private'")
        .output();
    assert!(out.stdout.starts_with("mine\t"), "{}", out.stdout);
    touch(&dir.join("mine.go"));
    holder.finish().assert_code(0);
}

/// A record redlock may not write (an operator's ACL on it): the lock is taken and given back
/// as ever and the command runs (0), and stderr says once that the run goes unrecorded.
#[test]
fn a_record_redlock_may_not_write_is_said_once_and_the_run_goes_on() {
    let dir = TempDir::new();
    let zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        ..ZkOpts::default()
    });
    Redlock::run_at(&zk.url())
        .key("acl")
        .ttl("2s")
        .sh("true")
        .output()
        .assert_code(0);
    let shut = zk.zkcli(&[
        "setAcl",
        "/redlock:{acl}/record",
        "digest:other:x1nq8J5GOJVPY6zgBzvQZ5jYyDU=:cdrwa",
    ]);
    assert!(shut.status.success(), "{shut:?}");
    let out = Redlock::run_at(&zk.url())
        .key("acl")
        .ttl("2s")
        .sh(&marker_script(&dir))
        .any_stderr()
        .output();
    out.assert_code(0);
    assert!(dir.join("marker").exists());
    let said = out
        .stderr
        .lines()
        .filter(|l| l.contains("the run's record could not be written"))
        .count();
    assert_eq!(said, 1, "{}", out.stderr);
    assert!(out.stderr.contains("not authorized"), "{}", out.stderr);
    assert!(children(&zk, "acl").iter().all(|c| !c.starts_with("lock-")));
    // What reads the record says it may not, as docs/zookeeper.md has it.
    for (command, code) in [("status", 69), ("history", 69), ("check", 3)] {
        let out = Redlock::admin_at(command, &zk.url())
            .key("acl")
            .args(if command == "check" {
                &["--max-age", "1h"][..]
            } else {
                &[][..]
            })
            .status(code)
            .any_stdout()
            .any_stderr()
            .output();
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains("not authorized"), "{command}: {said}");
    }
}
