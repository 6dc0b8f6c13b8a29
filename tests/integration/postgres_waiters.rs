//! Waiters on PostgreSQL whose session is gone, on real servers: a waiter SIGKILLed while it
//! waits, plain and `--fair`, costs the live waiter behind it nothing when the holder releases,
//! also when the two log in as different least-privilege roles and behind PgBouncer in session
//! mode. A waiter whose session the server ended comes back in a new one and keeps its place. A
//! `--fair` waiter queued on a primary that failed over does not hold up the queue on the
//! promoted standby, where its session never existed, nor do twenty thousand such rows. Leases
//! and registrations last 20 s here, so a live waiter that ran only once one of them ended would
//! show as a wait of many seconds.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::common::*;
use crate::integration::conformance::PgWithTables;
use crate::integration::postgres::page_role;
use crate::integration::postgres_hostile::pgbouncer;
use crate::integration::waiting::{gap, hold_then_stamp, lines, log_script};

/// Far below the 20 s a lease or a registration lasts here, with room for a loaded machine.
const AT_ONCE: Duration = Duration::from_secs(2);

/// The waiters' rows of lock `key` on `pg`.
fn waiters(pg: &PgServer, key: &str) -> usize {
    pg.psql(&format!(
        "SELECT count(*) FROM redlock.waiters WHERE name = 'redlock:{key}'"
    ))
    .parse()
    .unwrap()
}

/// The sessions redlock has open on `pg`.
fn sessions(pg: &PgServer) -> usize {
    pg.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'redlock'")
        .parse()
        .unwrap()
}

