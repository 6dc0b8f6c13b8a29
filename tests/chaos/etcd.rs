//! The etcd phase: the clients race `redlock run --wait` for one lock on a real 3-member etcd
//! cluster while its members fail, on a schedule drawn from the seed: the leader, or a random
//! member, SIGSTOPped and SIGCONTed; a random member SIGKILLed and restarted on its data; two of
//! the three SIGSTOPped past the lease; every lease revoked at once.
//!
//! The checks are the main phase's, on the same fenced store: no two workers at once outside
//! fault windows, the robbed holders' stale writes refused and no other write, no token handed
//! out twice, and tokens (the entries' create revisions) in the order of acquisitions. A window
//! here follows a revoke: every lease revoked by hand, or an old leader's revokes as it wakes
//! (etcd before 3.4.31 and 3.5.13 does that: etcd-io/etcd#15247). And checks of its own: with
//! no majority, a holder's command ran no longer than its lease and redlock said so (76);
//! afterwards no entry and no lease is left.
//!
//! The phase found two bugs of redlock's own on etcd, since fixed; [`lapsed_takes`] checks
//! every run for them.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::check::{Report, Run};
use super::faults::{self, Fault, Kind};
use super::store::{State, Store, Worker};
use crate::common::{EtcdCluster, TempDir, etcd_binary};
use crate::{KEY, Phase, Rng, expect_no_survivors, mono_ns};

/// The faults of the etcd phase: every one once a round.
pub const FAULTS: &[Kind] = &[
    Kind::EtcdLeaderStop,
    Kind::EtcdMemberStop,
    Kind::EtcdMemberKill,
    Kind::EtcdMajorityStop,
    Kind::EtcdLeasesRevoked,
];

/// The cluster, the store, the clients and the faults; then the checker's report.
pub fn run(phase: &Phase, rng: &mut Rng) -> Report {
    let dir = TempDir::new();
    let mut etcd = EtcdCluster::start();
    let store = Store::start(&dir.join("store.sock"));
    let started = Instant::now();
    // Each client names the members in an order of its own. redlock asks the first one first,
    // so a fault on any member meets a third of the clients there.
    let members = etcd.endpoints();
    let clients = phase.start_clients(&store, |client| {
        let mut order = members.clone();
        order.rotate_left(client % members.len());
        format!("etcd://{}", order.join(","))
    });
    let (version, old_leader_revokes) = old_leader_revokes();
    let mut cluster = Cluster {
        etcd: &mut etcd,
        store: &store,
        phase,
        old_leader_revokes,
    };
    let faults = phase.schedule(started, rng, |kind, rng| cluster.inject(kind, rng));
    let runs = clients.finish();
    let wall = started.elapsed();
    let lapsed = lapsed_takes(&faults, &store.snapshot(), &runs);
    let mut report = phase.report(wall, faults, &store, runs);
    let woken = if old_leader_revokes {
        "an old leader revokes leases as it wakes (etcd-io/etcd#15247)"
    } else {
        "an old leader revokes nothing"
    };
    report
        .notes
        .push(("etcd".into(), format!("{version}: {woken}")));
    report.problems.extend(lapsed);
    afterwards(&etcd, phase, &store, &mut report);
    report
}

/// What the etcd faults act on.
struct Cluster<'a> {
    etcd: &'a mut EtcdCluster,
    store: &'a Store,
    phase: &'a Phase,
    /// This etcd's old leaders revoke leases as they wake.
    old_leader_revokes: bool,
}

