//! Processes that escape the command's process group (setsid, double forks) are adopted by
//! redlock as child subreaper and stopped with the job: on lock loss and on a normal exit.
//! As PID 1 of a fresh PID namespace (a container entrypoint), redlock reaps adopted zombies
//! and still hears TERM.

use nix::sys::signal::Signal;

use crate::common::*;

/// Starts a daemon out of the command's group and session (`setsid`, backgrounded, so its
/// parent shell can exit under it), waits for its pid file, then runs `then`.
fn daemon_script(dir: &TempDir, then: &str) -> String {
    format!(
        "setsid sh -c 'echo $$ > {pid}; exec sleep 1000' & \
         while [ ! -s {pid} ]; do sleep 0.01; done; {then}",
        pid = dir.sh("daemon.pid"),
    )
}

#[test]
fn a_double_forked_daemon_does_not_outlive_a_normal_exit() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let out = Redlock::run(&redis)
        .key("daemon")
        .arg("-v")
        .sh(&daemon_script(&dir, "exit 0"))
        .stderr_prefixed()
        .stderr_contains("stopping them")
        .output();
    let daemon = wait_for_pid(&dir.join("daemon.pid"));
    assert!(
        !pid_alive(daemon),
        "the setsid daemon {daemon} outlived redlock\n{}",
        out.stderr
    );
}

#[test]
fn a_double_forked_daemon_is_stopped_when_the_lock_is_lost() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = daemon_script(&dir, &format!("touch {}; exec sleep 1000", dir.sh("ready")));
    let proc = Redlock::run(&redis)
        .key("lost")
        .ttl("1s")
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("ready"));
    let daemon = wait_for_pid(&dir.join("daemon.pid"));
    assert!(pid_alive(daemon));
    redis.del(&lock_key("lost"));
    let out = proc.finish();
    out.assert_code(76);
    assert!(
        !pid_alive(daemon),
        "the setsid daemon {daemon} kept running after the lock was lost\n{}",
        out.stderr
    );
}

/// `unshare --pid --fork --mount-proc redlock ...`: redlock is PID 1 of a new PID namespace.
fn as_pid1(redis: &RedisServer, key: &str, script: &str) -> Proc {
    Redlock::run(redis)
        .key(key)
        .sh(script)
        .through(["unshare", "--pid", "--fork", "--mount-proc"])
        .spawn()
}

#[test]
fn as_pid1_it_reaps_adopted_zombies() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // An orphan (its parent shell exits at once) is re-parented to PID 1 and dies 0.2 s later;
    // only a reaping PID 1 makes its /proc entry go away. Then check that the command really
    // ran as PID 1's child.
    let script = format!(
        "sh -c 'sleep 0.2 & echo $! > {orphan}'; o=$(cat {orphan}); i=0; \
         while [ -e /proc/$o ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; \
         if [ -e /proc/$o ]; then grep State /proc/$o/status > {result}; \
         else echo reaped > {result}; fi; echo $PPID > {ppid}",
        orphan = dir.sh("orphan"),
        result = dir.sh("result"),
        ppid = dir.sh("ppid"),
    );
    let out = as_pid1(&redis, "pid1", &script).finish();
    out.assert_code(0);
    assert_eq!(read(&dir.join("ppid")).trim(), "1", "redlock was not PID 1");
    assert_eq!(read(&dir.join("result")).trim(), "reaped");
}

#[test]
fn as_pid1_term_reaches_the_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "trap 'echo term > {got}; exit 0' TERM; touch {ready}; while :; do sleep 0.02; done",
        got = dir.sh("got"),
        ready = dir.sh("ready"),
    );
    let proc = as_pid1(&redis, "pid1-term", &script);
    wait_for_file(&dir.join("ready"));
    // redlock's pid as the outer namespace sees it: the only child of unshare.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", proc.pid())).unwrap();
    let redlock: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(redlock), Signal::SIGTERM).unwrap();
    let out = proc.finish();
    // The command's trap ran and it exited 0: TERM was forwarded, not ignored by PID 1.
    assert_eq!(read(&dir.join("got")).trim(), "term", "{}", out.stderr);
    out.assert_code(0);
    assert_eq!(
        redis.get(&lock_key("pid1-term")),
        None,
        "the lock was not released"
    );
}

/// As PID 1 redlock cannot die of its command's signal (the kernel keeps signals without a
/// handler from PID 1, even its own): it exits 128+N, as a shell would show the death.
#[test]
fn as_pid1_a_signal_death_exits_128_plus_n() {
    let redis = RedisServer::start();
    let out = as_pid1(&redis, "pid1-sig", "kill -s TERM $$").finish();
    out.assert_code(143);
    assert_eq!(redis.get(&lock_key("pid1-sig")), None, "lock not released");
}

