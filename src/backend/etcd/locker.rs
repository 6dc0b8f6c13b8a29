//! The lock protocol on etcd, as a run's lease drives it ([`Locker`]):
//!
//! - **take**: a lease of the ttl (whole seconds, rounded up), then the client's entry
//!   `BASE/q/LEASE` put with it in a transaction only if absent. Without `--min-interval` and with
//!   nobody else queued, the same transaction records the run: one request takes the lock. The
//!   queue decides who holds it (`queue`); the fencing token is the entry's create revision.
//! - **wait**: a watch on the entry just ahead (the whole queue for a semaphore) from the
//!   revision the queue was read at, so that no release in between is missed; a watch that
//!   compaction cancelled, or a stream that failed, ends the wait and the queue is read again. The
//!   waiter's lease is kept alive meanwhile.
//! - **renew**: a keep-alive of the lease, then a read of the entry: a lease that is being revoked
//!   can still be renewed on etcd 3.4, and an entry an operator deleted is a lock lost.
//! - **release**: the entry deleted in a transaction guarded by its create revision (never a bare
//!   delete: a late retry must not remove a newer holder's), with the run's end recorded in the
//!   same transaction; then the lease revoked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, Error, EventType, Txn, TxnOp, TxnOpResponse, WatchFilterType, WatchOptions,
};
use tokio::sync::Notify;

use super::client::Conn;
use super::keys::Keys;
use super::queue::{self, Place, Watch};
use super::record;
use super::steps::{Seen, now_ms, success_ago};
use crate::backend::block::{Allowances, Block};
use crate::lock::record::{RunEnding, Tenure};
use crate::lock::{
    Acquire, Failure, Held, Holder, Interrupt, Kind, Locker, Renewal, RunSpec, Until,
};

/// How long a release waits at most for its lease's revoke to be answered: one round trip and
/// one write on a cluster that is well. The answer itself changes nothing (the lease ends by
/// itself within the ttl), but etcd drops a request whose connection closes before the request
/// is carried out, as it does when the run exits.
const REVOKE_WAIT: Duration = Duration::from_millis(100);

/// How late a waiter's watch may end: it ends by the client's own timer at its hold, so these
/// only bound how long a member that froze meanwhile is waited for. They are Redis's figures
/// for its BLPOP, so that a wait ends at the same moments on every backend.
const WATCH: Allowances = Allowances {
    slack: Duration::from_secs(1),
    late: Duration::from_millis(150),
    min_hold: Duration::from_millis(1),
};

/// A run's lock on etcd.
pub(crate) struct EtcdLocker {
    pub(super) conn: Conn,
    pub(super) keys: Keys,
    /// The run's owner token, recorded in its entry and its record of runs.
    pub(super) token: String,
    pub(super) kind: Kind,
    pub(super) min_interval: Option<Duration>,
    pub(super) holder: Holder,
    /// The run's lease, once granted.
    pub(super) lease: Option<i64>,
    /// Its entry's create revision, once put.
    pub(super) entry: Option<i64>,
    /// After an attempt that waits: what to watch, from the revision the queue was read at.
    pub(super) watch: Option<(Watch, i64)>,
    /// The lock, once taken, and how long the lease is certainly ours.
    pub(super) taken: Option<Taken>,
    /// The counters as the last read found them: label, value, mod revision.
    pub(super) counts: Vec<(String, i64, i64)>,
    /// An attempt failed after its lease was granted: its entry may be there.
    pub(super) unanswered: bool,
    /// How often a waiter keeps its lease alive while it watches: a third of the ttl.
    pub(super) beat: Duration,
    /// The look at the queue that let the run in, for what [`Locker::settle`] writes.
    pub(super) settling: Option<Seen>,
    pub(super) interrupt: Arc<Notify>,
}

/// A run that took the lock: when (this host's clock, unix ms), its fencing token, and how
/// long it has held the lock.
#[derive(Debug)]
pub(super) struct Taken {
    pub at_ms: u64,
    pub fence: i64,
    pub tenure: Tenure,
}

