//! Redis misbehaving: killed, paused or restarted under a held lock (the command must be dead
//! before the lease could expire), its script cache flushed, unreachable, or refusing the password.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;

/// The earliest wall-clock time (ns since the epoch) at which the server could expire `key`: the
/// moment before PTTL was sent plus the PTTL it answered (the server read it no earlier).
fn earliest_expiry(redis: &RedisServer, key: &str) -> i128 {
    let mut con = redis.conn();
    let sent = now_ns();
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut con).unwrap();
    assert!(pttl > 0, "lock key {key} has PTTL {pttl}");
    sent + i128::from(pttl) * 1_000_000
}

/// Polls the worker leader (cheap) and then its group, returning the wall-clock time at which
/// the whole group was first seen dead.
fn watch_group_death(pid: i32, timeout: Duration) -> i128 {
    let deadline = Instant::now() + timeout;
    while pid_alive(pid) {
        assert!(
            Instant::now() < deadline,
            "command {pid} still alive after {timeout:?}"
        );
        std::thread::sleep(Duration::from_micros(500));
    }
    wait_group_dead_at(pid, timeout)
}

/// Starts a heartbeat worker under `--ttl 2s`, applies `fault` right after reading the key's PTTL,
/// and checks that the last heartbeat and the death of the group both come before the earliest
/// moment the server could expire the lease, and that redlock exits 76.
/// `prelude` goes in front of the worker script (e.g. to ignore the stop signal).
fn fault_under_lock(prelude: &str, fault: impl FnOnce(&mut RedisServer)) {
    let mut redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("fault")
        .ttl("2s")
        .sh(&format!("{prelude}{}", heartbeat_script(&dir, "w")))
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    // Let a renewal or two happen first.
    wait_until(PATIENCE, "heartbeats", || {
        read_stamps(&dir.join("w.hb")).len() >= 10
    });

    let expiry = earliest_expiry(&redis, &lock_key("fault"));
    fault(&mut redis);
    let fault_at = now_ns();

    let dead_at = watch_group_death(pid, Duration::from_secs(10));
    let hb = read_stamps(&dir.join("w.hb"));
    let last_hb = *hb.last().unwrap();
    let ms = |ns: i128| ns as f64 / 1e6;
    eprintln!(
        "group dead {:.1} ms before expiry, last heartbeat {:.1} ms before expiry, {:.1} ms after the fault",
        ms(expiry - dead_at),
        ms(expiry - last_hb),
        ms(dead_at - fault_at)
    );
    assert!(
        last_hb < expiry,
        "command still working {:.1} ms after the lease could have expired",
        ms(last_hb - expiry)
    );
    assert!(
        dead_at < expiry,
        "command group alive {:.1} ms after the lease could have expired",
        ms(dead_at - expiry)
    );

    // Release against a dead or paused server is bounded.
    let out = proc.finish_within(Duration::from_secs(8));
    let exited_at = now_ns();
    eprintln!(
        "redlock exited {:.1} ms after the group died",
        ms(exited_at - dead_at)
    );
    out.assert_code(76);
    out.assert_stderr_prefixed();
    assert!(
        exited_at - dead_at < 4_000_000_000,
        "redlock lingered {:.0} ms after the command died",
        ms(exited_at - dead_at)
    );
}

#[test]
fn redis_killed_mid_run_stops_the_command_before_the_lease_expires() {
    fault_under_lock("", |redis| redis.kill());
}

#[test]
fn redis_paused_mid_run_stops_the_command_before_the_lease_expires() {
    fault_under_lock("", |redis| redis.pause());
}

#[test]
fn redis_paused_mid_run_sigkills_a_command_ignoring_term_before_the_lease_expires() {
    fault_under_lock("trap '' TERM; ", |redis| redis.pause());
}