#[test]
fn the_watchdog_is_no_leftover_and_its_death_loses_nothing() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A plain run: the watchdog, also redlock's child, is neither stopped nor reaped with the job.
    let out = Redlock::run(&redis)
        .key("plain")
        .arg("-vv")
        .sh("exit 0")
        .status(0)
        .stderr_prefixed()
        .output();
    assert!(
        !out.stderr.contains("reaped") && !out.stderr.contains("left processes behind"),
        "{}",
        out.stderr
    );

    // The watchdog SIGKILLed while the command runs: redlock still sees the command end, keeps
    // its status and releases the lock.
    let script = format!(
        "touch {ready}; while [ ! -e {go} ]; do sleep 0.01; done; exit 3",
        ready = dir.sh("ready"),
        go = dir.sh("go"),
    );
    let proc = Redlock::run(&redis)
        .key("watched")
        .arg("-vv")
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("ready"));
    let watchdog = watchdog_of(proc.pid());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(watchdog), Signal::SIGKILL).unwrap();
    touch(&dir.join("go"));
    let out = proc.finish();
    out.assert_code(3);
    assert!(!out.stderr.contains("reaped"), "{}", out.stderr);
    assert_eq!(redis.get(&lock_key("watched")), None);
}

/// What left the command's group is the job's all the same: while redlock is stopped past its
/// lease, its watchdog kills a `setsid` child and the child of a timeout(1) (which takes a group
/// of its own) with the command, though their parents still run; redlock, continued, exits 76.
#[test]
fn what_left_the_group_dies_at_the_kill_line_while_redlock_is_stopped() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "setsid sh -c 'echo $$ > {a}; exec sleep 1000' & \
         timeout 1000 sh -c 'echo $$ > {b}; exec sleep 1000' & \
         while [ ! -s {a} ] || [ ! -s {b} ]; do sleep 0.01; done; touch {ready}; wait",
        a = dir.sh("setsid.pid"),
        b = dir.sh("timeout.pid"),
        ready = dir.sh("ready"),
    );
    let proc = Redlock::run(&redis)
        .key("left")
        .ttl("1s")
        .sh(&script)
        .spawn();
    wait_for_file(&dir.join("ready"));
    let setsid = wait_for_pid(&dir.join("setsid.pid"));
    let timeout = wait_for_pid(&dir.join("timeout.pid"));
    proc.signal(Signal::SIGSTOP);
    wait_until(PATIENCE, "the watchdog to kill what left the group", || {
        !pid_alive(setsid) && !pid_alive(timeout)
    });
    proc.signal(Signal::SIGCONT);
    proc.finish().assert_code(76);
}

/// A command that moves into another process group (here redlock's own, with setpgid) is still
/// the job: stopped when the lock is lost, and redlock exits 76 instead of waiting for it.
#[test]
fn a_command_that_joins_another_group_is_stopped_when_the_lock_is_lost() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let joiner = dir.join("join.pl");
    std::fs::write(
        &joiner,
        "setpgrp(0, getpgrp(getppid())) or die \"setpgrp: $!\";\n\
         open(my $f, '>', $ARGV[0]) or die; print $f \"$$\\n\"; close $f;\n\
         exec('sleep', '1000');\n",
    )
    .unwrap();
    let pid_file = dir.join("joined.pid");
    let proc = Redlock::run(&redis)
        .key("joined")
        .ttl("1s")
        .command([
            std::ffi::OsStr::new("perl"),
            joiner.as_os_str(),
            pid_file.as_os_str(),
        ])
        .spawn();
    let pid = wait_for_pid(&pid_file);
    redis.del(&lock_key("joined"));
    let out = proc.finish();
    out.assert_code(76);
    assert!(!pid_alive(pid), "the command outlived redlock");
}

/// docs/troubleshooting.md's safe forms hold against a `kill -9` of redlock (the OOM killer):
/// every process that stays in the command's process group dies with it, however it was
/// started: in the background with `&`, under nohup, under timeout(1) given as the command, and
/// the command's first process after an `exec`. (What leaves the group, `setsid` or a timeout(1)
/// started inside a shell line, can outlive it: the page says so.)
#[test]
fn what_stays_in_the_group_dies_with_a_sigkilled_redlock() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let pids = dir.sh("pids");
    // Each form writes the pids of its processes, then says it is ready.
    let forms = [
        format!(
            "sleep 1000 & echo $! >> {pids}; sleep 1000 & echo $! >> {pids}; echo $$ >> {pids}; wait"
        ),
        format!(
            "nohup sleep 1000 >/dev/null 2>&1 & echo $! >> {pids}; echo $$ >> {pids}; exec sleep 1000"
        ),
        format!(
            "exec timeout 1h sh -c \"sleep 1000 & echo \\$! >> {pids}; echo \\$\\$ >> {pids}; wait\""
        ),
    ];
    for (i, form) in forms.iter().enumerate() {
        for attempt in 0..3 {
            let _ = std::fs::remove_file(dir.join("pids"));
            // A key each: the lock of a SIGKILLed redlock stays taken until its lease ends.
            let key = format!("k{i}-{attempt}");
            let proc = Redlock::run(&redis).key(key).sh(form).spawn();
            wait_until(PATIENCE, "the form's processes", || {
                std::fs::read_to_string(dir.join("pids")).is_ok_and(|t| t.lines().count() >= 2)
            });
            let started: Vec<i32> = read(&dir.join("pids"))
                .lines()
                .map(|l| l.trim().parse().unwrap())
                .collect();
            proc.signal(Signal::SIGKILL);
            proc.finish().assert_signal(9);
            wait_until(PATIENCE, &format!("{form}: {started:?} gone"), || {
                started.iter().all(|&pid| !pid_alive(pid))
            });
        }
    }
}
