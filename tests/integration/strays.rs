//! Signals nobody listed: every signal whose default action would end redlock, real-time ones
//! included, sent to redlock while it runs a command or waits; a command or a background
//! process dying of a real-time signal; `--stop-signal PIPE`; the watchdog killed or stopped.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::common::*;

/// SIGRTMIN and SIGRTMAX as glibc has them on Linux (34 and 64: glibc keeps 32 and 33).
const RTMIN: i32 = 34;
const RTMAX: i32 = 64;

/// Every signal whose default action ends a process (signal(7)), but TERM and KILL: each is
/// forwarded to the command's group, the command dies of it, and redlock releases the lock and
/// dies of it too.
fn terminating() -> Vec<i32> {
    use Signal::*;
    let standard = [
        SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGUSR1, SIGSEGV,
        SIGUSR2, SIGPIPE, SIGALRM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR,
        SIGSYS,
    ];
    standard
        .into_iter()
        .map(|s| s as i32)
        .chain(RTMIN..=RTMAX)
        .collect()
}

fn send(pid: i32, n: i32) {
    let status = std::process::Command::new("kill")
        .args([format!("-{n}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{n} {pid}");
}

#[test]
fn every_terminating_signal_reaches_the_command_and_redlock_dies_of_it_after_releasing() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // In batches that run at once, one lock each: the batch's redlocks are all holding (their
    // commands ready) before any signal goes out.
    for batch in terminating().chunks(13) {
        let procs: Vec<(i32, Proc)> = batch
            .iter()
            .map(|&n| {
                let tag = format!("s{n}");
                // No core files from the signals that dump one (redlock dumps none itself).
                let script = format!("ulimit -c 0; {}", hold_script(&dir, &tag));
                let proc = Redlock::run(&redis).key(&tag).ttl("5s").sh(&script).spawn();
                (n, proc)
            })
            .collect();
        for (n, proc) in &procs {
            wait_for_file(&dir.join(&format!("s{n}.ready")));
            send(proc.pid(), *n);
        }
        for (n, proc) in procs {
            let pid = wait_for_pid(&dir.join(&format!("s{n}.pid")));
            let out = proc.finish();
            assert_eq!(out.signal(), Some(n), "signal {n}: {}", out.stderr);
            assert!(!pid_alive(pid), "signal {n}: the command survived");
            assert_eq!(redis.get(&lock_key(&format!("s{n}"))), None, "signal {n}");
        }
    }
}

/// The case: a command that dies of SIGRTMIN used to leave redlock unable to reap it,
/// renewing its lock for ever. Now it is a signal death like any other, as PID 1 too.
#[test]
fn a_command_that_dies_of_a_real_time_signal_is_a_signal_death() {
    let redis = RedisServer::start();
    for n in [RTMIN, RTMIN + 5, RTMAX] {
        let started = Instant::now();
        let out = Redlock::run(&redis)
            .key("rt")
            .ttl("3s")
            .sh(&format!("kill -{n} $$"))
            .signal(n)
            .stderr("")
            .output();
        assert!(started.elapsed() < Duration::from_secs(3), "{out:?}");
        assert_eq!(redis.get(&lock_key("rt")), None);
    }
    // As PID 1 redlock cannot die of it: it exits 128+N.
    let out = Redlock::run(&redis)
        .key("rt1")
        .sh(&format!("kill -{RTMIN} $$"))
        .through(["unshare", "--pid", "--fork", "--mount-proc"])
        .status(128 + RTMIN)
        .output();
    assert_eq!(redis.get(&lock_key("rt1")), None, "{out:?}");
}

/// A process that left the command's group (a double fork: redlock adopts it as subreaper) and
/// dies of a real-time signal is reaped like any other; the command goes on and keeps its
/// status.
#[test]
fn an_adopted_process_dying_of_a_real_time_signal_is_reaped() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "(sleep 30 & echo $! > {bg}); {}; exit 4",
        hold_script(&dir, "a"),
        bg = dir.sh("bg")
    );
    let proc = Redlock::run(&redis)
        .key("adopt")
        .arg("-vv")
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("a.ready"));
    let bg = wait_for_pid(&dir.join("bg"));
    send(bg, RTMIN + 1);
    wait_until(PATIENCE, "the background process to be reaped", || {
        !pid_alive(bg)
    });
    touch(&dir.join("a.go"));
    let out = proc.finish();
    out.assert_code(4);
    assert!(
        out.stderr.contains(&format!("reaped adopted process {bg}")),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("lost track"), "{}", out.stderr);
    assert_eq!(redis.get(&lock_key("adopt")), None);
}