#[test]
fn redis_restarted_empty_mid_run_exits_76() {
    let mut redis = RedisServer::start();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("restart")
        .ttl("1s")
        .sh(&heartbeat_script(&dir, "w"))
        .spawn();
    wait_for_file(&dir.join("w.ready"));
    let pid = wait_for_pid(&dir.join("w.pid"));
    redis.restart();
    let out = proc.finish();
    out.assert_code(76);
    wait_pid_dead(pid, Duration::from_secs(1));
    assert!(!group_alive(pid));
    assert_eq!(
        redis.get(&lock_key("restart")),
        None,
        "redlock re-created the lock on the new server"
    );
}

#[test]
fn script_flush_mid_run_does_not_break_renewal_or_release() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (proc, token) = Redlock::run(&redis).key("flush").ttl("1s").hold(&dir, "w");

    let start = Instant::now();
    let mut flushes = 0;
    while start.elapsed() < Duration::from_millis(3000) {
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .exec(&mut redis.conn())
            .unwrap();
        flushes += 1;
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(
            redis.get(&lock_key("flush")).as_deref(),
            Some(token.as_str()),
            "lock lost {:?} after the first SCRIPT FLUSH",
            start.elapsed()
        );
    }
    assert!(flushes >= 10);
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut redis.conn())
        .unwrap();
    touch(&dir.join("w.go"));
    let out = proc.finish();
    out.assert_code(0);
    assert_eq!(
        redis.get(&lock_key("flush")),
        None,
        "release failed after SCRIPT FLUSH"
    );
}

#[test]
fn unreachable_redis_exits_69_without_running_the_command() {
    let dir = TempDir::new();
    let port = free_port();
    for url in [
        format!("redis://127.0.0.1:{port}"),
        format!("unix://{}", dir.join("nobody.sock").display()),
    ] {
        let out = Redlock::run_at(&url)
            .key("k")
            .sh(&marker_script(&dir))
            .status(69)
            .stderr_prefixed()
            .stderr_lines(1)
            .output();
        assert!(
            out.elapsed < Duration::from_secs(5),
            "{url}: took {:?}",
            out.elapsed
        );
        assert!(!dir.join("marker").exists(), "{url}: command ran");
    }
}

/// Within `--wait`, Redis being down is waited out: one warning line names the server at once
/// (a wrong URL shows), attempts back off, and a wait that runs out with Redis still down exits
/// 69 without running the command; `--wait 0` exits 69 at once (above).
#[test]
fn unreachable_redis_with_wait_retries_until_the_wait_ends_then_exits_69() {
    let dir = TempDir::new();
    let port = free_port();
    let out = Redlock::run_at(&format!("redis://127.0.0.1:{port}"))
        .key("k")
        .wait("1s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(2)
        .stderr_contains(&format!(
            "warning: cannot take lock 'k': cannot reach Redis at 127.0.0.1:{port}: Connection \
             refused (os error 111); retrying until the wait ends (--wait 1s)"
        ))
        .output();
    assert!(
        out.elapsed >= Duration::from_millis(900) && out.elapsed < Duration::from_secs(4),
        "took {:?}",
        out.elapsed
    );
    assert!(!dir.join("marker").exists());
}

/// A waiter whose connections are killed again and again (`CLIENT KILL`, as a failover or a
/// proxy restart does) warns once for the whole wait: in cron each line is a line of mail.
/// The later outages are `-v` lines.
#[test]
fn a_waiter_warns_once_however_often_its_connection_is_cut() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("cut").hold(&dir, "h");
    let waiter = |verbose: bool| {
        let run = Redlock::run(&redis).key("cut").wait("20s");
        let run = if verbose { run.arg("-v") } else { run };
        run.sh("true").spawn()
    };
    let (quiet, verbose) = (waiter(false), waiter(true));
    wait_until(PATIENCE, "two waiters", || {
        stdout_of("status", &redis, &["--key", "cut"]).contains("waiters:  2")
    });
    for _ in 0..5 {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .exec(&mut redis.conn())
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
    }
    touch(&dir.join("h.go"));
    // The holder's renewals may have been cut too: its status is what matters.
    holder.finish().assert_code(0);
    for (waiter, verbose) in [(quiet, false), (verbose, true)] {
        let out = waiter.finish();
        out.assert_code(0);
        let warnings = out
            .stderr
            .matches("warning: cannot take lock 'cut'")
            .count();
        assert_eq!(warnings, 1, "{}", out.stderr);
        let again = out.stderr.matches("again: cannot take lock 'cut'").count();
        if verbose {
            assert!(again >= 2, "{}", out.stderr);
        } else {
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        }
    }
}