/// A holder of `key` with a 20 s ttl (`holder`), waiter 0 and then waiter 1 behind it
/// (`waiter`, each registered in turn), all with `args`; waiter 0 SIGKILLed and its session
/// gone; then the holder lets go. Waiter 1 starts within [`AT_ONCE`] of the holder's command's
/// end.
fn a_live_waiter_behind_a_killed_one_starts_at_once(
    pg: &PgServer,
    key: &str,
    args: &[&str],
    holder: impl Fn() -> Redlock,
    waiter: impl Fn() -> Redlock,
) {
    let dir = TempDir::new();
    let holding = holder()
        .key(key)
        .ttl("20s")
        .args(args)
        .sh(&hold_then_stamp(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let waiting = |i| {
        waiter()
            .key(key)
            .ttl("20s")
            .args(args)
            .wait("60s")
            .sh(&log_script(&dir, i))
            .spawn()
    };
    let dead = waiting(0);
    wait_until(PATIENCE, "the first waiter to register", || {
        waiters(pg, key) == 1
    });
    let live = waiting(1);
    wait_until(PATIENCE, "the second waiter to register", || {
        waiters(pg, key) == 2
    });
    let open = sessions(pg);
    dead.signal(Signal::SIGKILL);
    dead.finish().assert_signal(9);
    wait_until(PATIENCE, "the killed waiter's session to end", || {
        sessions(pg) == open - 1
    });
    // Its row stays: nothing ran on its behalf, and its registration has 20 s to go.
    assert_eq!(waiters(pg, key), 2);
    touch(&dir.join("h.go"));
    holding.finish().assert_code(0);
    live.finish_within(Duration::from_secs(70)).assert_code(0);
    assert_eq!(lines(&dir, "order"), ["1"]);
    let gap = gap(&dir, "h.end", "1.start");
    eprintln!("{key}: the live waiter started {gap:?} after the holder's command ended");
    assert!(
        gap < AT_ONCE,
        "{key}: the live waiter started {gap:?} after the holder's command ended"
    );
    assert_eq!(waiters(pg, key), 0, "{key}: rows left behind");
}

#[test]
fn a_live_waiter_behind_a_killed_one_starts_at_once_plain() {
    let PgWithTables(pg) = PgWithTables::start();
    let run = || Redlock::run_at(&pg.url());
    a_live_waiter_behind_a_killed_one_starts_at_once(&pg, "plain", &[], run, run);
}

#[test]
fn a_live_waiter_behind_a_killed_one_starts_at_once_fair() {
    let PgWithTables(pg) = PgWithTables::start();
    let run = || Redlock::run_at(&pg.url());
    a_live_waiter_behind_a_killed_one_starts_at_once(&pg, "fair", &["--fair"], run, run);
}

/// The holder and the waiters log in as two roles of docs/postgres.md's least-privilege kind:
/// the holder's release tells the killed waiter's session from the live one's, though neither
/// is its own role's.
#[test]
fn a_killed_waiter_is_passed_over_by_a_holder_of_another_least_privilege_role() {
    let pg = PgServer::start_with_passwords();
    Redlock::admin_at("init", &pg.url())
        .env("REDLOCK_PASSWORD", pg.password().unwrap())
        .any_stdout()
        .output();
    page_role(&pg, "cron_jobs", "job-secret");
    page_role(&pg, "batch_jobs", "batch-secret");
    let as_role = |role: &str, password: &str| {
        let url = format!("postgres://{role}@127.0.0.1:{}/postgres", pg.port());
        let password = password.to_owned();
        move || Redlock::run_at(&url).env("REDLOCK_PASSWORD", &password)
    };
    for (key, args) in [("plain", &[][..]), ("fair", &["--fair"][..])] {
        a_live_waiter_behind_a_killed_one_starts_at_once(
            &pg,
            key,
            args,
            as_role("cron_jobs", "job-secret"),
            as_role("batch_jobs", "batch-secret"),
        );
    }
}

/// Behind PgBouncer in session mode (told to pass over the session setting redlock asks for),
/// the server's sessions are the pool's: a killed client's stays open. PgBouncer resets it for
/// the next client (`DISCARD ALL`, its default `server_reset_query`), which lets the advisory
/// lock of a waiter's session go: the killed waiter is passed over as without the pool.
#[test]
fn behind_pgbouncer_in_session_mode_a_killed_waiter_is_passed_over() {
    let PgWithTables(pg) = PgWithTables::start();
    let (bouncer, _dir, url) = pgbouncer(
        &pg,
        "pool_mode = session\nignore_startup_parameters = options",
    );
    let run = || Redlock::run_at(&url);
    for (key, args) in [("plain", &[][..]), ("fair", &["--fair"][..])] {
        a_live_waiter_behind_a_killed_one_starts_at_once(&pg, key, args, run, run);
    }
    bouncer.signal(Signal::SIGTERM);
    let _ = bouncer.finish();
}

/// Twenty thousand waiters' rows whose sessions are gone, queued ahead of a live `--fair`
/// waiter (as a crowd of waiters on a primary that failed over would leave them; made here by
/// hand, with process ids past the kernel's largest, 2^22). The live waiter's take passes over
/// every one in its one transaction, holding none of their advisory locks (the server's lock
/// table has room for a few thousand), and the holder's release lets it in at once.
#[test]
fn a_take_passes_over_thousands_of_gone_waiters_in_one_transaction() {
    let PgWithTables(pg) = PgWithTables::start();
    let dir = TempDir::new();
    let run = || {
        Redlock::run_at(&pg.url())
            .key("crowd")
            .ttl("20s")
            .arg("--fair")
    };
    let holder = run().sh(&hold_then_stamp(&dir, "h")).spawn();
    wait_for_file(&dir.join("h.ready"));
    pg.psql(
        "INSERT INTO redlock.waiters (name, token, kind, queued, since, until, backend_pid) \
         SELECT 'redlock:crowd', 'gone-' || g, 'lock', true, clock_timestamp(), \
                clock_timestamp() + interval '1 hour', 4194304 + g \
         FROM generate_series(1, 20000) g",
    );
    let mut live = run().wait("60s").sh(&log_script(&dir, 1)).spawn();
    wait_until(PATIENCE, "the live waiter to register alone", || {
        assert!(live.running(), "the live waiter: {}", live.stderr_so_far());
        waiters(&pg, "crowd") == 1
    });
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    live.finish().assert_code(0);
    let gap = gap(&dir, "h.end", "1.start");
    assert!(
        gap < AT_ONCE,
        "the live waiter started {gap:?} after the release"
    );
}

/// The server process of the session that waiter `token` of lock `key` registered from ("" if
/// it has no row).
fn backend_of(pg: &PgServer, key: &str, token: &str) -> String {
    pg.psql(&format!(
        "SELECT backend_pid FROM redlock.waiters WHERE name = 'redlock:{key}' AND token = '{token}'"
    ))
}

/// Waiter 0 and then waiter 1 behind a holder of `key` (20 s ttl, `args`); waiter 0's session
/// ended by the server (`pg_terminate_backend`) while it waits. It connects again and registers
/// from its new session: it keeps its place, and the holder's release lets it in first, at once.
fn a_waiter_whose_session_ended_keeps_its_place_from_its_next(key: &str, args: &[&str]) {
    let PgWithTables(pg) = PgWithTables::start();
    let dir = TempDir::new();
    let run = || Redlock::run_at(&pg.url()).key(key).ttl("20s").args(args);
    let holder = run().sh(&hold_then_stamp(&dir, "h")).spawn();
    wait_for_file(&dir.join("h.ready"));
    let waiter = |i| run().wait("60s").sh(&log_script(&dir, i)).spawn();
    let first = waiter(0);
    wait_until(PATIENCE, "the first waiter to register", || {
        waiters(&pg, key) == 1
    });
    let second = waiter(1);
    wait_until(PATIENCE, "the second waiter to register", || {
        waiters(&pg, key) == 2
    });
    let token = pg.psql(&format!(
        "SELECT token FROM redlock.waiters WHERE name = 'redlock:{key}' ORDER BY seq LIMIT 1"
    ));
    let ended = backend_of(&pg, key, &token);
    assert_eq!(
        pg.psql(&format!("SELECT pg_terminate_backend({ended})")),
        "t"
    );
    wait_until(
        PATIENCE,
        "the first waiter to register from a new session",
        || {
            let now = backend_of(&pg, key, &token);
            !now.is_empty()
                && now != ended
                && pg.psql(&format!(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = {now}"
                )) == "1"
        },
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
    first.finish_within(Duration::from_secs(70)).assert_code(0);
    second.finish_within(Duration::from_secs(70)).assert_code(0);
    assert_eq!(lines(&dir, "order"), ["0", "1"], "{key}");
    let gap = gap(&dir, "h.end", "0.start");
    assert!(
        gap < AT_ONCE,
        "{key}: the first waiter started {gap:?} after the holder's command ended"
    );
}

#[test]
fn a_waiter_whose_session_ended_keeps_its_place_from_its_next_plain() {
    a_waiter_whose_session_ended_keeps_its_place_from_its_next("plain", &[]);
}

#[test]
fn a_waiter_whose_session_ended_keeps_its_place_from_its_next_fair() {
    a_waiter_whose_session_ended_keeps_its_place_from_its_next("fair", &["--fair"]);
}

/// A `--fair` waiter queued on a primary (its row streamed to the standby) and the primary lost:
/// on the promoted standby its row names a session that never existed there. Once the holder's
/// lease has ended there, a `--fair` newcomer takes the lock at once instead of queueing behind
/// the row until its registration ends (20 s).
#[test]
fn a_waiter_queued_on_a_primary_lost_is_passed_over_on_the_promoted_standby() {
    let mut primary = PgServer::start();
    Redlock::admin_at("init", &primary.url())
        .any_stdout()
        .output();
    let standby = primary.standby();
    standby.walreceiver_pid();
    let dir = TempDir::new();
    // A short lease for the holder, which is lost with the primary; the waiter's 20 s ttl
    // registers it for about 21 s.
    let holder = Redlock::run_at(&primary.url())
        .key("job")
        .ttl("2s")
        .sh(&hold_script(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let queued = Redlock::run_at(&primary.url())
        .key("job")
        .ttl("20s")
        .args(["--fair", "--wait", "60s"])
        .sh(&log_script(&dir, 0))
        .spawn();
    wait_until(PATIENCE, "the standby to have the queued waiter", || {
        waiters(&standby, "job") == 1
            && standby.psql("SELECT bool_and(queued) FROM redlock.waiters") == "t"
    });
    primary.kill();
    standby.promote();
    wait_until(PATIENCE, "the holder's lease to end on the standby", || {
        standby.psql("SELECT count(*) FROM redlock.holders WHERE until >= clock_timestamp()") == "0"
    });
    // The holder could not renew: it stopped its command (76). The waiter tries the lost
    // primary again and again.
    holder.finish().assert_code(76);
    let started = Instant::now();
    let newcomer = Redlock::run_at(&standby.url())
        .key("job")
        .ttl("20s")
        .args(["--fair", "--wait", "60s"])
        .sh(&log_script(&dir, 1))
        .spawn();
    newcomer
        .finish_within(Duration::from_secs(70))
        .assert_code(0);
    let took = started.elapsed();
    eprintln!("the newcomer ran in {took:?}");
    assert!(took < AT_ONCE, "the newcomer ran in {took:?}");
    assert_eq!(lines(&dir, "order"), ["1"]);
    assert_eq!(waiters(&standby, "job"), 0, "the lost waiter's row stayed");
    queued.signal(Signal::SIGKILL);
    queued.finish().assert_signal(9);
}
