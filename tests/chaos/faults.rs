//! The fault injectors: each pauses, kills, cuts or tampers with something real, records when it
//! started and healed, which worker it hit, and how long the lock took to be taken again.

use std::thread;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::store::{Store, Worker};
use crate::common::{Mode, Proxy, RedisServer};
use crate::{Rng, mono_ns};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The holder's redlock SIGSTOPped past its ttl, then SIGCONTed: its watchdog, not stopped,
    /// kills the command when the lease runs out.
    StopRedlock,
    /// The holder's redlock, its watchdog and its command all SIGSTOPped past the ttl (a frozen
    /// machine, which nothing on it can guard against), until another holder has written; the
    /// command resumes first.
    StopJob,
    RedisPause,
    /// Redis SIGKILLed and restarted from its append-only file (`appendfsync always`).
    RedisRestart,
    ProxyDrop,
    ProxyHang,
    ProxyDelay,
    ProxyReset,
    ScriptFlush,
    KeyDelete,
    KeyOverwrite,
    /// Redis SIGKILLed and restarted without persistence: the lock and the counter are lost.
    RestartEmpty,
    /// The etcd leader SIGSTOPped for one to two ttls, then SIGCONTed: the others elect a new
    /// one, and the old one comes back a follower.
    EtcdLeaderStop,
    /// A random etcd member SIGSTOPped for half a ttl to two ttls: a follower, or the leader.
    EtcdMemberStop,
    /// A random etcd member SIGKILLed and restarted on its data.
    EtcdMemberKill,
    /// Two of the three etcd members SIGSTOPped past the lease: no majority, so no renewal, and
    /// a holder's command must be stopped before its lease could end.
    EtcdMajorityStop,
    /// Every etcd lease revoked at once, as an operator can: the holder hears of it at its next
    /// renewal, up to ttl/3 later (as when the lock key is deleted in Redis).
    EtcdLeasesRevoked,
    /// Not injected: what an etcd leader stopped past the lease does when it is SIGCONTed, on
    /// etcd before 3.4.31 and 3.5.13 (etcd-io/etcd#15247). It revokes the leases that ran out
    /// by its own stale clock, though the new leader kept them alive: a revoke from outside.
    EtcdStaleRevokes,
    /// The ZooKeeper leader SIGSTOPped for one to two ttls, then SIGCONTed: its followers give
    /// up on it after syncLimit and elect another; the old one comes back a follower.
    ZkLeaderStop,
    /// A random ZooKeeper member SIGSTOPped for half a ttl to two ttls.
    ZkMemberStop,
    /// A random ZooKeeper member SIGKILLed and restarted on its data.
    ZkMemberKill,
    /// Two of the three ZooKeeper members SIGSTOPped past the lease: no majority, so no
    /// renewal, and a holder's command must be stopped before its lease could end.
    ZkMajorityStop,
    /// The holder's entry deleted by hand: the holder hears of it at its next renewal.
    ZkEntryDeleted,
    /// PostgreSQL frozen (every process SIGSTOPped) for 1.5 to 2.5 ttls: no renewal, so a
    /// holder's command must be stopped before its lease could end.
    PgFreeze,
    /// PostgreSQL shut down fast and started again, within the lease.
    PgRestart,
    /// PostgreSQL SIGKILLed and restarted through crash recovery (synchronous commits on).
    PgKill,
    /// The holder's row deleted by hand: the holder hears of it at its next renewal.
    PgHolderDeleted,
    /// The link between the partition phase's two switches down for 1.5 to 2.5 ttls: each
    /// side runs on with the servers it has.
    CutLink,
    /// One host's port down for 1.5 to 2.5 ttls: a server, or clients, alone.
    CutHost,
    /// What one host sends to some others dropped for 1.5 to 2.5 ttls.
    CutOneWay,
}

