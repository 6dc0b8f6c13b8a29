//! PostgreSQL failed over across a partition: the primary pa and the holder's host c0 on side
//! A; the streaming standby sb and the waiter's host c1 on side B. The test cuts, then promotes
//! sb with `pg_ctl promote` on its host (what an operator or a failover manager does once the
//! primary is unreachable), and starts the waiter there: its URL names sb, since redlock does
//! not pick the primary among several hosts.
//!
//! With sb synchronous (`synchronous_standby_names`, the role's `synchronous_commit =
//! remote_apply`, set up in docs/postgres.md's order), the holder's renewals on pa wait for sb
//! and get no answer: it is stopped (76) before its lease could end, and the waiter takes the
//! lock once the lease sb has ends, after it. With sb asynchronous, pa answers the renewals
//! and the holder runs on, while sb has its lease end as of the cut: two holders at once, the
//! limit docs/guarantees.md states.

use std::time::Duration;

use serde_json::Value;

use super::pg::PgHost;
use super::resource;
use super::scene::{KEY, Scene, ended, now, report};
use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, Redlock, TempDir, marker_script, postgres_bin, wait_until};

const TTL: Duration = Duration::from_secs(3);

const LAYOUT: [(&str, Side); 4] = [
    ("pa", Side::A),
    ("c0", Side::A),
    ("sb", Side::B),
    ("c1", Side::B),
];

fn url(net: &Net, host: &str) -> String {
    format!("postgres://postgres@{}:5432/postgres", net.host(host).addr)
}

/// The net, or None where it cannot be made or PostgreSQL is not installed (one line says so;
/// under `CI` a missing PostgreSQL fails).
fn net() -> Option<Net> {
    if postgres_bin().is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI must have PostgreSQL");
        eprintln!("skipped: no PostgreSQL under /usr/lib/postgresql/N/bin");
        return None;
    }
    Net::new(&LAYOUT)
}

/// The primary with redlock's tables, and its standby streaming; synchronous when `sync`,
/// set up in docs/postgres.md's order.
fn servers(net: &Net, sync: bool) -> (PgHost<'_>, PgHost<'_>) {
    let primary = PgHost::primary(net, "pa");
    Redlock::admin_at("init", &url(net, "pa"))
        .through(net.within("c0"))
        .any_stdout()
        .output();
    if sync {
        primary.psql("ALTER ROLE postgres SET synchronous_commit = remote_apply");
    }
    let standby = PgHost::standby(net, "sb", &primary);
    if sync {
        primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'");
        primary.psql("SELECT pg_reload_conf()");
        wait_until(PATIENCE, "the standby to be synchronous", || {
            primary.psql("SELECT sync_state FROM pg_stat_replication") == "sync"
        });
    }
    (primary, standby)
}

/// The holder on c0 until its take and three ticks are on the standby too; then the cut, and
/// the standby promoted as docs/postgres.md says (alone, it names no synchronous standby).
/// Returns the scene, the cut's time and the holder.
fn split<'n>(net: &'n Net, standby: &PgHost) -> (Scene<'n>, i128, crate::common::Proc) {
    let scene = Scene::new(net, vec![url(net, "pa")], TTL);
    let holder = scene.run("c0", &[]);
    let start = scene.started("c0", PATIENCE);
    scene.ticked_after("c0", start.ns, 3);
    wait_until(PATIENCE, "the standby to have the holder's take", || {
        standby.psql("SELECT count(*) FROM redlock.holders") == "1"
    });
    let cut_ns = now();
    net.cut();
    standby.promote();
    standby.psql("ALTER SYSTEM RESET synchronous_standby_names");
    standby.psql("SELECT pg_reload_conf()");
    (scene, cut_ns, holder)
}

/// `redlock <sub> --json` on `host` against the server `at`, which must answer.
#[track_caller]
fn json(net: &Net, sub: &str, host: &str, at: &str) -> Value {
    let r = Redlock::sub(sub).through(net.within(host));
    let out = r
        .url(&url(net, at))
        .key(KEY)
        .arg("--json")
        .any_stdout()
        .output();
    serde_json::from_str(&out.stdout).unwrap()
}

