//! Signals sent to redlock: forwarded to the command's group, --kill-after after a terminating
//! one, a second one escalating to SIGKILL, SIGKILL of redlock itself, and signals while waiting.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;

#[test]
fn term_is_forwarded_and_the_trap_decides_the_exit_status() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for (code, tag) in [(0, "a"), (3, "b")] {
        let script = format!(
            "trap 'echo trapped > {f}; exit {code}' TERM; {hb}",
            f = dir.sh(&format!("{tag}.trapped")),
            hb = heartbeat_script(&dir, tag)
        );
        let proc = Redlock::run(&redis).key("term").sh(&script).spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        proc.signal(Signal::SIGTERM);
        let out = proc.finish();
        out.assert_code(code);
        assert_eq!(read(&dir.join(&format!("{tag}.trapped"))), "trapped\n");
        assert_eq!(redis.get(&lock_key("term")), None, "lock not released");
    }
}

#[test]
fn terminating_signals_kill_a_default_command_with_128_plus_n() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    for (sig, n) in [
        (Signal::SIGHUP, 1),
        (Signal::SIGINT, 2),
        (Signal::SIGTERM, 15),
    ] {
        let tag = format!("{n}");
        let proc = Redlock::run(&redis)
            .key("sig")
            .sh(&heartbeat_script(&dir, &tag))
            .spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        let pid = wait_for_pid(&dir.join(&format!("{tag}.pid")));
        proc.signal(sig);
        let out = proc.finish();
        out.assert_code(128 + n);
        assert!(!group_alive(pid), "{sig}: group survived");
        assert_eq!(redis.get(&lock_key("sig")), None);
    }
}

/// Started with HUP and INT ignored (as `nohup` and a shell's `cmd &` do): redlock still hears
/// them and forwards them, and the command starts with their default action, so HUP ends it.
#[test]
fn signals_ignored_by_redlocks_parent_are_still_forwarded_and_reset_for_the_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("nohup")
        .sh(&heartbeat_script(&dir, "n"))
        .through(["sh", "-c", r#"trap '' HUP INT; exec "$0" "$@""#])
        .spawn();
    wait_for_file(&dir.join("n.ready"));
    let pid = wait_for_pid(&dir.join("n.pid"));
    proc.signal(Signal::SIGHUP);
    let out = proc.finish();
    out.assert_code(129);
    assert!(!group_alive(pid), "group survived");
    assert_eq!(redis.get(&lock_key("nohup")), None);
}

#[test]
fn every_listed_signal_is_forwarded() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let got = dir.sh("got");
    // Non-terminating ones: the command keeps running and sees each of them.
    let traps: String = ["USR1", "USR2", "WINCH"]
        .iter()
        .map(|s| format!("trap 'echo {s} >> {got}' {s}; "))
        .collect();
    let script = format!("{traps}{}", hold_script(&dir, "w"));
    let proc = Redlock::run(&redis).key("fwd").sh(&script).spawn();
    wait_for_file(&dir.join("w.ready"));
    for (sig, name) in [
        (Signal::SIGUSR1, "USR1"),
        (Signal::SIGUSR2, "USR2"),
        (Signal::SIGWINCH, "WINCH"),
    ] {
        proc.signal(sig);
        wait_until(PATIENCE, &format!("the command to trap {name}"), || {
            read(&dir.join("got")).lines().any(|l| l == name)
        });
    }
    touch(&dir.join("w.go"));
    proc.finish().assert_code(0);

    // Terminating ones: the command's trap exits and its status is redlock's.
    for (sig, name, code) in [
        (Signal::SIGHUP, "HUP", 11),
        (Signal::SIGINT, "INT", 12),
        (Signal::SIGQUIT, "QUIT", 13),
    ] {
        let file = dir.sh(name);
        let script = format!(
            "trap 'echo {name} > {file}; exit {code}' {name}; {}",
            hold_script(&dir, name)
        );
        let proc = Redlock::run(&redis).key("fwd").sh(&script).spawn();
        wait_for_file(&dir.join(&format!("{name}.ready")));
        proc.signal(sig);
        proc.finish().assert_code(code);
        assert_eq!(read(&dir.join(name)), format!("{name}\n"));
    }
}