impl Cluster<'_> {
    /// Before a stop: if it stops the leader on an etcd whose old leaders revoke, the revision.
    /// The leases the old leader knows were granted before it, and their entries put then (a
    /// client puts its entry as soon as it has its lease): the holders its revokes can rob have
    /// this token or a lower one.
    fn revision_if_revokes(&self, stops_leader: bool) -> Option<i64> {
        (stops_leader && self.old_leader_revokes).then(|| self.etcd.revision())
    }

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
        // Every draw first, the same whatever the cluster does: the schedule is the seed's.
        let member = rng.range(0, self.etcd.size() as u64) as usize;
        let share = rng.unit();
        let ttl = self.phase.ttl;
        let ttls = |lo: f64, hi: f64| ttl.mul_f64(lo + (hi - lo) * share);
        let mut fence = None;
        // A stop of the leader wakes an old leader: the revision before it, if its revokes
        // are to be counted.
        let mut before = None;
        // For a stop, `healed` is when the SIGCONTs go out.
        let (at, healed) = match kind {
            Kind::EtcdLeaderStop => {
                self.long_holder();
                let leader = self.etcd.leader();
                before = self.revision_if_revokes(true);
                let at = mono_ns();
                self.etcd.stop(leader);
                thread::sleep(ttls(1.0, 2.0));
                let healed = mono_ns();
                self.etcd.resume(leader);
                (at, healed)
            }
            Kind::EtcdMemberStop => {
                let leader = self.etcd.leader();
                before = self.revision_if_revokes(leader == member);
                let at = mono_ns();
                self.etcd.stop(member);
                thread::sleep(ttls(0.5, 2.0));
                let healed = mono_ns();
                self.etcd.resume(member);
                (at, healed)
            }
            Kind::EtcdMemberKill => {
                let at = mono_ns();
                self.etcd.kill(member);
                thread::sleep(ttls(0.2, 1.0));
                // Returns once the member is healthy again.
                self.etcd.restart(member);
                (at, mono_ns())
            }
            Kind::EtcdMajorityStop => {
                self.long_holder();
                let leader = self.etcd.leader();
                before = self.revision_if_revokes(leader != member);
                // All but `member`.
                let stopped: Vec<usize> = (0..self.etcd.size()).filter(|&i| i != member).collect();
                for &i in &stopped {
                    self.etcd.stop(i);
                }
                // Stamped once they are stopped: no renewal sent after this can be answered, so
                // every holder's lease ends within a ttl of it.
                let at = mono_ns();
                thread::sleep(ttls(1.5, 2.5));
                let healed = mono_ns();
                for &i in &stopped {
                    self.etcd.resume(i);
                }
                (at, healed)
            }
            Kind::EtcdLeasesRevoked => {
                faults::holder(self.store, self.phase.bound(), |_| true);
                let at = mono_ns();
                self.etcd.revoke_all_leases();
                // Every entry the revoke deleted was created at this revision or before: the
                // holders it may have robbed have this token or a lower one.
                fence = Some(self.etcd.revision());
                (at, mono_ns())
            }
            _ => unreachable!("{kind:?} is not an etcd fault"),
        };
        // Its revokes go out as it wakes, and are committed once it follows the new leader:
        // done by the time every member names the same leader.
        let old_leader = before.map(|before| {
            self.etcd.leader();
            (Some(before), mono_ns())
        });
        let bound = self.phase.bound();
        let mut recorded = vec![Fault {
            kind,
            at,
            healed,
            fence,
            recovery: faults::recovery(self.store, healed, bound),
        }];
        if let Some((fence, agreed)) = old_leader {
            recorded.push(Fault {
                kind: Kind::EtcdStaleRevokes,
                at: healed,
                healed: agreed,
                fence,
                recovery: faults::recovery(self.store, agreed, bound),
            });
        }
        recorded
    }
}

/// The version of the etcd the tests run, and whether a leader that was stopped revokes leases
/// when it wakes: etcd 3.4 before 3.4.31 and 3.5 before 3.5.13 do (etcd-io/etcd#15247, fixed
/// by #16822). Its lessor still takes itself for the leader, finds the leases run out by its
/// stale clock, and its revokes are forwarded to the new leader, which commits them.
fn old_leader_revokes() -> (String, bool) {
    let out = Command::new(etcd_binary())
        .arg("--version")
        .output()
        .expect("running etcd --version");
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .unwrap_or("unknown")
        .trim()
        .to_owned();
    let n: Vec<u64> = version.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    let revokes = match n[..] {
        [3, 4, patch, ..] => patch < 31,
        [3, 5, patch, ..] => patch < 13,
        [major, minor, ..] => (major, minor) < (3, 4),
        _ => true,
    };
    (version, revokes)
}

