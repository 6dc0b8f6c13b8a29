//! The steps of the lock protocol on etcd that the [`Locker`] methods are made of: a lease
//! granted and revoked, the queue read and joined in one transaction, a place given up, a
//! counter raised, a run's end recorded when its lock was found lost, a vanished run marked.
//!
//! [`Locker`]: crate::lock::Locker

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{
    Compare, CompareOp, Error, GetOptions, KeyValue, LeaseGrantOptions, PutOptions, SortOrder,
    SortTarget, Txn, TxnOp, TxnOpResponse, TxnResponse,
};

use super::locker::EtcdLocker;
use crate::lock::record::RUNS_KEPT;

/// The most tries a counter gets before its deadline: more clients than this counting the same
/// label at the same moment may lose a count.
const COUNT_TRIES: u32 = 64;

/// The least time a counter is given to count, whatever the step it closes has left: only
/// clients counting the same label at once take more than one round trip.
const COUNT_TIME: Duration = Duration::from_secs(1);

/// How many runs past [`RUNS_KEPT`] a lock's record may hold before a take prunes it: a prune
/// is a request of its own, made every few runs rather than every run.
const PRUNE_SLACK: u32 = 5;
use super::queue::Entry;
use super::record;
use crate::lock::record::RunEnding;
use crate::lock::{Failure, Kind};

