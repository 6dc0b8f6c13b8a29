//! What only etcd shows, on real 3-member clusters: a member that dies or hangs costs a request,
//! not the run (the leader SIGKILLed or SIGSTOPped during a hold); with no majority the command
//! is stopped before its lease could end (76); a lease revoked or an entry deleted by an operator
//! stops the command (76); fencing tokens rise across a restart of every member; a waiter whose
//! watch starts in compacted history reads the queue again; the URL and the flags etcd cannot
//! honour are refused in one line (64).

use std::time::Duration;

use crate::common::*;

/// A command that beats every 50 ms into `<tag>.hb` until `<tag>.go` exists, then exits 0.
fn beating(dir: &TempDir, tag: &str) -> String {
    format!(
        "touch {ready}; while [ ! -e {go} ]; do date +%s%N >> {hb}; sleep 0.05; done",
        ready = dir.sh(&format!("{tag}.ready")),
        go = dir.sh(&format!("{tag}.go")),
        hb = dir.sh(&format!("{tag}.hb")),
    )
}

/// The leader SIGKILLed, the leader SIGSTOPped, and the member redlock asks first (the URL's
/// first) SIGSTOPped, whichever it is: the command runs on to its end and exits 0.
#[test]
fn a_member_killed_or_frozen_during_a_hold_costs_nothing() {
    let mut etcd = EtcdCluster::start();
    let dir = TempDir::new();
    for fault in ["kill", "stop", "stop the first"] {
        let tag = format!("h-{}", fault.replace(' ', "-"));
        let holder = Redlock::run_at(&etcd.url())
            .key("steady")
            // A lease that outlasts an election on a loaded machine (0.5-1.6 s here, more
            // under load), as any real ttl does.
            .ttl("5s")
            .sh(&beating(&dir, &tag))
            .spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        let member = match fault {
            "stop the first" => 0,
            _ => etcd.leader(),
        };
        match fault {
            "kill" => etcd.kill(member),
            _ => etcd.stop(member),
        }
        // Renewals through the election and after it.
        std::thread::sleep(Duration::from_secs(4));
        touch(&dir.join(&format!("{tag}.go")));
        let out = holder.finish_within(Duration::from_secs(20));
        out.assert_code(0);
        match fault {
            "kill" => etcd.restart(member),
            _ => etcd.resume(member),
        }
        etcd.wait_healthy();
    }
}

