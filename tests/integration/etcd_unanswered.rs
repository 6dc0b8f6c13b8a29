//! Requests to etcd that go unanswered. A waiter whose member freezes: the member it asks first
//! (and watches through, and sends its waiting place's keep-alives to) is SIGSTOPped while the
//! lock is held by others. A put or a release whose answer is lost. A revoke that must be
//! answered before the run exits. A member killed under a request, and a port that never spoke
//! etcd's protocol: each said as what it is.
//!
//! The first two found by the chaos suite's etcd phase. A frozen member takes keep-alives without a
//! word: the waiting place's lease runs out a ttl after the last one that landed, though the
//! waiter sent more. The waiter must not take the lock on that lease and count a whole ttl from
//! the take (its command then overlaps the next holder's), and must not give up with 69 when
//! the lease is gone ("requested lease not found"): it takes a new lease and a place at the back.
//! The same holds for a lease whose entry's put was answered too late (the reply lost).

use std::time::Duration;

use crate::common::*;
use crate::integration::fake::{Answer, FakeServer, Then};
use crate::integration::snapshots::assert_snapshot;

/// The command of the waiter: one line per 20 ms into `w.beats` (this host's clock, ns), for
/// 1.5 s, several of its 1 s leases.
fn beats(dir: &TempDir) -> String {
    format!(
        "end=$(($(date +%s%N)+1500000000)); while [ $(date +%s%N) -lt $end ]; do \
         date +%s%N >> {beats}; sleep 0.02; done",
        beats = dir.sh("w.beats")
    )
}

/// A follower F, a URL that asks F first, and one that names only the other two members.
fn follower_first(etcd: &EtcdCluster) -> (usize, String, String) {
    let members = etcd.endpoints();
    let leader = etcd.leader();
    let (f, o) = ((leader + 1) % 3, (leader + 2) % 3);
    let first_f = format!("etcd://{},{},{}", members[f], members[leader], members[o]);
    let others = format!("etcd://{},{}", members[leader], members[o]);
    (f, first_f, others)
}

/// A one-member cluster, a fault-injecting proxy in front of it, and the etcd:// URL through
/// the proxy.
fn member_behind_a_proxy() -> (EtcdCluster, Proxy, String) {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let proxy = Proxy::start(port_of(&etcd.endpoints()[0]));
    let url = proxy.url().replace("redis://", "etcd://");
    (etcd, proxy, url)
}

/// The port of `host:port`.
fn port_of(endpoint: &str) -> u16 {
    endpoint.rsplit(':').next().unwrap().parse().unwrap()
}