/// Two bugs of redlock's own on etcd that this phase found (tests/integration/etcd_unanswered.rs
/// shows each alone). Both came from a take that trusted a lease nobody kept alive: while the
/// run waited on a SIGSTOPped member (its keep-alives swallowed without a word), or retried
/// after requests that got no answer (no keep-alives at all).
///
/// - The take counted a whole ttl from itself, but etcd ends the lease a ttl after it was last
///   kept alive: as the lock is taken, or soon after. The next waiter then came in while the
///   command ran, until the first renewal found the entry gone (76). It shows as a holder that
///   redlock stopped for a lost entry (76, "nobody holds it now", or gone at the release) where no
///   revoke robbed it.
/// - When the lease had ended and the run's entry was never seen, the take put the entry with
///   that lease: "requested lease not found", and a `--wait` run exited 69 instead of taking a
///   new lease and a place at the back.
fn lapsed_takes(faults: &[Fault], state: &State, runs: &[Run]) -> Vec<String> {
    // A revoke robs a holder until its redlock has released: one that lands after the command
    // ended, while the release waits out a stopped leader, is found at the release.
    let revoked = |w: &Worker, run: &Run| {
        faults.iter().any(|f| {
            matches!(f.kind, Kind::EtcdLeasesRevoked | Kind::EtcdStaleRevokes)
                && run.reaped >= f.at
                && f.fence.is_some_and(|top| w.fence <= top)
        })
    };
    let t0 = state.workers.first().map_or(0, |w| w.start);
    let mut lines: Vec<String> = state
        .workers
        .iter()
        .filter_map(|w| {
            let run = runs.iter().find(|run| {
                run.pid == w.redlock
                    && run.client == w.client
                    && run.spawned <= w.start
                    && w.start <= run.reaped
            })?;
            // A holder cut off (no renewal answered) is stopped before its lease could end,
            // and may find the entry gone at the release: that is the lease doing its job.
            let cut_off = run.stderr.contains("could not renew");
            let lost = run.code == 76
                && !cut_off
                && (run.stderr.contains("nobody holds it now")
                    || run.stderr.contains("it was gone at release"));
            (lost && !revoked(w, run)).then_some((w, run))
        })
        .map(|(w, run)| {
            let at = |ns: u64| ns.saturating_sub(t0) as f64 / 1e6;
            let near: Vec<String> = faults
                .iter()
                .filter(|f| f.at <= run.reaped && f.healed + 3_000_000_000 >= w.start)
                .map(|f| format!("{} {:.0}-{:.0} ms", f.kind.name(), at(f.at), at(f.healed)))
                .collect();
            format!(
                "client {} took the lock (token {}) at {:.0} ms on a lease etcd ended before \
                 redlock's deadline: its command ran {:.0} ms, and redlock found the entry gone \
                 (76) though no revoke robbed it; faults near: {near:?}; redlock said: {}",
                w.client,
                w.fence,
                at(w.start),
                (w.last - w.start) as f64 / 1e6,
                run.stderr.trim().replace('\n', " | ")
            )
        })
        .collect();
    let gave_up = runs
        .iter()
        .filter(|run| run.code == 69 && run.stderr.contains("requested lease not found"))
        .count();
    if gave_up > 0 {
        lines.push(format!(
            "{gave_up} `--wait` runs exited 69, \"requested lease not found\": a lease that ran \
             out was not replaced by a new one"
        ));
    }
    lines
}