#[test]
fn with_no_majority_the_command_is_stopped_before_its_lease_ends() {
    let mut etcd = EtcdCluster::start();
    let dir = TempDir::new();
    let holder = Redlock::run_at(&etcd.url())
        .key("minority")
        .ttl("3s")
        .sh(&beating(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    // The last renewal that could have counted was sent before this.
    let cut = now_ns();
    let leader = etcd.leader();
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    etcd.stop(others[0]);
    etcd.stop(others[1]);
    let out = holder.finish_within(Duration::from_secs(20));
    out.assert_code(76);
    let last = *read_stamps(&dir.join("h.hb")).last().unwrap();
    assert!(
        last < cut + 3_000_000_000,
        "the command beat {} ms after the lease could have ended",
        (last - cut - 3_000_000_000) / 1_000_000
    );
    for i in others {
        etcd.resume(i);
    }
}

#[test]
fn a_revoked_lease_or_a_deleted_entry_stops_the_command() {
    let etcd = EtcdCluster::start();
    let dir = TempDir::new();
    for (tag, fault) in [("revoked", 0), ("deleted", 1)] {
        let holder = Redlock::run_at(&etcd.url())
            .key(tag)
            .ttl("3s")
            .sh(&beating(&dir, tag))
            .spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        if fault == 0 {
            assert_eq!(etcd.revoke_all_leases(), 1);
        } else {
            let entries = etcd.get_prefix(&format!("redlock:{tag}/q/"));
            assert_eq!(entries.len(), 1, "{entries:?}");
            etcd.del(&entries[0].0);
        }
        let out = holder.finish_within(Duration::from_secs(10));
        out.assert_code(76);
        assert!(out.stderr.contains("lost lock"), "{}", out.stderr);
        Redlock::admin_at("history", &etcd.url())
            .key(tag)
            .stdout_contains("lock_lost (exit 76)")
            .output();
    }
}

#[test]
fn tokens_rise_across_a_restart_of_every_member() {
    let mut etcd = EtcdCluster::start();
    let dir = TempDir::new();
    let token = |etcd: &EtcdCluster| {
        Redlock::run_at(&etcd.url())
            .key("t")
            .sh(&format!(
                "echo $REDLOCK_FENCING_TOKEN >> {}",
                dir.sh("tokens")
            ))
            .output();
    };
    token(&etcd);
    token(&etcd);
    etcd.restart_all();
    token(&etcd);
    let tokens: Vec<i64> = read(&dir.join("tokens"))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 3);
    assert!(tokens.windows(2).all(|w| w[1] > w[0]), "{tokens:?}");
}

/// A waiter whose watch would start in history compacted away meanwhile: etcd cancels the
/// watch, and the waiter reads the queue again and still runs as soon as the holder ends.
#[test]
fn a_waiter_whose_watch_start_was_compacted_reads_the_queue_again() {
    let etcd = EtcdCluster::start();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&etcd.url()).key("c").hold(&dir, "h");
    let waiter = Redlock::run_at(&etcd.url())
        .key("c")
        .wait("30s")
        .args(["-vv", "--log-format", "json"])
        .env("REDLOCK_TEST_WATCH_DELAY_MS", "1500")
        .sh(&format!("date +%s%N > {}", dir.sh("w.start")))
        .spawn();
    wait_until(PATIENCE, "the waiter in the queue", || {
        etcd.get_prefix("redlock:c/q/").len() == 2
    });
    // While it pauses before its watch: history moves on and is compacted.
    for i in 0..5 {
        etcd.put("other", &i.to_string());
    }
    etcd.compact_to_current();
    std::thread::sleep(Duration::from_millis(2500));
    let released = now_ns();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    let out = waiter.finish_within(Duration::from_secs(30));
    out.assert_code(0);
    assert!(
        out.stderr.contains(r#""event":"watch_cancelled""#),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let took = read_stamps(&dir.join("w.start"))[0] - released;
    assert!(
        took < 5_000_000_000,
        "ran {} ms after the release",
        took / 1_000_000
    );
}

#[test]
fn what_etcd_cannot_honour_is_refused_in_one_line() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let url = etcd.url();
    let etcds = url.replace("etcd://", "etcds://");
    let with_user = url.replace("etcd://", "etcd://redlock@");
    // (the URLs, more options, what the line says)
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (
            vec![&url],
            vec!["--min-replicas", "1"],
            "--min-replicas is for Redis",
        ),
        (vec![&url], vec!["--fsync"], "--fsync is for Redis"),
        (
            vec![&url, &url],
            vec![],
            "the members of one cluster go in one URL",
        ),
        (
            vec![&url, "redis://127.0.0.1:6379"],
            vec![],
            "Redis and etcd URLs together",
        ),
        (
            vec![&etcds],
            vec!["--tls-insecure"],
            "--tls-insecure does not work with etcds://",
        ),
        (
            vec!["etcd://127.0.0.1:2379/path"],
            vec![],
            "no path or parameters",
        ),
        (
            vec![&with_user],
            vec![],
            "names user 'redlock' but no password: put it in a file",
        ),
    ];
    for (urls, args, said) in cases {
        let out = Redlock::new()
            .arg("run")
            .args(urls.iter().flat_map(|u| ["--url", u]))
            .key("refused")
            .args(&args)
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_lines(1)
            .output();
        assert!(out.stderr.contains(said), "{args:?}: {}", out.stderr);
    }
    assert!(
        !dir.join("marker").exists(),
        "a refused run ran its command"
    );
    assert!(
        etcd.get_prefix("redlock:").is_empty(),
        "a refused run wrote to etcd"
    );
    // Unreachable: 69 within the attempt's limit, nothing run.
    let out = Redlock::run_at(&format!("etcd://127.0.0.1:{}", free_port()))
        .key("away")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains("cannot reach etcd at"),
        "{}",
        out.stderr
    );
    assert!(
        out.elapsed < Duration::from_secs(12),
        "took {:?}",
        out.elapsed
    );
}

