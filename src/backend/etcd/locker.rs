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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{
    Compare, CompareOp, Error, EventType, GetOptions, KeyValue, LeaseGrantOptions, PutOptions,
    SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchFilterType, WatchOptions,
};
use tokio::sync::Notify;

use super::client::{Conn, stream_failure};
use super::keys::Keys;
use super::queue::{self, Entry, Place, Watch};
use super::record;
use crate::lock::record::RunEnding;
use crate::lock::{
    Acquire, Block, Failure, Held, Holder, Interrupt, Kind, Locker, Renewal, RunSpec,
};

/// A run's lock on etcd.
pub(crate) struct EtcdLocker {
    conn: Conn,
    keys: Keys,
    kind: Kind,
    min_interval: Option<Duration>,
    holder: Holder,
    /// The run's lease, once granted.
    lease: Option<i64>,
    /// Its entry's create revision, once put.
    entry: Option<i64>,
    /// After an attempt that waits: what to watch, from the revision the queue was read at.
    watch: Option<(Watch, i64)>,
    /// The lock, once taken, and how long the lease is certainly ours.
    taken: Option<Taken>,
    /// The counters as the last read found them: label, value, mod revision.
    counts: Vec<(String, i64, i64)>,
    /// An attempt failed after its lease was granted: its entry may be there.
    unanswered: bool,
    interrupt: Arc<Notify>,
}

/// A run that took the lock: when (this host's clock, unix ms), its fencing token, when the
/// take's answer came, and its lease as far as this client knows it (`ttl` from `lease_from`
/// after `at`).
#[derive(Debug)]
struct Taken {
    at_ms: u64,
    fence: i64,
    at: Instant,
    lease_from: Duration,
    ttl: Duration,
}

impl Taken {
    /// How long the run held the lock by now, or to the end of its lease if that came first.
    fn held(&self) -> Duration {
        self.at.elapsed().min(self.lease_from + self.ttl)
    }
}

impl EtcdLocker {
    pub(crate) fn new(conn: Conn, keys: Keys, run: &RunSpec) -> Self {
        Self {
            conn,
            keys,
            kind: run.kind,
            min_interval: run.min_interval,
            holder: run.holder.clone(),
            lease: None,
            entry: None,
            watch: None,
            taken: None,
            counts: Vec::new(),
            unanswered: false,
            interrupt: Arc::new(Notify::new()),
        }
    }