/// The faults of the main run, every one at least once.
pub const MAIN: &[Kind] = &[
    Kind::StopRedlock,
    Kind::StopJob,
    Kind::RedisPause,
    Kind::RedisRestart,
    Kind::ProxyDrop,
    Kind::ProxyHang,
    Kind::ProxyDelay,
    Kind::ProxyReset,
    Kind::ScriptFlush,
    Kind::KeyDelete,
    Kind::KeyOverwrite,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::StopRedlock => "SIGSTOP redlock > ttl",
            Kind::StopJob => "SIGSTOP redlock+command > ttl",
            Kind::RedisPause => "Redis paused",
            Kind::RedisRestart => "Redis killed, restarted (AOF)",
            Kind::ProxyDrop => "network: drop",
            Kind::ProxyHang => "network: hang",
            Kind::ProxyDelay => "network: delay",
            Kind::ProxyReset => "network: reset",
            Kind::ScriptFlush => "SCRIPT FLUSH",
            Kind::KeyDelete => "lock key deleted",
            Kind::KeyOverwrite => "lock key overwritten",
            Kind::RestartEmpty => "Redis restarted empty",
            Kind::EtcdLeaderStop => "etcd leader SIGSTOPped",
            Kind::EtcdMemberStop => "etcd member SIGSTOPped",
            Kind::EtcdMemberKill => "etcd member killed, restarted",
            Kind::EtcdMajorityStop => "etcd majority SIGSTOPped > ttl",
            Kind::EtcdLeasesRevoked => "etcd leases all revoked",
            Kind::EtcdStaleRevokes => "etcd old leader's revokes (#15247)",
            Kind::ZkLeaderStop => "ZooKeeper leader SIGSTOPped",
            Kind::ZkMemberStop => "ZooKeeper member SIGSTOPped",
            Kind::ZkMemberKill => "ZooKeeper member killed, restarted",
            Kind::ZkMajorityStop => "ZooKeeper majority SIGSTOPped > ttl",
            Kind::ZkEntryDeleted => "ZooKeeper holder's entry deleted",
            Kind::PgFreeze => "PostgreSQL frozen > ttl",
            Kind::PgRestart => "PostgreSQL restarted",
            Kind::PgKill => "PostgreSQL killed, restarted",
            Kind::PgHolderDeleted => "PostgreSQL holder's row deleted",
            Kind::CutLink => "partition: the two sides",
            Kind::CutHost => "partition: one host alone",
            Kind::CutOneWay => "partition: one way",
        }
    }

    /// Faults that take the lock away from a running holder without it knowing in time, so two
    /// workers may overlap until the holder notices: the paused ones and the lost keys (or
    /// leases).
    pub fn excuses_overlap(self) -> bool {
        matches!(
            self,
            Kind::StopRedlock
                | Kind::StopJob
                | Kind::KeyDelete
                | Kind::RestartEmpty
                | Kind::EtcdLeasesRevoked
                | Kind::EtcdStaleRevokes
                | Kind::ZkEntryDeleted
                | Kind::PgHolderDeleted
        )
    }
}

/// One injected fault.
#[derive(Debug, Clone)]
pub struct Fault {
    pub kind: Kind,
    pub at: u64,
    pub healed: u64,
    /// For faults that rob a holder: the highest fencing token it may have robbed (workers with
    /// this token or lower, still running after the fault, are its victims).
    pub fence: Option<i64>,
    /// From healing to the next worker start; None if it did not come within the bound.
    pub recovery: Option<u64>,
}

/// What the injectors act on.
pub struct World<'a> {
    pub redis: &'a mut RedisServer,
    pub proxy: &'a Proxy,
    pub store: &'a Store,
    pub ttl: Duration,
    pub lock_key: String,
    /// How long the lock may take to be taken again after a fault heals.
    pub bound: Duration,
}

