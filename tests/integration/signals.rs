//! Signals sent to redlock: forwarded to the command's group without escalation, a stop request
//! (TERM) with --kill-after and a later second one escalating to SIGKILL (timeout(1)'s double
//! TERM being one request), signals ignored at start (nohup), redlock dying of its command's
//! signal, job control without a terminal, SIGSTOP of redlock, SIGKILL of redlock itself, and
//! signals while waiting.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

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

/// The command died of the signal: redlock releases the lock and dies of it too.
#[test]
fn terminating_signals_kill_a_default_command_and_redlock_dies_of_it() {
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
        out.assert_signal(n);
        assert!(!group_alive(pid), "{sig}: group survived");
        assert_eq!(redis.get(&lock_key("sig")), None);
    }
}

/// `nohup redlock ...` (and INT ignored, as a shell's `cmd &` does): a signal ignored when
/// redlock starts stays ignored, by redlock and by the command, and is not forwarded, so a
/// logout's SIGHUP ends neither, as under `nohup flock`.
#[test]
fn signals_ignored_at_start_stay_ignored_and_are_not_forwarded() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("nohup")
        .sh(&hold_script(&dir, "n"))
        .through(["nohup", "sh", "-c", r#"trap '' INT; exec "$0" "$@""#])
        .spawn();
    wait_for_file(&dir.join("n.ready"));
    let pid = wait_for_pid(&dir.join("n.pid"));
    // HUP (bit 0) and INT (bit 1) are ignored by the command too.
    assert_eq!(ignored_signals(pid) & 0b11, 0b11, "the command's SigIgn");
    // The logout: HUP to redlock and to the command's group.
    proc.signal(Signal::SIGHUP);
    proc.signal(Signal::SIGINT);
    nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGHUP).unwrap();
    // Something redlock does hear, to know the two above were taken (or not) by now.
    proc.signal(Signal::SIGWINCH);
    let mut proc = proc;
    assert!(proc.running(), "redlock ended on an ignored signal");
    assert!(pid_alive(pid), "the command ended on an ignored signal");
    touch(&dir.join("n.go"));
    proc.finish().assert_code(0);
    assert_eq!(redis.get(&lock_key("nohup")), None);
}