/// While waiting for the lock there is no command yet: ALRM (as HUP or INT) ends the wait and
/// redlock dies of it; USR1 and the real-time signals, whose meaning the application defines,
/// are ignored (said at -v) and the wait goes on.
#[test]
fn while_waiting_alrm_ends_the_wait_and_real_time_signals_are_ignored() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("w").hold(&dir, "h");
    let waiter = |extra: &str| {
        let waiter = Redlock::run(&redis)
            .key("w")
            .wait("30s")
            .args(["-v", extra])
            .sh(&marker_script(&dir))
            .spawn();
        wait_until(PATIENCE, "the waiter to connect to redis", || {
            has_tcp_connection(waiter.pid(), redis.port())
        });
        waiter
    };
    let mut proc = waiter("--log-format=text");
    send(proc.pid(), RTMIN + 2);
    send(proc.pid(), Signal::SIGUSR1 as i32);
    wait_until(PATIENCE, "the ignored signals to be seen", || {
        proc.stderr_so_far().matches("ignored").count() == 2
    });
    assert!(proc.running(), "{}", proc.stderr_so_far());
    proc.signal(Signal::SIGALRM);
    let out = proc.finish();
    out.assert_signal(Signal::SIGALRM as i32);
    assert!(
        out.stderr.contains("SIGRTMIN+2 while waiting"),
        "{}",
        out.stderr
    );
    assert!(!dir.join("marker").exists());
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// `--stop-signal PIPE`: a PIPE sent to redlock is the stop request (Rust's runtime ignores
/// PIPE before redlock's code runs; it is taken all the same).
#[test]
fn pipe_as_the_stop_signal_is_a_stop_request() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("trap 'exit 7' PIPE; {}", hold_script(&dir, "p"));
    let proc = Redlock::run(&redis)
        .key("pipe")
        .args(["--stop-signal", "PIPE", "-v"])
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("p.ready"));
    proc.signal(Signal::SIGPIPE);
    let out = proc.finish();
    out.assert_code(7);
    assert!(
        out.stderr
            .contains("SIGPIPE received; sending SIGPIPE to the command"),
        "{}",
        out.stderr
    );
    assert_eq!(redis.get(&lock_key("pipe")), None);
}

/// The watchdog SIGKILLed, then redlock SIGSTOPped past its lease: a new watchdog, started at
/// once, kills the command before a contender can take the lock; redlock, continued, exits 76.
/// A stopped watchdog is continued.
#[test]
fn a_killed_watchdog_is_replaced_and_a_stopped_one_continued() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let first = Redlock::run(&redis)
        .key("dog")
        .ttl("1s")
        .sh(&heartbeat_script(&dir, "a"))
        .spawn();
    wait_for_file(&dir.join("a.ready"));
    let pid = wait_for_pid(&dir.join("a.pid"));
    let old = watchdog_of(first.pid());
    nix::sys::signal::kill(Pid::from_raw(old), Signal::SIGSTOP).unwrap();
    wait_until(PATIENCE, "the stopped watchdog to be continued", || {
        first.stderr_so_far().contains("watchdog was stopped")
    });
    assert_ne!(proc_state(old), Some('T'), "the watchdog is still stopped");
    nix::sys::signal::kill(Pid::from_raw(old), Signal::SIGKILL).unwrap();
    wait_until(PATIENCE, "a new watchdog", || {
        first.stderr_so_far().contains("started a new one")
    });
    let new = watchdog_of(first.pid());
    assert_ne!(new, old);
    first.signal(Signal::SIGSTOP);
    let contender = Redlock::run(&redis)
        .key("dog")
        .ttl("1s")
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
    assert!(
        out.stderr
            .contains("watchdog was killed by SIGKILL; started a new one"),
        "{}",
        out.stderr
    );
}

/// `redlock` as `builder` says, started with signal 32 at `handler` (SIG_DFL or SIG_IGN): cargo
/// starts test binaries with 32 and 33 ignored, and a test must not depend on that. glibc
/// refuses sigaction for 32, as redlock's own code says: the kernel's rt_sigaction sets it.
fn with_signal_32(builder: Redlock, handler: nix::libc::sighandler_t) -> Proc {
    use std::os::unix::process::CommandExt;
    let mut cmd = builder.into_command();
    // SAFETY: the hook makes one system call with a valid, whole struct of the kernel's layout
    // (handler, flags, restorer, 8-byte mask) and a null old action: async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let action: [usize; 4] = [handler, 0, 0, 0];
            let res = nix::libc::syscall(
                nix::libc::SYS_rt_sigaction,
                32,
                action.as_ptr(),
                std::ptr::null_mut::<usize>(),
                8usize,
            );
            if res == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    };
    Proc::spawn(cmd)
}

/// Signal 32, glibc's own (thread cancellation), which no thread can take and whose default
/// action would end redlock on the spot with its lock held: ignored, by a holder and by a
/// waiter alike; the command has it as redlock got it (at its default action here; ignored
/// where redlock was started with it ignored, as a bare command would).
#[test]
fn signal_32_is_ignored_and_the_command_has_it_as_redlock_got_it() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let holder = with_signal_32(
        Redlock::run(&redis).key("k32").sh(&hold_script(&dir, "h")),
        nix::libc::SIG_DFL,
    );
    let command = wait_for_pid(&dir.join("h.pid"));
    wait_for_file(&dir.join("h.ready"));
    assert_eq!(
        ignored_signals(command) & (1 << 31),
        0,
        "the command ignores 32"
    );
    let mut waiter = with_signal_32(
        Redlock::run(&redis).key("k32").wait("20s").sh("true"),
        nix::libc::SIG_DFL,
    );
    wait_until(PATIENCE, "the waiter to wait", || {
        redis.info_field("blocked_clients") >= 1
    });
    let mut holder = holder;
    for pid in [holder.pid(), waiter.pid()] {
        // SAFETY: kill takes two integers.
        assert_eq!(unsafe { nix::libc::kill(pid, 32) }, 0);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(holder.running() && waiter.running(), "32 ended redlock");
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    waiter.finish().assert_code(0);
    assert_eq!(redis.get(&lock_key("k32")), None);

    // Started with 32 ignored, redlock leaves it ignored for the command.
    let ignoring = with_signal_32(
        Redlock::run(&redis).key("k32").sh(&hold_script(&dir, "i")),
        nix::libc::SIG_IGN,
    );
    let command = wait_for_pid(&dir.join("i.pid"));
    assert_ne!(ignored_signals(command) & (1 << 31), 0, "32 not ignored");
    touch(&dir.join("i.go"));
    ignoring.finish().assert_code(0);
}