#[test]
fn command_ignoring_term_is_killed_after_kill_after() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("trap '' TERM; {}", heartbeat_script(&dir, "w"));
    let proc = Redlock::run(&redis)
        .key("stubborn")
        .args(["--kill-after", "400ms"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    let sent = Instant::now();
    proc.signal(Signal::SIGTERM);
    let out = proc.finish();
    let took = sent.elapsed();
    out.assert_code(137);
    assert!(
        took >= Duration::from_millis(350),
        "SIGKILL after {took:?}, before --kill-after 400ms"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(!group_alive(pid), "group survived");
    assert_eq!(redis.get(&lock_key("stubborn")), None);
}

#[test]
fn second_term_kills_at_once() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "trap 'echo term >> {t}' TERM; {hb}",
        t = dir.sh("terms"),
        hb = heartbeat_script(&dir, "w")
    );
    let proc = Redlock::run(&redis)
        .key("twice")
        .ttl("60s")
        .args(["--kill-after", "25s"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    proc.signal(Signal::SIGTERM);
    wait_until(PATIENCE, "the first TERM to reach the command", || {
        !read(&dir.join("terms")).is_empty()
    });
    let mut proc = proc;
    assert!(
        proc.running(),
        "one TERM ended it although the command trapped it"
    );
    let sent = Instant::now();
    proc.signal(Signal::SIGTERM);
    let out = proc.finish();
    out.assert_code(137);
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "second TERM took {:?}",
        sent.elapsed()
    );
    assert!(!group_alive(pid), "group survived");
    assert_eq!(redis.get(&lock_key("twice")), None);
}

#[test]
fn sigkill_of_redlock_takes_the_command_down_and_the_key_expires() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A grandchild that ignores TERM and HUP: only a SIGKILL to the whole group ends it.
    let script = format!(
        "(trap '' TERM HUP; exec sleep 300) >/dev/null 2>&1 & echo $! > {bg}; {worker}",
        bg = dir.sh("bg"),
        worker = heartbeat_script(&dir, "w")
    );
    let proc = Redlock::run(&redis)
        .key("orphan")
        .ttl("1s")
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    let bg = wait_for_pid(&dir.join("bg"));
    proc.signal(Signal::SIGKILL);
    wait_pid_dead(pid, Duration::from_secs(2));
    wait_pid_dead(bg, Duration::from_secs(2));
    assert!(
        redis.get(&lock_key("orphan")).is_some(),
        "nobody released the lock, yet it is already gone"
    );
    // Nobody renews it any more: it expires within its 1 s ttl.
    wait_until(
        Duration::from_millis(2500),
        "the orphaned lock to expire",
        || redis.get(&lock_key("orphan")).is_none(),
    );
}

/// A waiter on a held lock that gets `sig` exits 128+N at once and never runs its command.
#[test]
fn terminating_signal_while_waiting_exits_at_once() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis).key("waiting").hold(&dir, "h");

    for (sig, n) in [
        (Signal::SIGTERM, 15),
        (Signal::SIGINT, 2),
        (Signal::SIGHUP, 1),
        (Signal::SIGQUIT, 3),
    ] {
        let mut waiter = Redlock::run(&redis)
            .key("waiting")
            .wait("30s")
            .sh(&marker_script(&dir))
            .spawn();
        wait_until(PATIENCE, "the waiter to connect to redis", || {
            has_tcp_connection(waiter.pid(), redis.port())
        });
        assert!(waiter.running(), "waiter ended: {}", waiter.stderr_so_far());
        let sent = Instant::now();
        waiter.signal(sig);
        let out = waiter.finish();
        out.assert_code(128 + n);
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "{sig} while waiting took {:?}",
            sent.elapsed()
        );
        assert!(!dir.join("marker").exists(), "command ran after {sig}");
        assert_eq!(
            redis.get(&lock_key("waiting")).as_deref(),
            Some(token.as_str())
        );
    }

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}