impl EtcdLocker {
    /// A lease of `ttl` rounded up to whole seconds (etcd's unit), granted within `deadline`.
    pub(super) fn grant(&mut self, ttl: Duration, deadline: Instant) -> Result<i64, Failure> {
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

    /// One look at the queue: our entry put if absent (with the run's record too, when nobody
    /// else is queued and nothing needs a look first), then the queue, the last success, the
    /// counters and the newest runs read in the same transaction. Once our entry is there, a
    /// read alone: a waiter woken by a release costs etcd no write before its command starts.
    /// `at_ms`: when the run takes the lock if it does (this host's clock).
    ///
    /// A lease granted by an earlier attempt (a waiter's, or one whose put had no answer) is
    /// kept alive beside the transaction, sent together: the run's lease counts from when its
    /// attempt was sent, and only a keep-alive sent by this attempt makes that true of a lease
    /// whose last keep-alive may never have landed (a frozen member). None: the lease is gone
    /// (its entry with it); the caller takes a new one.
    pub(super) fn enqueue(
        &mut self,
        token: &str,
        (lease, granted_now): (i64, bool),
        at_ms: u64,
        deadline: Instant,
    ) -> Result<Option<Seen>, Failure> {
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
            // The newest two runs: the one before ours (if it never ended and its entry is
            // gone, it vanished), beside this run's own when it is written here. The answer
            // counts them all, for the prune. Reading every run kept (27 records, about 6 KB)
            // cost each take 0.9 ms of its 12.6 ms (300 runs, interleaved).
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
        // This transaction records the run itself: the fast take, not a look at the queue by a
        // client already in it (a woken waiter's run is recorded as its command starts).
        let records = fast && self.entry.is_none();
        let txn = if self.entry.is_some() {
            Txn::new().and_then(reads)
        } else if fast {
            let run = TxnOp::put(
                self.keys.run(lease),
                record::started(token, &self.holder, at_ms, None),
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
        let response = self.conn.run(deadline, move |client| {
            let txn = txn.clone();
            let keep = (!granted_now).then(|| client.clone());
            let mut client = client;
            async move {
                let kept = async move {
                    match keep {
                        None => Ok(true),
                        Some(mut keep) => match keep.lease_keep_alive(lease).await {
                            Ok(_) => Ok(true),
                            // The only error of this kind a first keep-alive gives: gone.
                            Err(Error::LeaseKeepAliveError(_)) => Ok(false),
                            Err(err) => Err(err),
                        },
                    }
                };
                let (kept, done) = tokio::join!(kept, client.txn(txn));
                match (kept?, done) {
                    (false, _) => Ok(None),
                    (true, Ok(response)) => Ok(Some(response)),
                    // A put with a lease that ran out between the keep-alive and the txn.
                    (true, Err(Error::GRpcStatus(status)))
                        if status.code() == tonic::Code::NotFound =>
                    {
                        Ok(None)
                    }
                    (true, Err(err)) => Err(err),
                }
            }
        })?;
        Ok(response.map(|response| Seen::read(&response, &entry, records && response.succeeded())))
    }

    /// A transaction within `deadline`, on whichever member answers.
    pub(super) fn txn(&mut self, txn: Txn, deadline: Instant) -> Result<TxnResponse, Failure> {
        self.conn.run(deadline, move |mut client| {
            let txn = txn.clone();
            async move { client.txn(txn).await }
        })
    }

    /// Our entry deleted (if it still holds our revision) and our lease revoked: the run gives
    /// up its place, holding nothing.
    pub(super) fn give_up_place(&mut self, deadline: Instant) -> Result<(), Failure> {
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

    pub(super) fn revoke(&mut self, lease: i64, deadline: Instant) -> Result<(), Failure> {
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

    /// Add one to the counter `label`, comparing its revision as last seen, and again with the
    /// value a failed compare read back, until it counts or `deadline` passes (a counter is the
    /// record's, never the lock's: failing to count stops nothing). Each round of clients
    /// counting at once lets one through: 15 runs turned away together need up to 15 tries
    /// (4 tries counted 6 of them). However little time the caller has left (a run turned away
    /// without `--wait` has 100 ms for its whole leave), counting gets [`COUNT_TIME`].
    pub(super) fn count(&mut self, label: &str, by: i64, deadline: Instant) {
        let deadline = deadline.max(Instant::now() + COUNT_TIME);
        for _ in 0..COUNT_TRIES {
            let key = self.keys.count(label);
            let (value, rev) = self
                .counts
                .iter()
                .find(|(l, _, _)| l == label)
                .map_or((0, 0), |(_, v, r)| (*v, *r));
            let txn = Txn::new()
                .when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)])
                .and_then([TxnOp::put(key.clone(), (value + by).to_string(), None)])
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
    ///
    /// True when the run's record already ends as `ended` says: an earlier attempt of this
    /// release went through though its answer was lost, and the lock was released, not lost.
    pub(super) fn record_lost(&mut self, token: &str, ended: RunEnding, deadline: Instant) -> bool {
        let (Some(lease), Some(taken)) = (self.lease, &self.taken) else {
            return false;
        };
        let lost = RunEnding {
            outcome: ended.lost.lost_outcome,
            status: ended.lost.lost_status,
            ..ended
        };
        let value = record::ended(
            token,
            &self.holder,
            (taken.at_ms, taken.fence, self.min_interval),
            taken.tenure.held(),
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
        let Ok(found) = get else { return false };
        // Written as it is found: a record the ring pruned meanwhile is written anew (counted
        // all the same), one that a later take marked vanished is corrected, its count moved,
        // as on Redis; one that ended otherwise (its release, retried) is left.
        let kv = found.kvs().first();
        let was = kv.and_then(|kv| record::outcome_of(kv.value()));
        if was.as_deref().is_some_and(|o| o != record::VANISHED) {
            return was.as_deref() == Some(ended.outcome);
        }
        let unchanged = match kv {
            Some(kv) => Compare::mod_revision(run.clone(), CompareOp::Equal, kv.mod_revision()),
            None => Compare::create_revision(run.clone(), CompareOp::Equal, 0),
        };
        let txn = Txn::new().when([unchanged]).and_then([
            TxnOp::put(run, value.clone(), None),
            TxnOp::put(self.keys.last_ended(), value, None),
        ]);
        if matches!(self.txn(txn, deadline), Ok(r) if r.succeeded()) {
            self.count(lost.outcome, 1, deadline);
            if was.is_some() {
                self.count(record::VANISHED, -1, deadline);
            }
        }
        false
    }

    /// The run before ours never ended and its entry is gone: it vanished. Marked and counted
    /// once, by the run that took the lock after it.
    pub(super) fn mark_vanished(
        &mut self,
        before: Option<&KeyValue>,
        queue: &[Entry],
        deadline: Instant,
    ) {
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
            self.count(record::VANISHED, 1, deadline);
        }
    }
}

impl EtcdLocker {
    /// The record keeps the newest [`RUNS_KEPT`] runs: past a few more, the oldest go. `total`:
    /// how many runs the record holds, this run's own included.
    pub(super) fn prune(&mut self, total: i64, deadline: Instant) {
        let excess = total - i64::from(RUNS_KEPT);
        if excess <= i64::from(PRUNE_SLACK) {
            return;
        }
        let runs = self.keys.runs();
        let oldest = self.conn.run(deadline, move |mut client| {
            let runs = runs.clone();
            async move {
                let options = GetOptions::new()
                    .with_prefix()
                    .with_keys_only()
                    .with_sort(SortTarget::Create, SortOrder::Ascend)
                    .with_limit(excess);
                client.get(runs, Some(options)).await
            }
        });
        let Ok(oldest) = oldest else { return };
        let old: Vec<TxnOp> = oldest
            .kvs()
            .iter()
            .map(|kv| TxnOp::delete(kv.key().to_vec(), None))
            .collect();
        let _ = self.txn(Txn::new().and_then(old), deadline);
    }
}

/// What one read of the queue found.
pub(super) struct Seen {
    /// The queue, in order.
    pub queue: Vec<Entry>,
    /// Our entry's create revision (None: not there).
    pub ours: Option<i64>,
    /// The revision the read was made at.
    pub revision: i64,
    /// The run's record was written with the entry (nobody else was queued).
    pub recorded: bool,
    pub last_success: Option<Vec<u8>>,
    pub counts: Vec<(String, i64, i64)>,
    /// The newest runs' records (up to two), newest first, this run's own left out.
    pub runs: Vec<KeyValue>,
    /// How many runs the record holds, this run's own included once it is written.
    pub runs_total: i64,
}

impl Seen {
    fn read(response: &TxnResponse, entry: &str, recorded: bool) -> Seen {
        let revision = response.header().map_or(0, |h| h.revision());
        let gets: Vec<(Vec<KeyValue>, i64)> = response
            .op_responses()
            .into_iter()
            .filter_map(|op| match op {
                TxnOpResponse::Get(get) => Some((get.kvs().to_vec(), get.count())),
                _ => None,
            })
            .collect();
        let runs_total = gets.last().map_or(0, |(_, count)| *count) + i64::from(!recorded);
        let mut gets = gets.into_iter().map(|(kvs, _)| kvs);
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
        let runs = gets
            .next()
            .unwrap_or_default()
            .into_iter()
            // Not our own run's record, written in this very transaction.
            .filter(|kv| recorded.then_some(kv.create_revision()) != Some(revision))
            .collect();
        let queue: Vec<Entry> = queue_kvs.iter().map(entry_of).collect();
        let ours = queue.iter().find(|e| e.key == entry).map(|e| e.rev);
        Seen {
            queue,
            ours,
            revision,
            recorded,
            last_success,
            counts,
            runs,
            runs_total,
        }
    }
}

/// An entry of the queue from its key and value.
pub(crate) fn entry_of(kv: &KeyValue) -> Entry {
    let value = serde_json::from_slice::<serde_json::Value>(kv.value()).ok();
    let kind = value
        .as_ref()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_default();
    let token = value.as_ref().and_then(|v| v.get("token")).is_some();
    Entry {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        rev: kv.create_revision(),
        kind,
        foreign: !token || super::keys::Keys::lease_of(kv.key()).is_none(),
    }
}

fn first_kv(response: &TxnResponse) -> Option<KeyValue> {
    response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().cloned(),
        _ => None,
    })
}

pub(super) fn parse_int(value: &[u8]) -> i64 {
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
pub(super) fn success_ago(last_success: &Option<Vec<u8>>) -> Option<Duration> {
    let run = record::run(last_success.as_deref()?, 0, false, 0)?;
    let ended = run.ended_ms()?;
    Some(Duration::from_millis(now_ms().saturating_sub(ended)))
}