/// A cron job that fires while Redis restarts (or a pod that starts before Redis): with a
/// `--wait`, the run waits for Redis to come up and runs.
#[test]
fn a_wait_rides_out_a_redis_that_comes_up_late() {
    let mut redis = RedisServer::start();
    redis.kill();
    let dir = TempDir::new();
    let proc = Redlock::run(&redis)
        .key("late")
        .wait("20s")
        .sh(&marker_script(&dir))
        .spawn();
    let mut proc = proc;
    wait_until(PATIENCE, "the first failed attempt's warning", || {
        proc.stderr_so_far()
            .contains("retrying until the wait ends")
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(proc.running(), "{}", proc.stderr_so_far());
    redis.restart();
    let out = proc.finish();
    out.assert_code(0);
    assert!(dir.join("marker").exists());
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert_eq!(redis.get(&lock_key("late")), None);
}

/// A waiter told to stop while Redis is frozen ends within a second, and says nothing of a
/// release: it never held the lock (its place among the waiters lapses by itself).
#[test]
fn a_waiter_stopped_while_redis_is_frozen_ends_promptly() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("f").hold(&dir, "h");
    let waiter = Redlock::run(&redis)
        .key("f")
        .wait("60s")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the waiter to connect to redis", || {
        has_tcp_connection(waiter.pid(), redis.port())
    });
    redis.pause();
    let sent = Instant::now();
    waiter.signal(Signal::SIGTERM);
    let out = waiter.finish();
    let took = sent.elapsed();
    redis.resume();
    out.assert_signal(15);
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(out.stderr, "", "nothing was held, nothing to warn about");
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn paused_redis_before_start_exits_69() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    redis.pause();
    Redlock::run(&redis)
        .key("k")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_prefixed()
        .stderr_lines(1)
        .output();
    redis.resume();
    assert!(!dir.join("marker").exists(), "command ran");
    assert_eq!(redis.get(&lock_key("k")), None);
}

#[test]
fn wrong_or_missing_password_exits_69_and_is_not_printed() {
    const PW: &str = "correct-horse-battery";
    const WRONG: &str = "hunter2-wrong-password";
    let redis = RedisServer::start_with(ServerOpts {
        password: Some(PW.into()),
        ..Default::default()
    });
    let dir = TempDir::new();
    for url in [
        format!("redis://:{WRONG}@127.0.0.1:{}", redis.port()),
        format!("redis://default:{WRONG}@127.0.0.1:{}", redis.port()),
        redis.url_without_password(),
    ] {
        for verbosity in [&[][..], &["-vv"][..]] {
            let out = Redlock::run_at(&url)
                .key("auth")
                .args(verbosity)
                .sh(&marker_script(&dir))
                .status(69)
                .stderr_prefixed()
                .output();
            assert!(!out.stderr.is_empty(), "no diagnostic for a refused login");
            out.assert_no_secret(&[WRONG, PW]);
            assert!(!dir.join("marker").exists(), "command ran");
        }
    }
    assert_eq!(redis.all_keys(), Vec::<String>::new());
}

#[test]
fn password_in_url_works_and_is_never_printed() {
    const PW: &str = "s3cret-pa55word";
    for unix in [false, true] {
        let redis = RedisServer::start_with(ServerOpts {
            unix,
            password: Some(PW.into()),
            ..ServerOpts::default()
        });
        let out = Redlock::run(&redis)
            .key("authok")
            .arg("-vv")
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .status(0)
            .any_stdout() // a fencing token, checked below
            .stderr_prefixed()
            .output();
        fencing_token(&out.stdout);
        out.assert_no_secret(&[PW]);
        assert_eq!(redis.get(&lock_key("authok")), None);
    }
}