    /// The entry's value: the holder's details and how it holds the lock.
    fn entry_value(&self, token: &str) -> String {
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

    /// A lease of `ttl` rounded up to whole seconds (etcd's unit), granted within `deadline`.
    fn grant(&mut self, ttl: Duration, deadline: Instant) -> Result<i64, Failure> {
        let secs = i64::try_from(ttl.as_millis().div_ceil(1000))
            .unwrap_or(i64::MAX)
            .max(1);
        let granted = self.conn.run(deadline, move |mut client| async move {
            client
                .lease_grant(secs, None::<LeaseGrantOptions>)
                .await
                .map(|r| r.id())
        })?;
        self.lease = Some(granted);
        Ok(granted)
    }

    /// One read-and-write of the queue: our entry put if absent (with the run's record too,
    /// when nobody else is queued and nothing needs a look first), then the queue, the last
    /// success and the counters read in the same transaction.
    fn enqueue(&mut self, token: &str, lease: i64, deadline: Instant) -> Result<Seen, Failure> {
        let entry = self.keys.entry(lease);
        let put = TxnOp::put(
            entry.clone(),
            self.entry_value(token),
            Some(PutOptions::new().with_lease(lease)),
        );
        let reads = [
            TxnOp::get(
                self.keys.queue(),
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Ascend),
                ),
            ),
            TxnOp::get(self.keys.last_success(), None),
            TxnOp::get(self.keys.counts(), Some(GetOptions::new().with_prefix())),
            // The run before (the newest two: one may be this run's own, written here): if it
            // never ended and its entry is gone, it vanished.
            TxnOp::get(
                self.keys.runs(),
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_limit(2),
                ),
            ),
        ];
        let fast = self.kind == Kind::Exclusive && self.min_interval.is_none();
        let txn = if fast {
            let run = TxnOp::put(
                self.keys.run(lease),
                record::started(token, &self.holder, now_ms()),
                None,
            );
            let mut first = vec![put.clone(), run];
            first.extend(reads.iter().cloned());
            let mut queued = vec![TxnOp::txn(
                Txn::new()
                    .when([Compare::create_revision(entry.clone(), CompareOp::Equal, 0)])
                    .and_then([put]),
            )];
            queued.extend(reads);
            Txn::new()
                .when([Compare::version(self.keys.queue(), CompareOp::Equal, 0).with_prefix()])
                .and_then(first)
                .or_else(queued)
        } else {
            let mut ops = vec![TxnOp::txn(
                Txn::new()
                    .when([Compare::create_revision(entry.clone(), CompareOp::Equal, 0)])
                    .and_then([put]),
            )];
            ops.extend(reads);
            Txn::new().and_then(ops)
        };
        let response = self.txn(txn, deadline)?;
        Ok(Seen::read(&response, &entry, fast && response.succeeded()))
    }

    /// A transaction within `deadline`, on whichever member answers.
    fn txn(&mut self, txn: Txn, deadline: Instant) -> Result<TxnResponse, Failure> {
        self.conn.run(deadline, move |mut client| {
            let txn = txn.clone();
            async move { client.txn(txn).await }
        })
    }

    /// Our entry deleted (if it still holds our revision) and our lease revoked: the run gives
    /// up its place, holding nothing.
    fn give_up_place(&mut self, deadline: Instant) -> Result<(), Failure> {
        let Some(lease) = self.lease.take() else {
            return Ok(());
        };
        if let Some(rev) = self.entry.take() {
            let entry = self.keys.entry(lease);
            let delete = Txn::new()
                .when([Compare::create_revision(
                    entry.clone(),
                    CompareOp::Equal,
                    rev,
                )])
                .and_then([TxnOp::delete(entry, None)]);
            self.txn(delete, deadline)?;
        }
        self.revoke(lease, deadline)
    }

    fn revoke(&mut self, lease: i64, deadline: Instant) -> Result<(), Failure> {
        let revoked = self.conn.run(deadline, move |mut client| async move {
            match client.lease_revoke(lease).await {
                // Revoked already, or expired: gone either way.
                Err(Error::GRpcStatus(status)) if status.code() == tonic::Code::NotFound => Ok(()),
                other => other.map(drop),
            }
        });
        self.unanswered = false;
        revoked
    }

    /// Add one to the counter `label`, comparing its revision as last seen (a few tries; a
    /// counter is the record's, never the lock's: failing to count stops nothing).
    fn count(&mut self, label: &str, deadline: Instant) {
        for _ in 0..4 {
            let key = self.keys.count(label);
            let (value, rev) = self
                .counts
                .iter()
                .find(|(l, _, _)| l == label)
                .map_or((0, 0), |(_, v, r)| (*v, *r));
            let txn = Txn::new()
                .when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)])
                .and_then([TxnOp::put(key.clone(), (value + 1).to_string(), None)])
                .or_else([TxnOp::get(key, None)]);
            let Ok(response) = self.txn(txn, deadline) else {
                return;
            };
            if response.succeeded() {
                return;
            }
            // Someone counted meanwhile: the counter as it is now, and again.
            let now =
                first_kv(&response).map_or((0, 0), |kv| (parse_int(kv.value()), kv.mod_revision()));
            self.counts.retain(|(l, _, _)| l != label);
            self.counts.push((label.to_owned(), now.0, now.1));
        }
    }

    /// Record the taken run's end as lost (its lease or entry found gone), if it has no end yet.
    fn record_lost(&mut self, token: &str, ended: RunEnding, deadline: Instant) {
        let (Some(lease), Some(taken)) = (self.lease, &self.taken) else {
            return;
        };
        let lost = RunEnding {
            outcome: ended.lost.lost_outcome,
            status: ended.lost.lost_status,
            ..ended
        };
        let value = record::ended(
            token,
            &self.holder,
            (taken.at_ms, taken.fence),
            taken.held(),
            &lost,
        );
        let run = self.keys.run(lease);
        let get = self.conn.run(deadline, {
            let run = run.clone();
            move |mut client| {
                let run = run.clone();
                async move { client.get(run, None).await }
            }
        });
        let Ok(found) = get else { return };
        let Some(kv) = found.kvs().first() else {
            return;
        };
        if record::has_ended(kv.value()) {
            return;
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(
                run.clone(),
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then([
                TxnOp::put(run, value.clone(), None),
                TxnOp::put(self.keys.last_ended(), value, None),
            ]);
        if matches!(self.txn(txn, deadline), Ok(r) if r.succeeded()) {
            self.count(lost.outcome, deadline);
        }
    }

    /// The run before ours never ended and its entry is gone: it vanished. Marked and counted
    /// once, by the run that took the lock after it.
    fn mark_vanished(&mut self, before: &Option<KeyValue>, queue: &[Entry], deadline: Instant) {
        let Some(kv) = before else { return };
        let lease = kv
            .key()
            .rsplit(|b| *b == b'/')
            .next()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .map(|l| l as i64);
        let Some(lease) = lease else { return };
        let entry = self.keys.entry(lease);
        if Some(lease) == self.lease
            || queue.iter().any(|e| e.key == entry)
            || record::has_ended(kv.value())
        {
            return;
        }
        let Some(marked) = record::vanished(kv.value(), kv.create_revision()) else {
            return;
        };
        let key = kv.key().to_vec();
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                kv.mod_revision(),
            )])
            .and_then([
                TxnOp::put(key, marked.clone(), None),
                TxnOp::put(self.keys.last_ended(), marked, None),
            ]);
        if matches!(self.txn(txn, deadline), Ok(r) if r.succeeded()) {
            self.count("vanished", deadline);
        }
    }
}

