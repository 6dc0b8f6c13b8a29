//! What only etcd shows, on real 3-member clusters: a member that dies or hangs costs a request,
//! not the run (the leader SIGKILLed or SIGSTOPped during a hold); with no majority the command
//! is stopped before its lease could end (76); a lease revoked or an entry deleted by an operator
//! stops the command (76); fencing tokens rise across a restart of every member, and a lock whose
//! keys were wiped shows a counter the next token exceeds; a waiter whose watch starts in
//! compacted history reads the queue again; `etcdctl lock` beside redlock; the record of runs
//! pruned; a lost holder's record corrected. The URL, auth and TLS are in `etcd_access.rs`.

use nix::sys::signal::Signal;
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
        let entries = etcd.get_prefix(&format!("redlock:{{{tag}}}/q/"));
        assert_eq!(entries.len(), 1, "{entries:?}");
        if fault == 0 {
            // The run's lease, whose ID ends its entry's key (the record's lease stays).
            etcd.revoke(entries[0].0.rsplit('/').next().unwrap());
        } else {
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

/// After `etcdctl del --prefix` wipes a lock's keys, `status` shows a fencing counter the next
/// token exceeds, as it does of a lock with a record (the cluster's revision), in text and JSON
/// alike, and `release --force` says the same: it said 0 where the next token was 285.
#[test]
fn a_wiped_lock_shows_a_fencing_counter_the_next_token_exceeds() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let token = || {
        let out = Redlock::run_at(&etcd.url())
            .key("wiped")
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
            .output();
        out.stdout.trim().parse::<i64>().unwrap()
    };
    let first = token();
    // Other keys move the revision past the lock's last token.
    for i in 0..5 {
        etcd.put(&format!("elsewhere/{i}"), "x");
    }
    let out = etcd.etcdctl(["del", "--prefix", "redlock:{wiped}/"]);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(etcd.get_prefix("redlock:{wiped}/").is_empty());
    let fence_of = |text: &str, after: &str| -> i64 {
        let at = text
            .find(after)
            .unwrap_or_else(|| panic!("no {after} in {text}"));
        let digits: String = text[at + after.len()..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("{after} in {text}"))
    };
    let json = Redlock::admin_at("status", &etcd.url())
        .key("wiped")
        .arg("--json")
        .any_stdout()
        .output()
        .stdout;
    let text = Redlock::admin_at("status", &etcd.url())
        .key("wiped")
        .stdout_contains("is free")
        .any_stdout()
        .output()
        .stdout;
    let forced = Redlock::admin_at("release", &etcd.url())
        .key("wiped")
        .arg("--force")
        .stdout_contains("is free; nothing released")
        .any_stdout()
        .output()
        .stdout;
    let shown = fence_of(&json, "\"fence\":");
    assert_eq!(fence_of(&text, "fencing:"), shown, "{text}");
    assert_eq!(fence_of(&forced, "fencing counter"), shown, "{forced}");
    let next = token();
    assert!(
        first + 5 <= shown && shown < next,
        "tokens {first} then {next}; status said {shown}"
    );
}

/// A waiter whose watch would start in history compacted away meanwhile: etcd cancels the
/// watch, and the waiter reads the queue again and still runs as soon as the holder ends. The
/// waiter reaches its member through a proxy that delays every chunk by 600 ms, so that 1.2 s
/// pass between the member's read of the queue and the arrival of the watch that follows it:
/// the history is compacted in between. (Its ttl gives each attempt 5 s, three round trips.)
#[test]
fn a_waiter_whose_watch_start_was_compacted_reads_the_queue_again() {
    let etcd = EtcdCluster::start();
    let dir = TempDir::new();
    let member = etcd.endpoints()[0].clone();
    let proxy = Proxy::start(member.rsplit(':').next().unwrap().parse().unwrap());
    let through_proxy = proxy.url().replace("redis://", "etcd://");
    let (holder, _) = Redlock::run_at(&etcd.url()).key("c").hold(&dir, "h");
    proxy.set(Mode::Delay, Duration::from_millis(600));
    let waiter = Redlock::run_at(&through_proxy)
        .key("c")
        .ttl("30s")
        .wait("30s")
        .args(["-vv", "--log-format", "json"])
        .sh(&format!("date +%s%N > {}", dir.sh("w.start")))
        .spawn();
    wait_until(Duration::from_secs(20), "the waiter in the queue", || {
        etcd.get_prefix("redlock:{c}/q/").len() == 2
    });
    // While its answer and then its watch are on the way: history moves on and is compacted
    // past the watch's start (the revision after the read; a compaction to it would keep it).
    etcd.put("other", "1");
    etcd.put("other", "2");
    etcd.compact_to_current();
    // The cancelled watch heard, and the proxy quick again for the rest.
    std::thread::sleep(Duration::from_millis(2500));
    proxy.set(Mode::Pass, Duration::ZERO);
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
    // etcdctl's, redlock's run's and the lock's record's.
    assert_eq!(etcd.revoke_all_leases(), 3);
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
    let kept = etcd.get_prefix("redlock:{p}/run/").len();
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
        etcd.get_prefix("redlock:{lv}/q/").len() == 2
    });
    // The holder's lease: the older of the two.
    let leases = etcd.leases();
    let holders_lease = etcd.get_prefix("redlock:{lv}/q/")[0]
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

