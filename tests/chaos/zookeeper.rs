//! The ZooKeeper phase: the clients race `redlock run --wait` for one lock on a real 3-member
//! ZooKeeper ensemble while its members fail, on a schedule drawn from the seed: the leader, or
//! a random member, SIGSTOPped and SIGCONTed; a random member SIGKILLed and restarted on its
//! data; two of the three SIGSTOPped past the lease; the holder's entry deleted by hand.
//!
//! The checks are the main phase's, on the same fenced store: no two workers at once outside
//! fault windows (a window follows the deleted entry: its holder hears of it at its next
//! renewal), the robbed holder's stale writes refused and no other write, no token handed out
//! twice, and tokens (the entries' creation zxids) in the order of acquisitions. And checks of
//! its own: with no majority, a holder's command ran no longer than its lease and redlock said
//! so (76); afterwards no entry is left.

use std::thread;
use std::time::{Duration, Instant};

use super::check::Report;
use super::faults::{self, Fault, Kind};
use super::store::Store;
use crate::common::{TempDir, ZkEnsemble, ZkOpts};
use crate::{KEY, Phase, Rng, expect_no_survivors, mono_ns};

/// The faults of the ZooKeeper phase: every one once a round.
pub const FAULTS: &[Kind] = &[
    Kind::ZkLeaderStop,
    Kind::ZkMemberStop,
    Kind::ZkMemberKill,
    Kind::ZkMajorityStop,
    Kind::ZkEntryDeleted,
];

/// The lock's node, under the default prefix.
fn lock_node() -> String {
    format!("/redlock:{{{KEY}}}")
}

/// The ensemble, the store, the clients and the faults; then the checker's report.
pub fn run(phase: &Phase, rng: &mut Rng) -> Report {
    let dir = TempDir::new();
    // Sessions as long as the phase's lease, and a tick small beside it.
    let mut zk = ZkEnsemble::start_with(ZkOpts {
        extra_config: vec!["maxSessionTimeout=60000".to_owned()],
        ..ZkOpts::default()
    });
    let store = Store::start(&dir.join("store.sock"));
    let started = Instant::now();
    // Each client names the members in an order of its own: the client connects to one of
    // them, so a fault on any member meets some of the clients there.
    let members = zk.endpoints();
    let clients = phase.start_clients(&store, |client| {
        let mut order = members.clone();
        order.rotate_left(client % members.len());
        format!("zk://{}", order.join(","))
    });
    let mut ensemble = Ensemble {
        zk: &mut zk,
        store: &store,
        phase,
    };
    let faults = phase.schedule(started, rng, |kind, rng| ensemble.inject(kind, rng));
    let runs = clients.finish();
    let wall = started.elapsed();
    let mut report = phase.report(wall, faults, &store, runs);
    afterwards(&zk, phase, &store, &mut report);
    report
}

/// What the ZooKeeper faults act on.
struct Ensemble<'a> {
    zk: &'a mut ZkEnsemble,
    store: &'a Store,
    phase: &'a Phase,
}

impl Ensemble<'_> {
    /// Wait (up to the bound) for a long client's holder that has just started: the fault
    /// then meets a holder that must renew through it.
    fn long_holder(&self) {
        let phase = self.phase;
        faults::holder(self.store, phase.bound(), |w| {
            phase.long(w.client) && w.writes <= 3
        });
    }

    /// Inject one fault of `kind`, heal it, and wait for the lock to be taken again.
    fn inject(&mut self, kind: Kind, rng: &mut Rng) -> Vec<Fault> {
        // Every draw first, the same whatever the ensemble does: the schedule is the seed's.
        let member = rng.range(0, self.zk.size() as u64) as usize;
        let share = rng.unit();
        let ttl = self.phase.ttl;
        let ttls = |lo: f64, hi: f64| ttl.mul_f64(lo + (hi - lo) * share);
        let mut fence = None;
        // For a stop, `healed` is when the SIGCONTs go out.
        let (at, healed) = match kind {
            Kind::ZkLeaderStop => {
                self.long_holder();
                let leader = self.zk.leader();
                let at = mono_ns();
                self.zk.stop(leader);
                thread::sleep(ttls(1.0, 2.0));
                let healed = mono_ns();
                self.zk.resume(leader);
                (at, healed)
            }
            Kind::ZkMemberStop => {
                let at = mono_ns();
                self.zk.stop(member);
                thread::sleep(ttls(0.5, 2.0));
                let healed = mono_ns();
                self.zk.resume(member);
                (at, healed)
            }
            Kind::ZkMemberKill => {
                let at = mono_ns();
                self.zk.kill(member);
                thread::sleep(ttls(0.2, 1.0));
                self.zk.restart(member);
                (at, mono_ns())
            }
            Kind::ZkMajorityStop => {
                self.long_holder();
                // All but `member`.
                let stopped: Vec<usize> = (0..self.zk.size()).filter(|&i| i != member).collect();
                for &i in &stopped {
                    self.zk.stop(i);
                }
                // Stamped once they are stopped: no renewal sent after this can be answered, so
                // every holder's lease ends within a ttl of it.
                let at = mono_ns();
                thread::sleep(ttls(1.5, 2.5));
                let healed = mono_ns();
                for &i in &stopped {
                    self.zk.resume(i);
                }
                self.zk.wait_healthy();
                (at, healed)
            }
            Kind::ZkEntryDeleted => {
                faults::holder(self.store, self.phase.bound(), |_| true);
                let at = mono_ns();
                // The first entry holds: deleted, as an operator can. Every holder it robbed has
                // its creation zxid or a lower one.
                let mut entries: Vec<String> = self
                    .zk
                    .ls(&lock_node())
                    .into_iter()
                    .filter(|c| c.starts_with("lock-"))
                    .collect();
                entries.sort_by_key(|c| c.rsplit('-').next().map(str::to_owned));
                if let Some(first) = entries.first() {
                    let path = format!("{}/{first}", lock_node());
                    if let Some(stat) = self.zk.stat(&path) {
                        self.zk.delete(&path);
                        fence = Some(stat.czxid);
                    }
                }
                (at, mono_ns())
            }
            _ => unreachable!("{kind:?} is not a ZooKeeper fault"),
        };
        vec![Fault {
            kind,
            at,
            healed,
            fence,
            recovery: faults::recovery(self.store, healed, self.phase.bound()),
        }]
    }
}

/// Afterwards the lock's queue is empty within a few ttls (a holder that could not release
/// leaves its session to end), and no worker process survives.
fn afterwards(zk: &ZkEnsemble, phase: &Phase, store: &Store, report: &mut Report) {
    let grace = phase.ttl * 2 + Duration::from_secs(3);
    let give_up = Instant::now() + grace;
    loop {
        let entries: Vec<String> = match zk.stat(&lock_node()) {
            Some(_) => zk
                .ls(&lock_node())
                .into_iter()
                .filter(|c| c.starts_with("lock-"))
                .collect(),
            None => Vec::new(),
        };
        if entries.is_empty() {
            break;
        }
        if Instant::now() > give_up {
            report.problems.push(format!(
                "{grace:?} after the clients ended, {} entries are left under {}",
                entries.len(),
                lock_node()
            ));
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    expect_no_survivors(store, report);
}

/// The ZooKeeper phase's own checks, after the main phase's: holders cut off by a majority
/// stopped were stopped within their lease, by redlock (76).
pub fn expect(r: &mut Report, ttl: Duration) {
    super::etcd::expect_cut_off_in_time(r, ttl, Kind::ZkMajorityStop);
}