impl EtcdLocker {
    pub(crate) fn new(conn: Conn, keys: Keys, run: &RunSpec) -> Self {
        Self {
            conn,
            keys,
            token: run.token.clone(),
            kind: run.kind,
            min_interval: run.min_interval,
            holder: run.holder.clone(),
            lease: None,
            entry: None,
            watch: None,
            taken: None,
            counts: Vec::new(),
            unanswered: false,
            beat: (run.ttl / 3).max(Duration::from_millis(200)),
            settling: None,
            interrupt: Arc::new(Notify::new()),
        }
    }

    /// The entry's value: the holder's details and how it holds the lock.
    pub(super) fn entry_value(&self, token: &str) -> String {
        serde_json::json!({
            "token": token,
            "host": self.holder.host,
            "pid": self.holder.pid,
            "command": self.holder.command,
            "started": self.holder.started,
            "kind": self.kind.stored(),
        })
        .to_string()
    }
}

impl Locker for EtcdLocker {
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        let token: &str = &self.token.clone();
        let deadline = Instant::now() + timeout;
        // When the run took the lock, if this attempt takes it: the record's start.
        let at_ms = now_ms();
        // A waiting place whose lease ran out (a frozen waiter, a member that took its
        // keep-alives and froze) is taken anew, at the back.
        let (seen, ours) = loop {
            let lease = match self.lease {
                Some(lease) => (lease, false),
                None => (self.grant(ttl, deadline)?, true),
            };
            self.unanswered = true;
            let seen = self.enqueue(token, lease, at_ms, deadline)?;
            match seen.and_then(|seen| Some((seen.ours?, seen))) {
                Some((ours, seen)) => break (seen, ours),
                None if Instant::now() < deadline => {
                    self.lease = None;
                    self.entry = None;
                }
                None => {
                    return Err(Failure::Unreachable(
                        "no answer from etcd in time (a lease ran out as it was given)".into(),
                    ));
                }
            }
        };
        self.counts = seen.counts.clone();
        self.entry = Some(ours);
        if let Some(interval) = self.min_interval
            && let Some(ago) = success_ago(&seen.last_success).filter(|ago| *ago < interval)
        {
            // Counted even when giving the place up had no answer in time, as in `leave`.
            let left = self.give_up_place(deadline);
            self.count("skipped", 1, deadline);
            left?;
            return Ok(Acquire::Skipped { ago });
        }
        match queue::place(&seen.queue, ours, self.kind) {
            Place::Holds => {
                self.unanswered = false;
                self.taken = Some(Taken {
                    at_ms,
                    fence: ours,
                    tenure: Tenure::new(ttl),
                });
                // The run's record, the run before it and the prune wait for `settle`, beside
                // the command's start.
                self.settling = Some(seen);
                Ok(Acquire::Acquired { fence: ours })
            }
            Place::Behind(watch) => {
                self.watch = Some((watch, seen.revision));
                // A shared waiter behind an exclusive one that waits itself: the lock is held
                // shared, and promised to the exclusive waiter ahead.
                let queued = self.kind == Kind::Shared
                    && queue::holders(&seen.queue)
                        .iter()
                        .all(|e| e.kind == Kind::Shared.stored());
                Ok(Acquire::Busy {
                    remaining: None,
                    queued,
                })
            }
            Place::Mismatch(found) => {
                self.give_up_place(deadline)?;
                Ok(Acquire::Mismatch { found })
            }
        }
    }

    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        let block = Block::until(until, WATCH);
        let Some((watch, revision)) = self.watch.clone() else {
            return Ok(true);
        };
        let Some(lease) = self.lease else {
            return Ok(true);
        };
        let limit = Instant::now() + block.limit;
        let hold = block.hold;
        let client = self.conn.client(limit)?;
        let at = self.conn.member().to_owned();
        let (key, options) = match &watch {
            Watch::Key(key) => (key.clone(), WatchOptions::new()),
            Watch::Queue => (self.keys.queue(), WatchOptions::new().with_prefix()),
        };
        let options = options
            .with_start_revision(revision + 1)
            .with_filters([WatchFilterType::NoPut]);
        let interrupt = Arc::clone(&self.interrupt);
        let beat = self.beat;
        // Debug builds only, for a test: a pause between the read of the queue and the watch,
        // in which the test compacts the history the watch is to start from.
        #[cfg(debug_assertions)]
        if let Some(ms) = std::env::var("REDLOCK_TEST_WATCH_DELAY_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
        {
            std::thread::sleep(Duration::from_millis(ms));
        }
        // Keep-alives that go unanswered for two beats (a member frozen, or cut off from its
        // leader's time): the wait ends, and the next attempt asks another member, keeping
        // the place alive from there (or, too late, taking a new one).
        let mut unheard = false;
        let unheard_flag = &mut unheard;
        let waited = self.conn.block_on(limit, async move {
            let mut client = client;
            let mut stream = client.watch(key, Some(options)).await?;
            let mut lease_client = client.lease_client();
            let (mut keeper, mut alive) = match lease_client.keep_alive(lease).await {
                Ok(kept) => kept,
                // The only error of this kind a first keep-alive gives: the waiting place's
                // lease ran out; the next attempt takes a new one.
                Err(Error::LeaseKeepAliveError(_)) => return Ok(true),
                Err(err) => return Err(err),
            };
            let mut heard = tokio::time::Instant::now();
            let mut beat = tokio::time::interval(beat);
            let end = tokio::time::sleep(hold);
            tokio::pin!(end);
            loop {
                tokio::select! {
                    message = stream.message() => match message? {
                        // Cancelled (its start was compacted away): read the queue again.
                        Some(r) if r.canceled() => {
                            crate::report!(
                                2,
                                WatchCancelled { "compact_revision" => r.compact_revision() },
                                "the watch on the lock's queue was cancelled (history \
                                 compacted to revision {}); reading the queue again",
                                r.compact_revision()
                            );
                            return Ok(true);
                        }
                        Some(r) if r.events().iter().any(|e| e.event_type() == EventType::Delete) => {
                            return Ok(true);
                        }
                        Some(_) => {}
                        None => return Ok(true),
                    },
                    answer = alive.message() => match answer? {
                        // The waiting place's lease ran out: the next attempt takes a new one.
                        Some(r) if r.ttl() <= 0 => return Ok(true),
                        Some(_) => heard = tokio::time::Instant::now(),
                        None => return Ok(true),
                    },
                    _ = beat.tick() => {
                        if heard.elapsed() > beat.period() * 2 {
                            *unheard_flag = true;
                            return Ok(true);
                        }
                        keeper.keep_alive().await?
                    }
                    _ = interrupt.notified() => return Ok(true),
                    _ = &mut end => return Ok(false),
                }
            }
        });
        if unheard {
            crate::report!(
                2,
                KeepAliveUnanswered { "member" => at.as_str() },
                "etcd at {at} has not answered the waiting place's keep-alives for two beats; \
                 asking another member"
            );
            self.conn.forget_member();
        }
        match waited {
            None => Err(Failure::Unreachable(
                format!("no answer from etcd at {at} in time").into(),
            )),
            Some(Ok(woken)) => Ok(woken),
            Some(Err(err)) => {
                let failure = self.conn.stream_failure(err);
                self.conn.forget_member();
                Err(failure)
            }
        }
    }

    fn settle(&mut self, timeout: Duration) {
        let token: &str = &self.token.clone();
        let Some(seen) = self.settling.take() else {
            return;
        };
        let deadline = Instant::now() + timeout;
        if !seen.recorded
            && let (Some(lease), Some(taken)) = (self.lease, &self.taken)
        {
            // Only while our entry holds our revision: a lock lost meanwhile is the next
            // renewal's to find.
            let run = TxnOp::put(
                self.keys.run(lease),
                record::started(token, &self.holder, taken.at_ms, Some(taken.fence)),
                None,
            );
            let record = Txn::new()
                .when([Compare::create_revision(
                    self.keys.entry(lease),
                    CompareOp::Equal,
                    taken.fence,
                )])
                .and_then([run]);
            let _ = self.txn(record, deadline);
        }
        self.mark_vanished(seen.runs.first(), &seen.queue, deadline);
        self.prune(seen.runs_total, deadline);
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        Box::new(EtcdInterrupt(Arc::clone(&self.interrupt)))
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let deadline = Instant::now() + timeout;
        // Counted even when giving the place up had no answer in time (the lease ends it then).
        let left = self.give_up_place(deadline);
        if busy {
            self.count("busy", 1, deadline);
        }
        left
    }

    fn unanswered(&self) -> bool {
        self.unanswered
    }

    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let token: &str = &self.token.clone();
        let (Some(lease), Some(rev)) = (self.lease, self.entry) else {
            return Ok(Renewal::Lost(Held::Gone));
        };
        let sent = Instant::now();
        let deadline = sent + timeout;
        let alive = self.conn.run(deadline, move |mut client| async move {
            match client.lease_keep_alive(lease).await {
                Ok(_) => Ok(true),
                // The only error of this kind a first keep-alive gives: the lease is gone.
                Err(Error::LeaseKeepAliveError(_)) => Ok(false),
                Err(err) => Err(err),
            }
        })?;
        let entry = self.keys.entry(lease);
        let found = self.conn.run(deadline, move |mut client| {
            let entry = entry.clone();
            async move { client.get(entry, None).await }
        })?;
        let ours = found
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == rev);
        if !alive || !ours {
            // No release follows a lock found lost: its record says so now.
            let lost = RunEnding::of(crate::exit::Outcome::LockLost, 0);
            let _ = self.record_lost(token, lost, deadline.max(Instant::now() + timeout));
            return Ok(Renewal::Lost(Held::Gone));
        }
        if let Some(taken) = &mut self.taken {
            taken.tenure.renewed(sent, ttl);
        }
        Ok(Renewal::Extended)
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        let token: &str = &self.token.clone();
        let deadline = Instant::now() + timeout;
        let Some(lease) = self.lease else {
            return Ok(Held::Gone);
        };
        let entry = self.keys.entry(lease);
        let Some(taken) = &self.taken else {
            // An attempt's answer was lost: whatever it put goes with the lease.
            let had = self
                .conn
                .run(deadline, {
                    let entry = entry.clone();
                    move |mut client| {
                        let entry = entry.clone();
                        async move { client.get(entry, None).await }
                    }
                })
                .map(|r| !r.kvs().is_empty())
                .unwrap_or(false);
            self.revoke(lease, deadline)?;
            self.lease = None;
            return Ok(if had { Held::Ours } else { Held::Gone });
        };
        let rev = taken.fence;
        let value = record::ended(
            token,
            &self.holder,
            (taken.at_ms, taken.fence, self.min_interval),
            taken.tenure.held(),
            &ended,
        );
        let mut ops = vec![
            TxnOp::delete(entry.clone(), None),
            TxnOp::put(self.keys.run(lease), value.clone(), None),
            TxnOp::put(self.keys.last_ended(), value.clone(), None),
        ];
        if ended.succeeded() {
            ops.push(TxnOp::put(self.keys.last_success(), value, None));
        }
        let counted = self
            .counts
            .iter()
            .find(|(label, _, _)| label == ended.outcome)
            .map_or((0, 0), |(_, v, r)| (*v, *r));
        let count = self.keys.count(ended.outcome);
        ops.push(TxnOp::txn(
            Txn::new()
                .when([Compare::mod_revision(
                    count.clone(),
                    CompareOp::Equal,
                    counted.1,
                )])
                .and_then([TxnOp::put(count, (counted.0 + 1).to_string(), None)]),
        ));
        let release = Txn::new()
            .when([Compare::create_revision(entry, CompareOp::Equal, rev)])
            .and_then(ops);
        let response = self.txn(release, deadline)?;
        let counted_there = response
            .op_responses()
            .into_iter()
            .any(|op| matches!(op, TxnOpResponse::Txn(t) if t.succeeded()));
        let held = if response.succeeded() {
            if !counted_there {
                self.count(ended.outcome, 1, deadline);
            }
            Held::Ours
        } else if self.record_lost(token, ended, deadline) {
            // An earlier attempt of this release went through; its answer was lost.
            Held::Ours
        } else {
            Held::Gone
        };
        // On the member that answered the release, and not made again: the entry is gone, and
        // the lease ends by itself within the ttl should the revoke be lost.
        self.conn
            .ask_once(Instant::now() + REVOKE_WAIT, move |mut client| async move {
                client.lease_revoke(lease).await.map(drop)
            });
        self.lease = None;
        self.entry = None;
        Ok(held)
    }
}

/// Ends an etcd waiter's wait from another thread: its watch loop hears the notification (kept
/// for the next wait if none is under way).
struct EtcdInterrupt(Arc<Notify>);

impl Interrupt for EtcdInterrupt {
    fn interrupt(&self, _timeout: Duration) -> Result<(), Failure> {
        self.0.notify_one();
        Ok(())
    }
}