/// The children of `parent` other than `except`, from /proc (redlock's watchdog, beside its
/// command).
fn other_children(parent: i32, except: i32) -> Vec<Pid> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{parent}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .filter(|&p| p != except)
                .map(Pid::from_raw),
        );
    }
    found
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Wait (up to `bound`) for a running worker that `fits`; the one with the highest token.
pub fn holder(store: &Store, bound: Duration, fits: impl Fn(&Worker) -> bool) -> Option<usize> {
    let give_up = mono_ns() + ms(bound) * 1_000_000;
    while mono_ns() < give_up {
        let st = store.snapshot();
        if let Some(w) = (0..st.workers.len())
            .filter(|&w| st.workers[w].active() && fits(&st.workers[w]))
            .max_by_key(|&w| st.workers[w].fence)
        {
            return Some(w);
        }
        thread::sleep(Duration::from_millis(1));
    }
    None
}

/// How long after `healed` the lock was taken again: the next worker's start as the store saw
/// it. None if none came within `bound`.
pub fn recovery(store: &Store, healed: u64, bound: Duration) -> Option<u64> {
    let give_up = healed + ms(bound) * 1_000_000;
    while mono_ns() < give_up {
        let st = store.snapshot();
        if let Some(first) = st
            .workers
            .iter()
            .filter(|w| w.seen > healed)
            .map(|w| w.seen)
            .min()
        {
            return Some(first - healed);
        }
        thread::sleep(Duration::from_millis(2));
    }
    None
}