/// What one read of the queue found.
struct Seen {
    /// The queue, in order.
    queue: Vec<Entry>,
    /// Our entry's create revision (None: not there).
    ours: Option<i64>,
    /// The revision the read was made at.
    revision: i64,
    /// The run's record was written with the entry (nobody else was queued).
    recorded: bool,
    last_success: Option<Vec<u8>>,
    counts: Vec<(String, i64, i64)>,
    /// The newest run's record before this one's.
    before: Option<KeyValue>,
}

impl Seen {
    fn read(response: &TxnResponse, entry: &str, recorded: bool) -> Seen {
        let revision = response.header().map_or(0, |h| h.revision());
        let gets: Vec<Vec<KeyValue>> = response
            .op_responses()
            .into_iter()
            .filter_map(|op| match op {
                TxnOpResponse::Get(get) => Some(get.kvs().to_vec()),
                _ => None,
            })
            .collect();
        let mut gets = gets.into_iter();
        let queue_kvs = gets.next().unwrap_or_default();
        let last_success = gets
            .next()
            .and_then(|kvs| kvs.first().map(|kv| kv.value().to_vec()));
        let counts = gets
            .next()
            .unwrap_or_default()
            .iter()
            .filter_map(|kv| {
                let label = std::str::from_utf8(kv.key()).ok()?.rsplit('/').next()?;
                Some((label.to_owned(), parse_int(kv.value()), kv.mod_revision()))
            })
            .collect();
        let before = gets.next().unwrap_or_default().into_iter().find(|kv| {
            // Not our own run's record, written in this very transaction.
            recorded.then_some(kv.create_revision()) != Some(revision)
        });
        let queue: Vec<Entry> = queue_kvs.iter().map(entry_of).collect();
        let ours = queue.iter().find(|e| e.key == entry).map(|e| e.rev);
        Seen {
            queue,
            ours,
            revision,
            recorded,
            last_success,
            counts,
            before,
        }
    }
}

/// An entry of the queue from its key and value.
pub(crate) fn entry_of(kv: &KeyValue) -> Entry {
    let kind = serde_json::from_slice::<serde_json::Value>(kv.value())
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_default();
    Entry {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        rev: kv.create_revision(),
        kind,
    }
}

fn first_kv(response: &TxnResponse) -> Option<KeyValue> {
    response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().cloned(),
        _ => None,
    })
}

fn parse_int(value: &[u8]) -> i64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// This host's clock, unix ms.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long ago (this host's clock) the last success recorded ended, if it did.
fn success_ago(last_success: &Option<Vec<u8>>) -> Option<Duration> {
    let run = record::run(last_success.as_deref()?, 0, false, 0)?;
    let ended = run.ended_ms()?;
    Some(Duration::from_millis(now_ms().saturating_sub(ended)))
}