fn read_ns(dir: &TempDir, name: &str) -> Vec<u64> {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// H holds through the two members other than F (a follower); W waits asking F first; X waits
/// behind W through the others. F is SIGSTOPped at a different moment each round, then H
/// ends. Whoever takes the lock first, W's command and X's never overlap, and neither is
/// stopped for a lost lock (76). Before the fix this overlapped in about half the rounds.
#[test]
fn a_waiter_whose_member_froze_never_takes_the_lock_on_a_lapsed_lease() {
    let mut etcd = EtcdCluster::start();
    for (round, freeze_after_ms) in [500u64, 800, 1100, 1400].into_iter().enumerate() {
        let dir = TempDir::new();
        let key = format!("frozen-{round}");
        let (f, first_f, others) = follower_first(&etcd);
        let holder = Redlock::run_at(&others)
            .key(&key)
            .ttl("1s")
            .sh(&format!(
                "touch {ready}; while [ ! -e {go} ]; do sleep 0.01; done",
                ready = dir.sh("h.ready"),
                go = dir.sh("h.go")
            ))
            .spawn();
        wait_for_file(&dir.join("h.ready"));
        let w = Redlock::run_at(&first_f)
            .key(&key)
            .ttl("1s")
            .wait("30s")
            .sh(&beats(&dir))
            .spawn();
        std::thread::sleep(Duration::from_millis(500));
        let x = Redlock::run_at(&others)
            .key(&key)
            .ttl("1s")
            .wait("30s")
            .sh(&format!("date +%s%N > {}", dir.sh("x.start")))
            .spawn();
        std::thread::sleep(Duration::from_millis(freeze_after_ms));
        etcd.stop(f);
        touch(&dir.join("h.go"));
        let _ = holder.finish_within(Duration::from_secs(10));
        let w = w.finish_within(Duration::from_secs(40));
        let _ = x.finish_within(Duration::from_secs(40));
        etcd.resume(f);
        etcd.wait_healthy();
        let beats = read_ns(&dir, "w.beats");
        let x_start = read_ns(&dir, "x.start")[0];
        let (first, last) = (beats[0], *beats.last().unwrap());
        assert!(
            x_start < first || x_start > last,
            "round {round}: X's command started {} ms into W's ({} ms long); W said: {}",
            (x_start - first) / 1_000_000,
            (last - first) / 1_000_000,
            w.stderr
        );
        w.assert_code(0);
    }
}

/// W waits asking F first; F is SIGSTOPped for 2 s (twice the ttl), so W's waiting place's
/// lease runs out; the holder ends 2 s after F is back. W takes a new place and the lock, and
/// its command runs (0), within its wait.
#[test]
fn a_waiter_whose_waiting_lease_ran_out_takes_a_new_place() {
    let mut etcd = EtcdCluster::start();
    for round in 0..1 {
        let dir = TempDir::new();
        let key = format!("lapsed-{round}");
        let (f, first_f, others) = follower_first(&etcd);
        let (holder, _) = Redlock::run_at(&others).key(&key).ttl("1s").hold(&dir, "h");
        let w = Redlock::run_at(&first_f)
            .key(&key)
            .ttl("1s")
            .wait("30s")
            .sh(&format!("touch {}", dir.sh("w.ran")))
            .spawn();
        std::thread::sleep(Duration::from_millis(500));
        etcd.stop(f);
        std::thread::sleep(Duration::from_secs(2));
        etcd.resume(f);
        std::thread::sleep(Duration::from_secs(2));
        touch(&dir.join("h.go"));
        holder.finish_within(Duration::from_secs(10)).assert_code(0);
        let w = w.finish_within(Duration::from_secs(40));
        assert!(
            !w.stderr.contains("lease not found"),
            "round {round}: {}",
            w.stderr
        );
        w.assert_code(0);
        assert!(
            dir.join("w.ran").exists(),
            "round {round}: W's command never ran"
        );
        etcd.wait_healthy();
    }
}

/// The reply to the put of the run's entry is lost (the connection dropped after the request
/// went through), then etcd answers nothing for 2.5 s, longer than the 1 s lease. The entry
/// went with its lease; the waiter's next attempt must not put a new entry on that lease (etcd:
/// "requested lease not found", which was a 69): it takes a new lease and the lock (0).
#[test]
fn a_put_whose_reply_was_lost_and_whose_lease_then_ran_out_is_taken_anew() {
    let (_etcd, proxy, url) = member_behind_a_proxy();
    let dir = TempDir::new();
    proxy.lose_reply_to(b"redlock:{lost-put}/q/");
    let run = Redlock::run_at(&url)
        .key("lost-put")
        .ttl("1s")
        .wait("30s")
        .sh(&format!("touch {}", dir.sh("ran")))
        .spawn();
    wait_until(PATIENCE, "the put's reply lost", || proxy.lost_a_reply());
    proxy.set(Mode::Hang, Duration::ZERO);
    std::thread::sleep(Duration::from_millis(2500));
    proxy.set(Mode::Pass, Duration::ZERO);
    let out = run.finish_within(Duration::from_secs(40));
    assert!(!out.stderr.contains("lease not found"), "{}", out.stderr);
    out.assert_code(0);
    assert!(dir.join("ran").exists(), "the command never ran");
}

/// The answer to the release is lost (the connection cut after the request went through); the
/// retry finds the entry gone. The run's record says the first attempt ended it as a success:
/// the lock was released, not lost, and redlock exits with its command's status (0), as on
/// Redis. It said "may have been lost" and exited 76 before.
#[test]
fn a_release_whose_answer_was_lost_is_a_release() {
    let (etcd, proxy, url) = member_behind_a_proxy();
    let dir = TempDir::new();
    let (run, _) = Redlock::run_at(&url)
        .key("answer-cut")
        .ttl("3s")
        .hold(&dir, "h");
    // Only the release writes the summary of the last run to end.
    proxy.lose_reply_to(b"redlock:{answer-cut}/last_ended");
    touch(&dir.join("h.go"));
    let out = run.finish_within(Duration::from_secs(20));
    assert!(proxy.lost_a_reply(), "the release's answer was not lost");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    out.assert_code(0);
    Redlock::admin_at("status", &etcd.url())
        .key("answer-cut")
        .stdout_contains("is free")
        .stdout_contains("0 lost")
        .output();
}

/// Runs one after the other leave no lease of theirs behind (60 s each): each run's revoke is answered
/// before it exits, straight to the member and through a proxy that delays every chunk by
/// 2 ms, a network's round trip. A revoke given a fixed 500 µs and then dropped with the
/// connection left about half of the proxy's runs' leases: etcd drops a request whose
/// connection closes before it is carried out.
#[test]
fn runs_leave_no_lease_behind() {
    let (etcd, proxy, through_proxy) = member_behind_a_proxy();
    proxy.set(Mode::Delay, Duration::from_millis(2));
    for (url, runs) in [(etcd.url(), 30), (through_proxy, 10)] {
        for _ in 0..runs {
            Redlock::run_at(&url)
                .key("leases")
                .ttl("60s")
                .sh("true")
                .output();
        }
        // The lock's record has one lease, for the name, not the run.
        let record = etcd.leased_keys("redlock:{leases}/last_ended")[0].1;
        let left = etcd.leases();
        assert!(
            left.iter()
                .all(|id| u64::from_str_radix(id, 16) == Ok(record)),
            "{url}: {} of {runs} leases left beside the record's ({record:x}): {left:?}",
            left.len()
        );
    }
}

/// Lines that belong to a port that is not an etcd member's: said of a member that went away,
/// they send an operator to check a port that was right.
const WRONG_PORT: [&str; 3] = [
    "did not answer in etcd's protocol",
    "closed the connection at once",
    "etcds://",
];

/// The line for a member that went away under a request.
const WENT_AWAY: &str = "closed the connection mid-request (the member stopped or restarted?)";

fn says_it_went_away(who: &str, stderr: &str) {
    assert!(stderr.contains(WENT_AWAY), "{who} said: {stderr}");
    for wrong in WRONG_PORT {
        assert!(!stderr.contains(wrong), "{who} said: {stderr}");
    }
}

/// A holder's renewal is sent to its member, stopped; the member is killed with the request
/// unread (the kernel resets the connection), then started again. The renewal's warning says
/// the member went away, not to check the port; the run goes on (0). It said "closed the
/// connection at once ...; if it is a TLS port, use etcds://" before.
#[test]
fn a_member_killed_under_a_renewal_is_said_to_have_gone() {
    let mut etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    // A renewal every 2 s, each given 1 s; -vv says when one is done.
    let (holder, _) = Redlock::run_at(&etcd.url())
        .arg("-vv")
        .key("k")
        .ttl("6s")
        .hold(&dir, "h");
    wait_until(PATIENCE, "a renewal", || {
        holder.stderr_so_far().contains("renewed lock")
    });
    // The connection is idle until the next renewal: what reaches the stopped member is it.
    let port = port_of(&etcd.endpoints()[0]);
    etcd.stop(0);
    wait_until(PATIENCE, "the next renewal sent", || unread_at(port));
    etcd.kill(0);
    wait_until(PATIENCE, "the renewal's warning", || {
        holder.stderr_so_far().contains("renewing lock 'k' failed")
    });
    etcd.restart(0);
    touch(&dir.join("h.go"));
    let out = holder.finish_within(Duration::from_secs(30));
    says_it_went_away("the holder", &out.stderr);
    out.assert_code(0);
    // The line docs/messages.md quotes.
    let warning = out.stderr.lines().find(|l| l.contains(WENT_AWAY)).unwrap();
    let member = etcd.endpoints()[0].clone();
    assert_snapshot(
        "etcd-member-gone.stderr",
        warning,
        &[(&member, "127.0.0.1:2379")],
    );
}

/// A waiter watches the holder's entry through a member that is killed (SIGKILL), then started
/// again. The watch's response is cut: the waiter says the member went away, where it said the
/// port did not answer in etcd's protocol ("h2 protocol error"), and takes the lock (0) once
/// the holder is done.
#[test]
fn a_member_killed_under_a_watch_is_said_to_have_gone() {
    let mut etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&etcd.url())
        .key("watched")
        .ttl("30s")
        .hold(&dir, "h");
    let waiter = Redlock::run_at(&etcd.url())
        .key("watched")
        .ttl("30s")
        .wait("60s")
        .sh(&format!("touch {}", dir.sh("w.ran")))
        .spawn();
    wait_until(PATIENCE, "the waiter queued", || {
        etcd.get_prefix("redlock:{watched}/q/").len() == 2
    });
    etcd.kill(0);
    wait_until(PATIENCE, "the waiter's warning", || {
        waiter
            .stderr_so_far()
            .contains("cannot take lock 'watched'")
    });
    etcd.restart(0);
    touch(&dir.join("h.go"));
    let _ = holder.finish_within(Duration::from_secs(30));
    let out = waiter.finish_within(Duration::from_secs(60));
    says_it_went_away("the waiter", &out.stderr);
    out.assert_code(0);
    assert!(dir.join("w.ran").exists(), "the waiter's command never ran");
}