impl World<'_> {
    /// A random duration between `lo` and `hi` ttls.
    fn ttls(&self, rng: &mut Rng, lo: f64, hi: f64) -> Duration {
        self.ttl.mul_f64(lo + (hi - lo) * rng.unit())
    }

    /// Wait (up to the bound) for a holder that has just started: `max_writes` or fewer writes.
    fn fresh_holder(&self, max_writes: u32) -> Option<usize> {
        holder(self.store, self.bound, |w| w.writes <= max_writes)
    }

    fn redis(&self, args: &[&str]) {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.exec(&mut self.redis.conn())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }

    /// Inject one fault of `kind`, heal it, and wait for the lock to be taken again.
    pub fn inject(&mut self, kind: Kind, rng: &mut Rng) -> Fault {
        let mut fence = None;
        let at = mono_ns();
        match kind {
            Kind::StopRedlock => {
                if let Some(w) = self.fresh_holder(u32::MAX) {
                    let me = self.store.snapshot().workers[w].clone();
                    fence = Some(me.fence);
                    let redlock = Pid::from_raw(me.redlock);
                    let _ = kill(redlock, Signal::SIGSTOP);
                    thread::sleep(self.ttls(rng, 1.5, 2.5));
                    let _ = kill(redlock, Signal::SIGCONT);
                }
            }
            Kind::StopJob => {
                if let Some(w) = self.fresh_holder(1) {
                    let me = self.store.snapshot().workers[w].clone();
                    fence = Some(me.fence);
                    let redlock = Pid::from_raw(me.redlock);
                    let job = Pid::from_raw(me.pid);
                    // The whole machine freezes: redlock's watchdog (its other child) too.
                    let watchdogs = other_children(me.redlock, me.pid);
                    let _ = kill(redlock, Signal::SIGSTOP);
                    for &watchdog in &watchdogs {
                        let _ = kill(watchdog, Signal::SIGSTOP);
                    }
                    let _ = killpg(job, Signal::SIGSTOP);
                    // Frozen until its lease has ended (a ttl at most after its last renewal,
                    // before the freeze) and a holder that came in later has written. With one
                    // holder the second implies the first; beside a semaphore's other slots or
                    // shared holders, a later holder may have come in at once.
                    let frozen = mono_ns();
                    let later = self.store.snapshot().workers.iter().map(|w| w.fence).max();
                    let later = later.unwrap_or(me.fence).max(me.fence);
                    let lease_over = frozen + ms(self.ttl.mul_f64(1.1)) * 1_000_000;
                    let give_up = frozen + ms(self.bound) * 1_000_000;
                    while (self.store.highest() <= later || mono_ns() < lease_over)
                        && mono_ns() < give_up
                    {
                        thread::sleep(Duration::from_millis(2));
                    }
                    // The command wakes first and writes with its stale token; then redlock,
                    // half the time only after the command has finished.
                    let _ = killpg(job, Signal::SIGCONT);
                    let finish = rng.unit() < 0.5;
                    let until = mono_ns() + 2_000_000_000;
                    while mono_ns() < until {
                        let w = &self.store.snapshot().workers[w];
                        if (w.writes > me.writes && !finish) || !w.active() {
                            break;
                        }
                        thread::sleep(Duration::from_millis(1));
                    }
                    for &watchdog in &watchdogs {
                        let _ = kill(watchdog, Signal::SIGCONT);
                    }
                    let _ = kill(redlock, Signal::SIGCONT);
                }
            }
            Kind::RedisPause => {
                self.redis.pause();
                thread::sleep(self.ttls(rng, 0.5, 2.0));
                self.redis.resume();
            }
            Kind::RedisRestart => {
                self.redis.kill();
                thread::sleep(self.ttls(rng, 0.2, 1.0));
                self.redis.restart();
            }
            Kind::RestartEmpty => {
                // Hit a holder early in its run, so it is still running when Redis is back.
                self.fresh_holder(1);
                self.redis.kill();
                thread::sleep(self.ttls(rng, 0.05, 0.2));
                self.redis.restart();
            }
            Kind::ProxyDrop | Kind::ProxyHang | Kind::ProxyDelay | Kind::ProxyReset => {
                let mode = match kind {
                    Kind::ProxyDrop => Mode::Drop,
                    Kind::ProxyHang => Mode::Hang,
                    Kind::ProxyDelay => Mode::Delay,
                    _ => Mode::Reset,
                };
                self.proxy.set(mode, self.ttls(rng, 0.1, 0.4));
                thread::sleep(self.ttls(rng, 0.5, 2.0));
                self.proxy.set(Mode::Pass, Duration::ZERO);
            }
            Kind::ScriptFlush => {
                self.redis(&["SCRIPT", "FLUSH"]);
            }
            Kind::KeyDelete => {
                self.fresh_holder(u32::MAX);
                // Read the counter in the same step: every holder up to it is robbed.
                let robbed: Option<i64> = redis::cmd("EVAL")
                    .arg("local f = redis.call('GET', KEYS[2]); redis.call('DEL', KEYS[1]); return f")
                    .arg(2)
                    .arg(&self.lock_key)
                    .arg(format!("{}:fence", self.lock_key))
                    .query(&mut self.redis.conn())
                    .expect("deleting the lock key");
                fence = Some(robbed.unwrap_or(0));
            }
            Kind::KeyOverwrite => {
                self.fresh_holder(u32::MAX);
                let ttl = ms(self.ttl).to_string();
                self.redis(&["SET", &self.lock_key.clone(), "intruder", "PX", &ttl]);
            }
            Kind::EtcdLeaderStop
            | Kind::EtcdMemberStop
            | Kind::EtcdMemberKill
            | Kind::EtcdMajorityStop
            | Kind::EtcdLeasesRevoked
            | Kind::EtcdStaleRevokes => {
                unreachable!("{kind:?} is an etcd fault (tests/chaos/etcd.rs)")
            }
            Kind::ZkLeaderStop
            | Kind::ZkMemberStop
            | Kind::ZkMemberKill
            | Kind::ZkMajorityStop
            | Kind::ZkEntryDeleted => {
                unreachable!("{kind:?} is a ZooKeeper fault (tests/chaos/zookeeper.rs)")
            }
            Kind::PgFreeze | Kind::PgRestart | Kind::PgKill | Kind::PgHolderDeleted => {
                unreachable!("{kind:?} is a PostgreSQL fault (tests/chaos/pg.rs)")
            }
            Kind::CutLink | Kind::CutHost | Kind::CutOneWay => {
                unreachable!("{kind:?} is a partition (tests/chaos/partition.rs)")
            }
        }
        let healed = mono_ns();
        Fault {
            kind,
            at,
            healed,
            fence,
            recovery: recovery(self.store, healed, self.bound),
        }
    }
}