#[test]
fn acl_user_and_password_in_url() {
    const PW: &str = "acl-user-pa55";
    let redis = RedisServer::start();
    redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "locker",
            "on",
            &format!(">{PW}"),
            "~*",
            "&*",
            "+@all",
        ])
        .exec(&mut redis.conn())
        .unwrap();
    let url = format!("redis://locker:{PW}@127.0.0.1:{}", redis.port());
    let out = Redlock::run_at(&url)
        .key("acl")
        .arg("-vv")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .status(0)
        .any_stdout() // a fencing token, checked below
        .stderr_prefixed()
        .output();
    fencing_token(&out.stdout);
    out.assert_no_secret(&[PW]);

    let url = format!("redis://locker:wrong-{PW}@127.0.0.1:{}", redis.port());
    let out = Redlock::run_at(&url)
        .key("acl")
        .command(["true"])
        .status(69)
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&[PW]);
}

/// A proxy whose Redis is down (HAProxy, kube-proxy, stunnel: it accepts, finds no server and
/// closes) is Redis out of reach, not a TLS port, though a Redis TLS port also resets a plain
/// connection at once: without a wait, 69 saying so; with one, the run waits for the server
/// behind the proxy and runs.
#[test]
fn a_proxy_with_no_redis_behind_it_is_waited_out_not_taken_for_a_tls_port() {
    let mut redis = RedisServer::start();
    let proxy = Proxy::start(redis.port());
    redis.kill();
    // Closed (FIN) by a proxy that cannot connect, then reset (RST).
    for mode in [Mode::Pass, Mode::Reset] {
        proxy.set(mode, Duration::ZERO);
        let out = Redlock::run_at(&proxy.url())
            .key("k")
            .sh("true")
            .status(69)
            .stderr_lines(1)
            .stderr_contains(
                "accepted the connection and closed it without a word: no Redis answers behind \
                 it (a proxy whose server is down?)",
            )
            .output();
        assert!(!out.stderr.contains("TLS"), "{mode:?}: {}", out.stderr);
    }
    proxy.set(Mode::Pass, Duration::ZERO);
    let dir = TempDir::new();
    let proc = Redlock::run_at(&proxy.url())
        .key("k")
        .wait("20s")
        .sh(&marker_script(&dir))
        .spawn();
    wait_until(PATIENCE, "the first failed attempt's warning", || {
        proc.stderr_so_far()
            .contains("retrying until the wait ends")
    });
    redis.restart();
    proc.finish().assert_code(0);
    assert!(dir.join("marker").exists(), "the command did not run");
}

/// A waiter blocked for a release when the network freezes under it (no byte passes, nothing
/// fails) still ends with its --wait, a fraction of a second after it: a warning that it
/// retries, then 69 for a Redis that no longer answers. Each row: --wait, --ttl.
#[test]
fn a_waiter_blocked_on_a_frozen_network_ends_with_its_wait() {
    for (wait, ttl) in [("1s", "30s"), ("2s", "30s"), ("2s", "1s")] {
        let redis = RedisServer::start();
        let proxy = Proxy::start(redis.port());
        let dir = TempDir::new();
        let (holder, _) = Redlock::run(&redis).key("bw").hold(&dir, "h");
        let waiter = Redlock::run_at(&proxy.url())
            .key("bw")
            .ttl(ttl)
            .wait(wait)
            .sh(&marker_script(&dir))
            .spawn();
        wait_until(PATIENCE, "the waiter to block on its wake list", || {
            redis.info_field("blocked_clients") == 1
        });
        proxy.set(Mode::Hang, Duration::ZERO);
        let out = waiter.finish_within(Duration::from_secs(10));
        let wait = humantime::parse_duration(wait).unwrap();
        eprintln!("--wait {wait:?} --ttl {ttl}: ended after {:?}", out.elapsed);
        out.assert_code(69);
        assert!(
            out.elapsed >= wait && out.elapsed < wait + Duration::from_secs(2),
            "--wait {wait:?} --ttl {ttl}: ended after {:?}\n{}",
            out.elapsed,
            out.stderr
        );
        let port = proxy.url().rsplit(':').next().unwrap().to_owned();
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{}", out.stderr);
        assert!(
            lines[0].contains("warning: cannot take lock 'bw'")
                && lines[0].contains("retrying until the wait ends"),
            "{}",
            out.stderr
        );
        assert!(
            lines[1].ends_with(&format!(
                "cannot take lock 'bw': no answer from Redis at 127.0.0.1:{port} in time"
            )),
            "{}",
            out.stderr
        );
        assert!(!dir.join("marker").exists(), "the command ran");
        touch(&dir.join("h.go"));
        holder.finish().assert_code(0);
    }
}