/// A key in a lock's queue that redlock did not write (by hand, by another tool): `run` refuses
/// to run beside it (64) and `status` says the same (69), naming the key, where `run` called it
/// "several holders that did not record how" and `status` called the lock free; `release
/// --force` removes it, and the lock works again.
#[test]
fn a_foreign_key_in_the_queue_is_named_by_run_and_status() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let url = etcd.url();
    etcd.put("redlock:{g1}/q/zzz", "garbage");
    Redlock::run_at(&url)
        .key("g1")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains(
            "lock 'g1': its key is an entry in its queue (redlock:{g1}/q/zzz) that redlock did not \
             make; not running the command",
        )
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    Redlock::admin_at("status", &url)
        .key("g1")
        .status(69)
        .stderr_contains(
            "its key redlock:{g1}/q/zzz is an entry in its queue that redlock did not make",
        )
        .stderr_lines(1)
        .output();
    Redlock::admin_at("release", &url)
        .key("g1")
        .arg("--force")
        .any_stdout()
        .output();
    assert!(etcd.get_prefix("redlock:{g1}/q/").is_empty());
    Redlock::run_at(&url).key("g1").sh("true").output();
}

/// A waiter let in writes its run's record as its command starts, after its entry: `history`
/// shows the running run with its fencing token (its entry's revision), not the record's own
/// later revision, and a waiter's run killed as it runs is marked vanished. Before, a woken
/// waiter took its look at the queue for the take that records the run: its run had no record
/// until it ended.
#[test]
fn a_running_waiters_history_shows_its_token() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let url = etcd.url();
    let (first, _) = Redlock::run_at(&url).key("hf").ttl("5s").hold(&dir, "a");
    let waiter = Redlock::run_at(&url)
        .key("hf")
        .ttl("5s")
        .wait("20s")
        .sh(&hold_script(&dir, "b"))
        .spawn();
    wait_until(PATIENCE, "the waiter in the queue", || {
        etcd.get_prefix("redlock:{hf}/q/").len() == 2
    });
    touch(&dir.join("a.go"));
    first.finish_within(Duration::from_secs(10)).assert_code(0);
    wait_for_file(&dir.join("b.ready"));
    let token = wait_for_line(&dir.join("b.fence"));
    // The record is written beside the command's start.
    let history = || {
        Redlock::admin_at("history", &url)
            .key("hf")
            .any_stdout()
            .output()
            .stdout
    };
    wait_until(PATIENCE, "the running run recorded", || {
        history().contains("running")
    });
    let shown = history();
    let running = shown.lines().find(|l| l.contains("running")).unwrap();
    assert!(
        running.ends_with(&format!("fence {token}")),
        "{running} (its token: {token})"
    );
    // Killed as it runs, the waiter's run is found vanished by the next run to take the lock,
    // once its lease has ended: its record was there to mark.
    waiter.signal(Signal::SIGKILL);
    waiter
        .finish_within(Duration::from_secs(10))
        .assert_signal(9);
    Redlock::run_at(&url)
        .key("hf")
        .wait("20s")
        .sh("true")
        .output();
    let shown = history();
    assert!(
        shown
            .lines()
            .any(|l| l.contains("vanished") && l.ends_with(&format!("fence {token}"))),
        "{shown}"
    );
}