/// The member named first is not etcd: a server that answers HTTP/1.1, or Redis. redlock asks
/// the next member, as it does when one hangs, and the run and `status` go on (0). They gave up
/// at once with 69 ("h2 protocol error") before. With no etcd behind any member, the line says
/// what was found (69).
#[test]
fn a_member_that_speaks_another_protocol_is_passed_over() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    for reply in [
        &b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"[..],
        &b"-ERR unknown command\r\n"[..],
    ] {
        let fake = FakeServer::start(Answer::Reply {
            reply: reply.to_vec(),
            then: Then::Hang,
        });
        let url = format!("etcd://{},{}", fake.addr(), etcd.endpoints()[0]);
        Redlock::run_at(&url)
            .key("other-protocol")
            .sh(&format!("touch {}", dir.sh("ran")))
            .output();
        assert!(dir.join("ran").exists());
        Redlock::admin_at("status", &url)
            .key("other-protocol")
            .stdout_contains("is free")
            .output();
        let alone = format!("etcd://{}", fake.addr());
        let out = Redlock::run_at(&alone)
            .key("other-protocol")
            .status(69)
            .stderr_contains("did not answer in etcd's protocol")
            .stderr_lines(1)
            .sh("true")
            .output();
        assert!(!out.stderr.contains(WENT_AWAY), "{}", out.stderr);
    }
}

/// Ports that never spoke etcd's protocol keep the advice to check the port, never the line of
/// a member that went away: a real Redis server, and a port that reads the request and closes.
#[test]
fn a_port_that_never_spoke_etcd_is_said_to_be_the_wrong_port() {
    let redis = RedisServer::start();
    let closes = FakeServer::start(Answer::Reply {
        reply: Vec::new(),
        then: Then::Close,
    });
    for (url, said) in [
        (
            format!("etcd://127.0.0.1:{}", redis.port()),
            "did not answer in etcd's protocol, gRPC over HTTP/2",
        ),
        (
            format!("etcd://{}", closes.addr()),
            "closed the connection at once",
        ),
    ] {
        for sub in ["run", "status"] {
            let redlock = match sub {
                "run" => Redlock::run_at(&url).sh("true"),
                _ => Redlock::admin_at(sub, &url),
            };
            let out = redlock
                .key("wrong-port")
                .status(69)
                .stderr_contains(said)
                .stderr_lines(1)
                .output();
            assert!(!out.stderr.contains(WENT_AWAY), "{}", out.stderr);
        }
    }
}