/// The reply to a release lost on its way back (the network fails once Redis has deleted the
/// key): the retry finds the ending the first attempt recorded, so the run exits 0 as its
/// command did and is recorded as a success, not as a lock lost (it exited 76 before). The
/// same for a semaphore's slot.
#[test]
fn a_release_whose_reply_is_lost_still_counts_as_released() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port());
    for (name, flags) in [("lock", &[][..]), ("slots", &["--limit", "2"][..])] {
        // Once first, so that the server has the release script: the reply lost is then the
        // release's own, not a NOSCRIPT.
        Redlock::run_at(&proxy.url())
            .key(name)
            .args(flags)
            .sh("true")
            .output();
        // The release is the one request that says how the run ended.
        proxy.lose_reply_to(b"\r\nsuccess\r\n");
        Redlock::run_at(&proxy.url())
            .key(name)
            .args(flags)
            .sh("true")
            .output();
        assert!(proxy.lost_a_reply(), "{name}: no reply was lost");
        assert_eq!(redis.pttl(&lock_key(name)), -2, "{name}: still held");
        let history = stdout_of("history", &redis, &["--key", name, "--json"]);
        assert!(
            history.contains("\"success\"") && !history.contains("lock_lost"),
            "{name}: {history}"
        );
    }
}

/// The reply to the acquire is lost (the network fails between the request and its answer),
/// and no --wait retries it: the run exits 69 without running the command, and the lock its
/// request took is released (it was left taken for its whole ttl), its run recorded as ended.
#[test]
fn an_acquire_whose_reply_is_lost_gives_the_lock_back() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port());
    let dir = TempDir::new();
    for (name, flags) in [("lock", &[][..]), ("slots", &["--limit", "2"][..])] {
        // Once first, so that the server has the acquire script: the reply lost is then the
        // acquire's own, not a NOSCRIPT.
        Redlock::run_at(&proxy.url())
            .key(name)
            .args(flags)
            .sh("true")
            .output();
        // The command line travels in the acquire only (the holder's details).
        let script = format!("{} # acquire-marker", marker_script(&dir));
        proxy.lose_reply_to(b"acquire-marker");
        Redlock::run_at(&proxy.url())
            .key(name)
            .ttl("1h")
            .args(flags)
            .arg("-v")
            .sh(&script)
            .status(69)
            .stderr_contains(&format!(
                "an attempt whose reply was lost had taken lock '{name}'; released it"
            ))
            .any_stderr()
            .output();
        assert!(proxy.lost_a_reply(), "{name}: no reply was lost");
        assert!(!dir.join("marker").exists(), "{name}: the command ran");
        assert_eq!(redis.pttl(&lock_key(name)), -2, "{name}: still held");
        let history = stdout_of("history", &redis, &["--key", name, "--json"]);
        assert!(
            !history.contains("\"running\"") && history.contains("\"unavailable\""),
            "{name}: {history}"
        );
    }
}