/// After the heal, from either side, the promoted standby tells the truth: the lock is held by
/// c1's run, and the cut-off run of token `old` is recorded as lost.
#[track_caller]
fn new_primary_tells_the_truth(net: &Net, old: u64) {
    for host in ["c0", "c1"] {
        let s = json(net, "status", host, "sb");
        assert_eq!(s["state"], "held", "status from {host}: {s}");
        assert_eq!(s["last_run"]["host"], "c1", "status from {host}: {s}");
        assert_eq!(
            s["last_run"]["outcome"], "running",
            "status from {host}: {s}"
        );
        let runs = json(net, "history", host, "sb");
        let found = runs.as_array().unwrap().iter();
        let cut_off = found
            .clone()
            .find(|r| r["fence"].as_u64() == Some(old))
            .unwrap_or_else(|| panic!("history from {host} has no run of token {old}: {runs}"));
        let outcome = cut_off["outcome"].as_str().unwrap_or("");
        eprintln!("postgres history from {host}: the cut-off run's outcome is {outcome}");
        assert!(
            ["lock_lost", "vanished"].contains(&outcome),
            "history from {host} records the cut-off run as {outcome}: {cut_off}"
        );
    }
}

#[test]
fn a_synchronous_standby_promoted_takes_over_after_the_cut_off_holder_stopped() {
    let Some(net) = net() else {
        return;
    };
    let (primary, standby) = servers(&net, true);
    let (scene, cut_ns, holder) = split(&net, &standby);
    let waiter = scene.run_at("c1", &url(&net, "sb"), &["--wait", "60s"]);
    // The renewals wait on pa for sb's confirmation, which never comes.
    let out = ended(holder, TTL + Duration::from_secs(5));
    out.assert_code(76);
    let begun = scene.started("c1", PATIENCE);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(
        "postgres, synchronous standby promoted: holder + primary | standby + waiter",
        TTL,
        &timing,
    );
    let stop = timing
        .stop_after_cut
        .expect("the holder wrote after the cut");
    assert!(stop < TTL, "the holder was stopped {stop:?} after the cut");
    let holders = scene.check();
    assert!(holders[1].token > holders[0].token);

    // Healed, the old primary still waits for its synchronous standby: a run there gets no
    // answer in time (69), and its command does not run.
    let heal_ns = now();
    net.heal();
    let dir = TempDir::new();
    scene
        .redlock("run", "c0")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    assert!(
        !dir.join("marker").exists(),
        "the old primary gave the lock"
    );
    assert_eq!(primary.psql("SELECT pg_is_in_recovery()"), "f");
    new_primary_tells_the_truth(&net, holders[0].token);
    scene.ticked_after("c1", heal_ns.max(begun.ns), 5);
    scene.finish("c1");
    ended(waiter, PATIENCE).assert_code(0);
    let holders = scene.check();
    let order: Vec<&str> = holders.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["c0", "c1"], "holders at the resource");
}

/// The promoted standby has the holder's take but no renewal after the cut: its lease ends a
/// ttl after the last one it had. The old primary answers the holder's renewals, so the holder
/// runs on: the check at the resource finds two holders, and the test shows for how long.
/// The operator then stops the old primary, as docs/postgres.md says, before the heal.
#[test]
fn an_asynchronous_standby_promoted_lets_a_second_holder_in_beside_the_first() {
    let Some(net) = net() else {
        return;
    };
    let (mut primary, standby) = servers(&net, false);
    let (scene, cut_ns, mut holder) = split(&net, &standby);
    let waiter = scene.run_at("c1", &url(&net, "sb"), &["--wait", "60s"]);
    let begun = scene.started("c1", PATIENCE);
    scene.ticked_after("c0", begun.ns, 3);
    assert!(holder.running(), "{}", holder.stderr_so_far());
    let violation = resource::check(&scene.stamps()).expect_err("two holders at once");
    eprintln!("postgres, asynchronous standby: {violation}");
    let old = scene.of("c0")[0].token;
    assert!(begun.token > old, "the standby had the take: tokens rise");

    // The operator stops the old primary: the holder's renewals fail, and it is stopped.
    let stop_ns = now();
    primary.stop();
    let out = ended(holder, TTL + Duration::from_secs(5));
    out.assert_code(76);
    let timing = scene.timing(cut_ns, "c0", "c1");
    report(
        "postgres, asynchronous standby promoted: holder + primary | standby + waiter",
        TTL,
        &timing,
    );
    let last = scene.of("c0").last().unwrap().ns;
    eprintln!(
        "postgres, asynchronous standby: the old primary stopped {} ms after the cut; the \
         holder's last write {} ms after that",
        resource::ms(stop_ns - cut_ns),
        resource::ms(last - stop_ns)
    );
    net.heal();
    new_primary_tells_the_truth(&net, old);
    scene.finish("c1");
    ended(waiter, PATIENCE).assert_code(0);
}