/// Afterwards the lock's queue is empty and every lease gone within a few ttls (a holder that
/// could not release leaves its lease to run out), and no worker process survives.
fn afterwards(etcd: &EtcdCluster, phase: &Phase, store: &Store, report: &mut Report) {
    let queue = format!("redlock:{{{KEY}}}/q/");
    // A lease runs out a ttl (rounded up to seconds) after its last renewal; a new leader adds
    // its election timeout (0.5 s here) to every lease.
    let grace = phase.ttl * 2 + Duration::from_secs(3);
    let give_up = Instant::now() + grace;
    loop {
        let (entries, leases) = (etcd.get_prefix(&queue), etcd.run_leases());
        if entries.is_empty() && leases.is_empty() {
            break;
        }
        if Instant::now() > give_up {
            report.problems.push(format!(
                "{grace:?} after the clients ended, {} entries are left in {queue} and {} \
                 leases in etcd",
                entries.len(),
                leases.len()
            ));
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    expect_no_survivors(store, report);
}

/// The etcd phase's own checks, after the main phase's.
pub fn expect(r: &mut Report, ttl: Duration) {
    expect_cut_off_in_time(r, ttl, Kind::EtcdMajorityStop);
}

/// Holders cut off by `cut` (a majority stopped, a server frozen): each ran its command no
/// longer than its lease, which was last renewed before the stop, so its last action came less
/// than a ttl after the stop. A worker that did not end on its own was stopped by redlock, for a
/// lost lease: its redlock exited 76. And such a stop did cut a holder off, or the phase showed
/// nothing.
pub fn expect_cut_off_in_time(r: &mut Report, ttl: Duration, cut: Kind) {
    let ttl_ns = ttl.as_nanos() as u64;
    let t0 = r.state.workers.first().map_or(0, |w| w.start);
    let ms = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
    let mut problems = Vec::new();
    let mut cut_off = 0;
    for f in r.faults.iter().filter(|f| f.kind == cut) {
        // Started before the SIGCONTs: it took the lock before the stop.
        let held = r.state.workers.iter().filter(|w| w.start < f.healed);
        for w in held.filter(|w| w.last >= f.at) {
            if w.last >= f.at + ttl_ns {
                problems.push(format!(
                    "client {} token {} ran to {:.0} ms, past its lease: {} at {:.0} ms \
                     (resumed at {:.0} ms), the ttl is {} ms",
                    w.client,
                    w.fence,
                    ms(w.last),
                    cut.name(),
                    ms(f.at),
                    ms(f.healed),
                    ttl.as_millis()
                ));
            }
            cut_off += usize::from(!w.ended);
        }
    }
    let mut stopped = 0;
    for w in r.state.workers.iter().filter(|w| !w.ended) {
        stopped += 1;
        let code = r.run_of(w).map(|run| run.code);
        if code != Some(76) {
            problems.push(format!(
                "client {} token {}: its worker was stopped at {:.0} ms, and its redlock exited \
                 {code:?}, not 76",
                w.client,
                w.fence,
                ms(w.last)
            ));
        }
    }
    let stops = r.faults.iter().filter(|f| f.kind == cut).count();
    if stops > 0 && cut_off == 0 {
        problems.push(format!(
            "{stops} faults of '{}' cut no holder off: the phase showed nothing",
            cut.name()
        ));
    }
    // Holders an old leader's revokes robbed: their redlock found the entry gone (76).
    let revoked = r
        .state
        .workers
        .iter()
        .filter(|w| {
            r.run_of(w).is_some_and(|run| {
                run.code == 76
                    && r.faults.iter().any(|f| {
                        f.kind == Kind::EtcdStaleRevokes
                            && run.reaped >= f.at
                            && f.fence.is_some_and(|top| w.fence <= top)
                    })
            })
        })
        .count();
    r.notes.push((
        format!("holders cut off by '{}'", cut.name()),
        cut_off.to_string(),
    ));
    if cut == Kind::EtcdMajorityStop {
        r.notes.push((
            "holders an old leader's revokes robbed (76)".into(),
            revoked.to_string(),
        ));
    }
    r.notes.push((
        "workers stopped by redlock (lease lost)".into(),
        stopped.to_string(),
    ));
    r.problems.extend(problems);
}
