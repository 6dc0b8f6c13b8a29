//! The PostgreSQL phase: the clients race `redlock run --wait` for one lock on a real PostgreSQL
//! (synchronous commits on: what redlock answers is on disk) while the server fails, on a
//! schedule drawn from the seed: frozen (every process SIGSTOPped) past the lease, restarted
//! fast within it, SIGKILLed and restarted through crash recovery, and the holder's row deleted
//! by hand, as an operator can.
//!
//! The checks are the main phase's, on the same fenced store: no two workers at once outside
//! fault windows (a window follows a deleted row), the robbed holder's stale writes refused and
//! no other write, no token handed out twice, tokens in the order of acquisitions. And the
//! etcd phase's check of a server frozen past the lease: a holder's command ran no longer than
//! its lease, and redlock said so (76). Afterwards no holder's row is left.

use std::thread;
use std::time::{Duration, Instant};

use super::check::Report;
use super::faults::{self, Fault, Kind};
use super::store::Store;
use crate::common::{PgServer, Redlock, TempDir};
use crate::{KEY, Phase, Rng, expect_no_survivors, mono_ns};

/// The faults of the PostgreSQL phase: every one once a round.
pub const FAULTS: &[Kind] = &[
    Kind::PgFreeze,
    Kind::PgRestart,
    Kind::PgKill,
    Kind::PgHolderDeleted,
];

/// The server, the store, the clients and the faults; then the checker's report.
pub fn run(phase: &Phase, rng: &mut Rng) -> Report {
    let dir = TempDir::new();
    let mut pg = PgServer::start();
    // The test server's default is off (fast, for tests that never crash it): here a kill must
    // lose nothing a client was answered.
    pg.psql("ALTER ROLE postgres SET synchronous_commit = on");
    let init = Redlock::admin_at("init", &pg.url()).any_stdout().output();
    assert_eq!(init.code(), 0, "redlock init: {}", init.stderr);
    let store = Store::start(&dir.join("store.sock"));
    let started = Instant::now();
    let url = pg.url();
    let clients = phase.start_clients(&store, |_| url.clone());
    let faults = phase.schedule(started, rng, |kind, rng| {
        vec![inject(&mut pg, &store, phase, kind, rng)]
    });
    let runs = clients.finish();
    let wall = started.elapsed();
    let mut report = phase.report(wall, faults, &store, runs);
    afterwards(&pg, phase, &store, &mut report);
    report
}

/// Inject one fault of `kind` and heal it.
fn inject(pg: &mut PgServer, store: &Store, phase: &Phase, kind: Kind, rng: &mut Rng) -> Fault {
    // Every draw first, the same whatever the server does: the schedule is the seed's.
    let share = rng.unit();
    let ttl = phase.ttl;
    let ttls = |lo: f64, hi: f64| ttl.mul_f64(lo + (hi - lo) * share);
    let bound = phase.bound();
    let mut fence = None;
    let (at, healed) = match kind {
        Kind::PgFreeze => {
            // A long client's holder, that must renew through the freeze.
            faults::holder(store, bound, |w| phase.long(w.client) && w.writes <= 3);
            pg.freeze();
            // Stamped once every process is stopped: no renewal sent after this is answered.
            let at = mono_ns();
            thread::sleep(ttls(1.5, 2.5));
            let healed = mono_ns();
            pg.thaw();
            (at, healed)
        }
        Kind::PgRestart => {
            faults::holder(store, bound, |_| true);
            let at = mono_ns();
            // A fast shutdown, then the server again on the same port: within the lease.
            pg.restart();
            (at, mono_ns())
        }
        Kind::PgKill => {
            faults::holder(store, bound, |_| true);
            let at = mono_ns();
            pg.kill();
            thread::sleep(ttls(0.1, 0.4));
            pg.restart();
            (at, mono_ns())
        }
        Kind::PgHolderDeleted => {
            faults::holder(store, bound, |_| true);
            let at = mono_ns();
            // The counter in the same statement: every holder up to it is robbed.
            let robbed = pg.psql(&format!(
                "WITH gone AS (DELETE FROM redlock.holders WHERE name = 'redlock:{KEY}') \
                 SELECT fence FROM redlock.locks WHERE name = 'redlock:{KEY}'"
            ));
            fence = Some(robbed.parse().unwrap_or(0));
            (at, mono_ns())
        }
        _ => unreachable!("{kind:?} is not a PostgreSQL fault"),
    };
    Fault {
        kind,
        at,
        healed,
        fence,
        recovery: faults::recovery(store, healed, bound),
    }
}

/// Afterwards no holder's row is left within a few ttls (a holder that could not release
/// leaves its row to the next take, which there is none of: its lease ends, and that is all),
/// and no worker process survives.
fn afterwards(pg: &PgServer, phase: &Phase, store: &Store, report: &mut Report) {
    let grace = phase.ttl * 2 + Duration::from_secs(3);
    let give_up = Instant::now() + grace;
    loop {
        let live = pg.psql(&format!(
            "SELECT count(*) FROM redlock.holders WHERE name = 'redlock:{KEY}' \
             AND until >= clock_timestamp()"
        ));
        if live == "0" {
            break;
        }
        if Instant::now() > give_up {
            report.problems.push(format!(
                "{grace:?} after the clients ended, {live} holders' leases are still running"
            ));
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    expect_no_survivors(store, report);
}

/// The PostgreSQL phase's own checks, after the main phase's: a frozen server cut its holders
/// off in time.
pub fn expect(r: &mut Report, ttl: Duration) {
    super::etcd::expect_cut_off_in_time(r, ttl, Kind::PgFreeze);
}