/// docs/etcd.md's role, made from the page's lines as written on a real cluster: redlock runs
/// and every admin command works as that user, with its password from a file; another prefix
/// is refused to it (69, saying what to grant); the password is printed nowhere.
#[test]
fn the_documented_role_can_do_everything_redlock_does_and_no_more() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/etcd.md"));
    let lines: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("    etcdctl "))
        .collect();
    assert!(lines.len() >= 5, "{lines:?}");
    for line in &lines {
        let line = line
            .replace("ROOT_PASSWORD", "r00t-pw")
            .replace("PASSWORD", "s3cret-pw");
        let out = etcd.etcdctl(line.split_whitespace());
        assert!(out.status.success(), "etcdctl {line}: {}", out.stderr);
    }
    std::fs::write(dir.join("pw"), "s3cret-pw\n").unwrap();
    let url = etcd.url().replace("etcd://", "etcd://redlock@");
    let as_user = |r: Redlock| r.env("REDLOCK_PASSWORD_FILE", dir.join("pw"));
    let out = as_user(Redlock::run_at(&url))
        .key("job")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    assert!(!out.stdout.trim().is_empty());
    for sub in ["status", "history"] {
        as_user(Redlock::admin_at(sub, &url))
            .key("job")
            .any_stdout()
            .output();
    }
    as_user(Redlock::admin_at("check", &url))
        .key("job")
        .args(["--max-age", "1h"])
        .stdout_contains("OK: ")
        .output();
    as_user(Redlock::admin_at("list", &url)).output();
    as_user(Redlock::admin_at("release", &url))
        .key("job")
        .arg("--force")
        .any_stdout()
        .output();
    // The role stops at its prefix.
    let out = as_user(Redlock::run_at(&url))
        .key("job")
        .args(["--prefix", "other:"])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr
            .contains("does not let this user do what redlock needs"),
        "{}",
        out.stderr
    );
    assert!(!dir.join("marker").exists());
    out.assert_no_secret(&["s3cret-pw"]);
    // A wrong password: 69, one line, neither password shown.
    let out = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", "wrong-pw")
        .key("job")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&["wrong-pw", "s3cret-pw"]);
}

/// docs/etcd.md's recipe, the /etc/cron.d line, runs as written against a real cluster (the
/// URL ours, the password file ours, the splay and the script short).
#[test]
fn the_documented_recipe_runs_on_etcd() {
    let etcd = EtcdCluster::start();
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/etcd.md"));
    let line = page
        .lines()
        .find(|l| l.contains("/usr/bin/redlock run"))
        .expect("a recipe line");
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
    Redlock::run_at(&etcd.url())
        .args(&words)
        .sh("true")
        .output();
    // Once a night: the next run within --min-interval skips.
    Redlock::run_at(&etcd.url())
        .args(&words)
        .sh("true")
        .status(75)
        .output();
}

/// docs/comparison.md's first row, on one cluster: a lease revoked under each tool's command.
/// `etcdctl lock` lets its command run on beside the next holder and exits 0; redlock stops its
/// command and exits 76.
#[test]
fn beside_etcdctl_lock_only_redlock_stops_its_command_when_the_lease_is_revoked() {
    let etcd = EtcdCluster::start();
    let dir = TempDir::new();
    let endpoints = etcd.endpoints().join(",");
    let mut etcdctl = std::process::Command::new(etcdctl_binary());
    etcdctl
        .args(["--endpoints", &endpoints, "lock", "theirs", "--"])
        .args(["sh", "-c", &beating(&dir, "e")]);
    let theirs = Proc::spawn(etcdctl);
    let ours = Redlock::run_at(&etcd.url())
        .key("ours")
        .ttl("3s")
        .sh(&beating(&dir, "r"))
        .spawn();
    wait_for_file(&dir.join("e.ready"));
    wait_for_file(&dir.join("r.ready"));
    assert_eq!(etcd.revoke_all_leases(), 2);
    let ours = ours.finish_within(Duration::from_secs(10));
    ours.assert_code(76);
    // etcdctl's command beats on well after redlock's was stopped.
    let stopped = now_ns();
    std::thread::sleep(Duration::from_millis(500));
    let beats = read_stamps(&dir.join("e.hb"));
    assert!(
        *beats.last().unwrap() > stopped,
        "etcdctl lock's command stopped too"
    );
    touch(&dir.join("e.go"));
    let theirs = theirs.finish_within(Duration::from_secs(10));
    theirs.assert_code(0);
}

/// The record keeps the last 20 runs: a take prunes the older ones every few runs, so a lock
/// run every minute does not slow down (or outgrow a reply) as its history grows.
#[test]
fn the_record_keeps_the_last_runs_and_prunes_the_rest() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    for _ in 0..40 {
        Redlock::run_at(&etcd.url()).key("p").sh("true").output();
    }
    let kept = etcd.get_prefix("redlock:p/run/").len();
    assert!((20..=26).contains(&kept), "{kept} run records kept");
    let history = Redlock::admin_at("history", &etcd.url())
        .key("p")
        .any_stdout()
        .output();
    assert_eq!(history.stdout.lines().count(), 20, "{}", history.stdout);
    Redlock::admin_at("status", &etcd.url())
        .key("p")
        .stdout_contains("runs ended: 40 success")
        .output();
}