/// HUP (a reload), QUIT (a thread dump) and INT are the command's to interpret: one that handles
/// them and keeps running is never killed for it, however long past --kill-after.
#[test]
fn forwarded_signals_never_escalate() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let got = dir.sh("got");
    let script = format!(
        "trap 'echo HUP >> {got}' HUP; trap 'echo QUIT >> {got}' QUIT; \
         trap 'echo INT >> {got}' INT; {}",
        hold_script(&dir, "r")
    );
    let proc = Redlock::run(&redis)
        .key("reload")
        .args(["--kill-after", "100ms", "-v"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("r.ready"));
    for sig in [Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGINT] {
        proc.signal(sig);
        let name = &sig.as_str()[3..];
        wait_until(PATIENCE, &format!("the command to trap {name}"), || {
            read(&dir.join("got")).lines().any(|l| l == name)
        });
    }
    // Well past --kill-after: nothing was escalated.
    std::thread::sleep(Duration::from_millis(400));
    let mut proc = proc;
    assert!(proc.running(), "{}", proc.stderr_so_far());
    touch(&dir.join("r.go"));
    let out = proc.finish();
    out.assert_code(0);
    assert!(!out.stderr.contains("SIGKILL"), "{}", out.stderr);
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
        .args(["--kill-after", "400ms", "-v", "--log-format", "json"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    let sent = Instant::now();
    proc.signal(Signal::SIGTERM);
    let out = proc.finish();
    let took = sent.elapsed();
    out.assert_signal(9);
    // The SIGKILL is reported, with why.
    assert!(
        out.stderr.contains(r#""event":"killed""#) && out.stderr.contains("grace"),
        "{}",
        out.stderr
    );
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
        .args(["--kill-after", "25s", "-v"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    let first = Instant::now();
    proc.signal(Signal::SIGTERM);
    wait_until(PATIENCE, "the first TERM to reach the command", || {
        !read(&dir.join("terms")).is_empty()
    });
    let mut proc = proc;
    assert!(
        proc.running(),
        "one TERM ended it although the command trapped it"
    );
    // A deliberate second request comes later than timeout(1)'s repeat (500 ms).
    std::thread::sleep(Duration::from_millis(600).saturating_sub(first.elapsed()));
    let sent = Instant::now();
    proc.signal(Signal::SIGTERM);
    let out = proc.finish();
    out.assert_signal(9);
    assert!(
        out.stderr.contains("sending SIGKILL") && out.stderr.contains("a second SIGTERM"),
        "{}",
        out.stderr
    );
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
    proc.finish().assert_signal(9);
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
        out.assert_signal(n);
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

/// timeout(1) sends TERM to redlock, then to its own process group, redlock included: one stop
/// request, so the command's TERM handler runs to its end rather than being SIGKILLed.
#[test]
fn timeouts_double_term_is_one_stop_request() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // Several at once, each its own lock: the race showed 2 times in 5.
    let tries: Vec<_> = (0..6)
        .map(|i| {
            let script = format!(
                "trap 'sleep 0.3; echo cleaned > {cleaned}; exit 3' TERM; touch {ready}; \
                 while :; do sleep 0.05; done",
                cleaned = dir.sh(&format!("{i}.cleaned")),
                ready = dir.sh(&format!("{i}.ready")),
            );
            Redlock::run(&redis)
                .key(format!("timeout{i}"))
                .ttl("5s")
                .sh(&script)
                .through(["timeout", "1"])
                .spawn()
        })
        .collect();
    let mut ready = 0;
    for (i, proc) in tries.into_iter().enumerate() {
        let out = proc.finish();
        // Under a loaded machine a try may not have started its command within the second.
        if !dir.join(&format!("{i}.ready")).exists() {
            continue;
        }
        ready += 1;
        out.assert_code(124);
        assert_eq!(
            read(&dir.join(&format!("{i}.cleaned"))),
            "cleaned\n",
            "try {i}: the command's cleanup did not run\n{}",
            out.stderr
        );
        assert_eq!(redis.get(&lock_key(&format!("timeout{i}"))), None);
    }
    assert!(
        ready >= 3,
        "only {ready} of 6 tries started their command in time"
    );
}

/// A stop request from outside gets the whole --kill-after, even longer than the ttl: the lease
/// is renewed meanwhile.
#[test]
fn the_grace_after_a_stop_request_may_outlast_the_ttl() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "trap 'sleep 1.5; echo done > {done}; exit 5' TERM; {hb}",
        done = dir.sh("done"),
        hb = heartbeat_script(&dir, "g")
    );
    let proc = Redlock::run(&redis)
        .key("grace")
        .ttl("1s")
        .args(["--kill-after", "4s"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("g.ready"));
    proc.signal(Signal::SIGTERM);
    let out = proc.finish();
    out.assert_code(5);
    assert_eq!(read(&dir.join("done")), "done\n");
    assert_eq!(redis.get(&lock_key("grace")), None);
}

/// `kill -STOP <redlock>` (a debugger, a stuck parent): redlock renews nothing, so the watchdog
/// kills the command before the lease runs out, before any contender can take the lock; when
/// redlock is continued, it exits 76.
#[test]
fn a_stopped_redlocks_command_is_dead_before_a_contender_starts() {
    stopped_holder_then_contender(&[], &[]);
}

/// The same for a semaphore's slot, and for a shared holder against an exclusive contender.
#[test]
fn a_stopped_semaphore_or_shared_holders_command_is_dead_before_a_contender_starts() {
    stopped_holder_then_contender(&["--limit", "1"], &["--limit", "1"]);
    stopped_holder_then_contender(&["--shared"], &[]);
}

/// A holder (with `first` options) stopped with SIGSTOP; a contender (with `contender`) must
/// find its command dead when its own starts; the holder, continued, exits 76.
fn stopped_holder_then_contender(first: &[&str], contender: &[&str]) {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let first = Redlock::run(&redis)
        .key("frozen")
        .ttl("1s")
        .args(first)
        .args(["-v", "--log-format", "json"])
        .sh(&heartbeat_script(&dir, "a"))
        .spawn();
    wait_for_file(&dir.join("a.ready"));
    let pid = wait_for_pid(&dir.join("a.pid"));
    first.signal(Signal::SIGSTOP);
    // The contender's command records what it finds of the first command when it starts:
    // a zombie nobody reaped yet (redlock is stopped) or nothing.
    let contender = Redlock::run(&redis)
        .key("frozen")
        .ttl("1s")
        .args(contender)
        .wait("10s")
        .sh(&format!(
            "s=$(cut -d' ' -f3 /proc/{pid}/stat 2>/dev/null); echo \"${{s:-gone}}\" > {found}",
            found = dir.sh("found")
        ))
        .spawn();
    contender.finish().assert_code(0);
    let found = read(&dir.join("found"));
    assert!(
        found == "Z\n" || found == "gone\n",
        "the first command was {found:?} when the contender's started"
    );
    first.signal(Signal::SIGCONT);
    let out = first.finish();
    out.assert_code(76);
    // A SIGKILL is reported once redlock runs again (the watchdog's, or redlock's own if its
    // timer woke first: the command is dead either way).
    assert!(out.stderr.contains(r#""event":"killed""#), "{}", out.stderr);
}

/// Spawns redlock in a process group of its own, whose parent (this test) is outside it in the
/// same session: a group that job-control stops are not discarded for.
fn spawn_in_own_group(redlock: Redlock) -> Proc {
    let mut cmd = redlock.into_command();
    cmd.process_group(0);
    Proc::spawn(cmd)
}

fn wait_for_state(pid: i32, want: char, what: &str) {
    wait_until(PATIENCE, what, || proc_state(pid) == Some(want));
}

/// `kill -TSTP <redlock>` without a terminal: the command's group stops, then redlock; SIGCONT
/// renews the lease and continues the command.
#[test]
fn tstp_stops_the_command_then_redlock_and_cont_continues_both() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A long lease: while redlock is stopped its watchdog kills the command at the lease's
    // kill line, and on a loaded machine a few seconds were once too short a window to see
    // both stopped.
    let proc = spawn_in_own_group(
        Redlock::run(&redis)
            .key("tstp")
            .ttl("20s")
            .arg("-v")
            .sh(&hold_script(&dir, "t")),
    );
    wait_for_file(&dir.join("t.ready"));
    let pid = wait_for_pid(&dir.join("t.pid"));
    proc.signal(Signal::SIGTSTP);
    let start = Instant::now();
    // Each change of the two states, for the message if they are never both stopped.
    let mut seen: Vec<(Duration, Option<char>, Option<char>)> = Vec::new();
    loop {
        if job_stopped(pid) && proc_state(proc.pid()) == Some('T') {
            break;
        }
        let now = (proc_state(pid), proc_state(proc.pid()));
        if seen.last().is_none_or(|&(_, c, r)| (c, r) != now) {
            seen.push((start.elapsed(), now.0, now.1));
        }
        assert!(
            start.elapsed() < PATIENCE,
            "not both stopped (elapsed, command, redlock): {seen:?}\n{}",
            proc.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    proc.signal(Signal::SIGCONT);
    wait_until(PATIENCE, "the command to run again", || {
        proc_state(pid).is_some_and(|s| s != 'T')
    });
    touch(&dir.join("t.go"));
    proc.finish().assert_code(0);
    assert_eq!(redis.get(&lock_key("tstp")), None);
}

/// Continued after its lease ran out: the command is killed without running again, exit 76.
#[test]
fn continued_after_the_lease_ran_out_the_command_never_runs_again_and_exit_76() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = spawn_in_own_group(
        Redlock::run(&redis)
            .key("late")
            .ttl("500ms")
            .sh(&heartbeat_script(&dir, "l")),
    );
    wait_for_file(&dir.join("l.ready"));
    let pid = wait_for_pid(&dir.join("l.pid"));
    proc.signal(Signal::SIGTSTP);
    wait_for_state(proc.pid(), 'T', "redlock to stop");
    // The watchdog kills the stopped command when the lease runs out.
    wait_until(PATIENCE, "the watchdog to kill the command", || {
        proc_state(pid) != Some('T')
    });
    let beats = read_stamps(&dir.join("l.hb")).len();
    wait_until(PATIENCE, "the key to expire", || {
        redis.get(&lock_key("late")).is_none()
    });
    proc.signal(Signal::SIGCONT);
    let out = proc.finish();
    out.assert_code(76);
    assert_eq!(read_stamps(&dir.join("l.hb")).len(), beats, "it ran again");
}

/// `--stop-signal KILL`: the stop request is a SIGKILL, reported like every other one.
#[test]
fn a_kill_stop_signal_is_reported_as_a_sigkill() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("kill")
        .args(["--stop-signal", "KILL", "-v"])
        .sh(&heartbeat_script(&dir, "k"))
        .spawn();
    wait_for_file(&dir.join("k.ready"));
    proc.signal(Signal::SIGTERM);
    let out = proc.finish();
    out.assert_signal(9);
    assert!(
        out.stderr.contains("sending SIGKILL") && out.stderr.contains("the stop signal is KILL"),
        "{}",
        out.stderr
    );
}