impl Locker for EtcdLocker {
    fn acquire(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Acquire, Failure> {
        let deadline = Instant::now() + timeout;
        // A waiting place whose lease ran out (a frozen waiter) is taken anew, at the back.
        let (lease, seen, ours) = loop {
            let lease = match self.lease {
                Some(lease) => lease,
                None => self.grant(ttl, deadline)?,
            };
            self.unanswered = true;
            let seen = self.enqueue(token, lease, deadline)?;
            match seen.ours {
                Some(ours) => break (lease, seen, ours),
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
            self.give_up_place(deadline)?;
            self.count("skipped", deadline);
            return Ok(Acquire::Skipped { ago });
        }
        match queue::place(&seen.queue, ours, self.kind) {
            Place::Holds => {
                if !seen.recorded {
                    let entry = self.keys.entry(lease);
                    let run = TxnOp::put(
                        self.keys.run(lease),
                        record::started(token, &self.holder, now_ms()),
                        None,
                    );
                    let record = Txn::new()
                        .when([Compare::create_revision(entry, CompareOp::Equal, ours)])
                        .and_then([run]);
                    if !self.txn(record, deadline)?.succeeded() {
                        self.lease = None;
                        self.entry = None;
                        return Err(Failure::Unreachable(
                            "the waiting place's lease ran out as the lock came free".into(),
                        ));
                    }
                }
                self.unanswered = false;
                self.taken = Some(Taken {
                    at_ms: now_ms(),
                    fence: ours,
                    at: Instant::now(),
                    lease_from: Duration::ZERO,
                    ttl,
                });
                self.mark_vanished(&seen.before, &seen.queue, deadline);
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

    fn wait(&mut self, _token: &str, block: Block) -> Result<bool, Failure> {
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
        let beat = self
            .taken
            .as_ref()
            .map_or(Duration::from_secs(1), |t| t.ttl / 3);
        // Debug builds only, for a test: a pause between the read of the queue and the watch,
        // in which the test compacts the history the watch is to start from.
        #[cfg(debug_assertions)]
        if let Some(ms) = std::env::var("REDLOCK_TEST_WATCH_DELAY_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
        {
            std::thread::sleep(Duration::from_millis(ms));
        }
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
            let mut beat = tokio::time::interval(beat.max(Duration::from_millis(200)));
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
                        Some(_) => {}
                        None => return Ok(true),
                    },
                    _ = beat.tick() => keeper.keep_alive().await?,
                    _ = interrupt.notified() => return Ok(true),
                    _ = &mut end => return Ok(false),
                }
            }
        });
        match waited {
            None => Err(Failure::Unreachable(
                format!("no answer from etcd at {at} in time").into(),
            )),
            Some(Ok(woken)) => Ok(woken),
            Some(Err(err)) => {
                self.conn.forget_member();
                Err(stream_failure(&at, err))
            }
        }
    }

    fn interrupter(&self, _token: &str) -> Box<dyn Interrupt> {
        Box::new(EtcdInterrupt(Arc::clone(&self.interrupt)))
    }

    fn leave(&mut self, _token: &str, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let deadline = Instant::now() + timeout;
        self.give_up_place(deadline)?;
        if busy {
            self.count("busy", deadline);
        }
        Ok(())
    }

    fn unanswered(&self) -> bool {
        self.unanswered
    }

    fn extend(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Renewal, Failure> {
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
            self.record_lost(token, lost, deadline.max(Instant::now() + timeout));
            return Ok(Renewal::Lost(Held::Gone));
        }
        if let Some(taken) = &mut self.taken {
            taken.lease_from = sent.saturating_duration_since(taken.at);
            taken.ttl = ttl;
        }
        Ok(Renewal::Extended)
    }

    fn release(
        &mut self,
        token: &str,
        ended: RunEnding,
        timeout: Duration,
    ) -> Result<Held, Failure> {
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
            (taken.at_ms, taken.fence),
            taken.held(),
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
                self.count(ended.outcome, deadline);
            }
            Held::Ours
        } else {
            self.record_lost(token, ended, deadline);
            Held::Gone
        };
        let _ = self.revoke(lease, deadline);
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