/// etcds://: the member's certificate is verified against --tls-ca-cert (an unknown CA is
/// refused, 69, nothing run), and with the member asking for a client certificate,
/// --tls-cert/--tls-key give one.
#[test]
fn etcds_verifies_the_member_and_gives_a_client_certificate() {
    use super::tls::{make_certs, make_client_cert};
    let dir = TempDir::new();
    let (ca, crt, key) = make_certs(&dir, "etcd");
    let (other_ca, _, _) = make_certs(&dir, "other");
    let (client_crt, client_key) = make_client_cert(&dir, "etcd");
    let port = free_port();
    let peer = free_port();
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let mut cmd = std::process::Command::new(etcd_binary());
    cmd.current_dir(dir.path())
        .args(["--name", "m0", "--data-dir", &path(&dir.join("data"))])
        .args(["--listen-client-urls", &format!("https://127.0.0.1:{port}")])
        .args([
            "--advertise-client-urls",
            &format!("https://127.0.0.1:{port}"),
        ])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
        ])
        .args(["--initial-cluster", &format!("m0=http://127.0.0.1:{peer}")])
        .args(["--cert-file", &path(&crt), "--key-file", &path(&key)])
        .args(["--client-cert-auth", "--trusted-ca-file", &path(&ca)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _etcd = Proc::spawn(cmd);
    let url = format!("etcds://127.0.0.1:{port}");
    let with_client = |r: Redlock| {
        r.args(["--tls-ca-cert", &path(&ca)]).args([
            "--tls-cert",
            &path(&client_crt),
            "--tls-key",
            &path(&client_key),
        ])
    };
    wait_until(PATIENCE, "etcd over TLS", || {
        with_client(Redlock::admin_at("list", &url))
            .any_status()
            .any_stderr()
            .output()
            .code()
            == 0
    });
    with_client(Redlock::run_at(&url))
        .key("tls")
        .sh("true")
        .output();
    // The member's certificate from a CA we were not told of.
    let out = Redlock::run_at(&url)
        .key("tls")
        .args(["--tls-ca-cert", &path(&other_ca)])
        .args([
            "--tls-cert",
            &path(&client_crt),
            "--tls-key",
            &path(&client_key),
        ])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains("a CA redlock does not trust") && out.stderr.contains("--tls-ca-cert"),
        "{}",
        out.stderr
    );
    // No client certificate where the member asks for one: however the handshake's failure
    // reaches redlock (an alert, a closed connection), the line says what to give.
    let out = Redlock::run_at(&url)
        .key("tls")
        .args(["--tls-ca-cert", &path(&ca)])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains("--tls-cert and --tls-key"),
        "{}",
        out.stderr
    );
    // Plain etcd:// against the TLS port: 69 within the attempt's limit.
    let out = Redlock::run_at(&format!("etcd://127.0.0.1:{port}"))
        .key("tls")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.elapsed < Duration::from_secs(12),
        "took {:?}",
        out.elapsed
    );
    assert!(out.stderr.contains("etcds://"), "{}", out.stderr);
    assert!(!dir.join("marker").exists(), "a command ran");
}

/// A holder whose lease was revoked while a waiter was there: the waiter takes the lock and
/// marks the holder's run vanished (it has no end yet); the holder, finding its lock lost at
/// its next renewal, corrects that to lock_lost (76), the count moved, as on Redis.
#[test]
fn a_lost_holder_corrects_the_vanished_mark_a_waiter_left() {
    let etcd = EtcdCluster::start();
    let dir = TempDir::new();
    let holder = Redlock::run_at(&etcd.url())
        .key("lv")
        .ttl("3s")
        .sh(&beating(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let waiter = Redlock::run_at(&etcd.url())
        .key("lv")
        .wait("20s")
        .sh("true")
        .spawn();
    wait_until(PATIENCE, "the waiter in the queue", || {
        etcd.get_prefix("redlock:lv/q/").len() == 2
    });
    // The holder's lease: the older of the two.
    let leases = etcd.leases();
    let holders_lease = etcd.get_prefix("redlock:lv/q/")[0]
        .0
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let lease = leases
        .iter()
        .find(|l| holders_lease.trim_start_matches('0') == l.trim_start_matches('0'))
        .unwrap_or_else(|| panic!("{holders_lease} among {leases:?}"));
    etcd.revoke(lease);
    waiter.finish_within(Duration::from_secs(10)).assert_code(0);
    holder
        .finish_within(Duration::from_secs(10))
        .assert_code(76);
    Redlock::admin_at("history", &etcd.url())
        .key("lv")
        .stdout_contains("lock_lost (exit 76)")
        .output();
    Redlock::admin_at("status", &etcd.url())
        .key("lv")
        .stdout_contains("1 lost; runs ended: 1 lock_lost, 1 success")
        .output();
}
