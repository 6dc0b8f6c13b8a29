//! A run's lock on etcd and the steps it is made of, each a short sequence of the transactions
//! `protocol` builds: a lease granted, the queue joined and read, a wait, a renewal, a release, a
//! place given up. The record's writes are `recorder`'s; the wait's loop is `session`'s; the
//! [`Locker`] methods (`locker`) are these steps, called. The steps that end a hold or a place
//! (leave, renew, release) are `steps/ending.rs`, a child so that the fields stay private.
//!
//! [`Locker`]: crate::lock::Locker

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, Error, KeyValue, LeaseGrantOptions, Txn};
use tokio::sync::Notify;

use super::client::Conn;
use super::keys::Keys;
use super::protocol::{self, End, Join};
use super::record;
use super::recorder::{Recorder, send_step};
use super::seen::{Seen, queue_of};
use super::session::{self, Waiting, Woken, keep_alive};
use crate::backend::block::Block;
use crate::backend::queue::{self, Entry, Place, Watch};
use crate::backend::run_record::{now_ms, success_ago};
use crate::lock::record::{RunEnding, Tenure};
use crate::lock::{Acquire, Failure, Held, Holder, Kind, Renewal, RunSpec};

mod ending;

/// How long a release waits at most for its lease's revoke to be answered: one round trip and
/// one write on a cluster that is well. The answer itself changes nothing (the lease ends by
/// itself within the ttl), but etcd drops a request whose connection closes before the request
/// is carried out, as it does when the run exits.
const REVOKE_WAIT: Duration = Duration::from_millis(100);

/// A run's lock on etcd.
pub(crate) struct EtcdLocker {
    conn: Conn,
    keys: Keys,
    /// The run's owner token, recorded in its entry and its record of runs.
    token: String,
    kind: Kind,
    /// `--fair`: a turned-away run says when the lock is free but promised to a waiter ahead.
    fair: bool,
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
    /// The record of the lock's runs.
    recorder: Recorder,
    /// An attempt failed after its lease was granted: its entry may be there.
    unanswered: bool,
    /// How often a waiter keeps its lease alive while it watches: a third of the ttl.
    beat: Duration,
    /// The look at the queue that let the run in, for what `settle` writes.
    settling: Option<Seen>,
    interrupt: Arc<Notify>,
}

/// A run that took the lock: when (this host's clock, unix ms), its fencing token, and how
/// long it has held the lock.
#[derive(Debug)]
struct Taken {
    at_ms: u64,
    fence: i64,
    tenure: Tenure,
}

impl EtcdLocker {
    pub(crate) fn new(conn: Conn, keys: Keys, run: &RunSpec) -> Self {
        Self {
            conn,
            recorder: Recorder::new(keys.clone()),
            keys,
            token: run.token.clone(),
            kind: run.kind,
            fair: run.fair,
            min_interval: run.min_interval,
            holder: run.holder.clone(),
            lease: None,
            entry: None,
            watch: None,
            taken: None,
            unanswered: false,
            beat: (run.ttl / 3).max(Duration::from_millis(200)),
            settling: None,
            interrupt: Arc::new(Notify::new()),
        }
    }

    /// The run's owner token.
    pub(super) fn token(&self) -> &str {
        &self.token
    }

    /// What wakes a wait from another thread.
    pub(super) fn interrupt(&self) -> Arc<Notify> {
        Arc::clone(&self.interrupt)
    }

    /// An attempt failed after its lease was granted: its entry may be there.
    pub(super) fn unanswered(&self) -> bool {
        self.unanswered
    }

    /// A take: the queue joined (a waiting place whose lease ran out taken anew, at the back),
    /// then where the run stands in it decides.
    pub(super) fn take(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Acquire, Failure> {
        let deadline = Instant::now() + timeout;
        // When the run took the lock, if this attempt takes it: the record's start.
        let at_ms = now_ms();
        let (seen, ours) = self.join(token, ttl, at_ms, deadline)?;
        // Answered: where the entry stands is known, whatever it comes to.
        self.entry = Some(ours);
        self.unanswered = false;
        self.recorder.seen(seen.kept_ms, now_ms());
        if let Some(interval) = self.min_interval
            && let Some(ago) = success_ago(&seen.last_success).filter(|ago| *ago < interval)
        {
            // Counted even when giving the place up had no answer in time, as in `leave`.
            let left = self.give_up_place(deadline).map(drop);
            self.recorder
                .count(&mut self.conn, "skipped", true, deadline);
            self.recorder.keep(&mut self.conn, deadline);
            left?;
            return Ok(Acquire::Skipped { ago });
        }
        match queue::place(&seen.queue, ours, self.kind) {
            Place::Holds => {
                if let Some(taken) = self.taken.as_mut().filter(|t| t.fence == ours) {
                    // Our own take again (a retry whose answer was lost): the same run, its
                    // lease kept alive by this look, its record written already.
                    taken.tenure.renewed(deadline - timeout, ttl);
                    return Ok(Acquire::Acquired { fence: ours });
                }
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
                Ok(Acquire::Busy {
                    remaining: None,
                    queued: self.promised(&seen),
                })
            }
            Place::Mismatch(found) => {
                self.give_up_place(deadline)?;
                Ok(Acquire::Mismatch { found })
            }
        }
    }

    /// Whether a turned-away run finds the lock free but promised to a waiter ahead: a shared
    /// waiter behind an exclusive one that waits itself (the lock is held shared); with
    /// `--fair`, a head of the queue that has not taken the lock yet (no running record among
    /// the newest runs read: exact for one holder, a guess past two).
    fn promised(&self, seen: &Seen) -> bool {
        let holders = queue::holders(&seen.queue);
        if self.kind == Kind::Shared {
            return holders.iter().all(|e| e.kind == Kind::Shared.stored());
        }
        let running = |entry: &&Entry| {
            seen.runs.iter().any(|kv| {
                Keys::lease_of(entry.key.as_bytes())
                    .map(|l| self.keys.run(l))
                    .as_deref()
                    == std::str::from_utf8(kv.key()).ok()
                    && !record::has_ended(kv.value())
            })
        };
        self.fair && !holders.iter().all(running)
    }

    /// The run's place in the queue, and what the look that took it found: a new lease and
    /// place when the old lease ran out as it was kept alive, a new place with the same lease
    /// when only the place was deleted (a forced release sends the waiters to the back).
    fn join(
        &mut self,
        token: &str,
        ttl: Duration,
        at_ms: u64,
        deadline: Instant,
    ) -> Result<(Seen, i64), Failure> {
        loop {
            let lease = match self.lease {
                Some(lease) => (lease, false),
                None => (self.grant(ttl, deadline)?, true),
            };
            self.unanswered = true;
            let alive = match self.enqueue(token, lease, at_ms, deadline)? {
                // The record's lease was gone: granted again, and the same lease tries again.
                Joined::RecordGone if Instant::now() < deadline => continue,
                Joined::Seen(seen) => match seen.ours {
                    Some(ours) => return Ok((seen, ours)),
                    None => true,
                },
                Joined::RecordGone | Joined::LeaseGone => false,
            };
            if Instant::now() >= deadline {
                return Err(Failure::Unreachable(
                    "no answer from etcd in time (a lease ran out as it was given)".into(),
                ));
            }
            if !alive {
                self.lease = None;
            }
            self.entry = None;
        }
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

    /// How this attempt joins: a look once the entry is there; with the run's record when it
    /// may take the lock in one request (exclusive, no `--min-interval`).
    fn joining(
        &mut self,
        token: &str,
        lease: i64,
        at_ms: u64,
        deadline: Instant,
    ) -> Result<Join, Failure> {
        if self.entry.is_some() {
            return Ok(Join::Look);
        }
        let entry = self.entry_value(token);
        if self.kind != Kind::Exclusive || self.min_interval.is_some() {
            return Ok(Join::Queue { lease, entry });
        }
        Ok(Join::Fast {
            lease,
            entry,
            run: record::started(token, &self.holder, at_ms, None),
            record: self.recorder.ensure(&mut self.conn, deadline)?,
        })
    }

    /// One look at the queue ([`protocol::take`]). A lease granted by an earlier attempt (a
    /// waiter's, or one whose put had no answer) is kept alive beside the transaction, sent
    /// together: the run's lease counts from when its attempt was sent, and only a keep-alive
    /// sent by this attempt makes that true of a lease whose last keep-alive may never have
    /// landed (a frozen member).
    fn enqueue(
        &mut self,
        token: &str,
        (lease, granted_now): (i64, bool),
        at_ms: u64,
        deadline: Instant,
    ) -> Result<Joined, Failure> {
        let join = self.joining(token, lease, at_ms, deadline)?;
        let records = matches!(join, Join::Fast { .. });
        let txn = Txn::from(&protocol::take(&self.keys, join));
        let run_due = (!granted_now).then_some(lease);
        let (run_alive, done) = self.conn.run(deadline, move |client| {
            let txn = txn.clone();
            let (a, mut c) = (client.clone(), client);
            async move {
                let (run, done) = tokio::join!(kept(a, run_due), c.txn(txn));
                let done = match done {
                    // A put with a lease that ran out between the keep-alive and the txn.
                    Err(Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => None,
                    other => Some(other?),
                };
                Ok((run?, done))
            }
        })?;
        let entry = self.keys.entry(lease);
        Ok(match (run_alive, done) {
            (true, Some(r)) => Joined::Seen(Seen::read(&r, &entry, records && r.succeeded())),
            (true, None) if records => {
                // The run's lease lives: the record's is the one gone.
                self.recorder.kept(false);
                Joined::RecordGone
            }
            _ => Joined::LeaseGone,
        })
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

    /// A wait for the change that may let the run in ([`session::wait`]); true when the queue
    /// is to be read again, false when `block.hold` passed with no change.
    pub(super) fn wait_for(&mut self, block: Block) -> Result<bool, Failure> {
        let (Some((watch, read_at)), Some(lease)) = (self.watch.clone(), self.lease) else {
            return Ok(true);
        };
        let limit = Instant::now() + block.limit;
        let client = self.conn.client(limit)?;
        let at = self.conn.member().to_owned();
        let (key, prefix) = match watch {
            Watch::Key(key) => (key, false),
            Watch::Queue => (self.keys.queue(), true),
        };
        let waiting = Waiting {
            key,
            prefix,
            read_at,
            lease,
            beat: self.beat,
            hold: block.hold,
        };
        let woken = self
            .conn
            .block_on(limit, session::wait(client, waiting, self.interrupt()));
        match woken {
            None => Err(Failure::Unreachable(
                format!("no answer from etcd at {at} in time").into(),
            )),
            Some(Ok(Woken::Quiet)) => Ok(false),
            Some(Ok(Woken::Look)) => Ok(true),
            Some(Ok(Woken::Cancelled(compacted))) => {
                crate::report!(
                    2,
                    WatchCancelled { "compact_revision" => compacted },
                    "the watch on the lock's queue was cancelled (history compacted to \
                     revision {compacted}); reading the queue again"
                );
                Ok(true)
            }
            Some(Ok(Woken::Unheard)) => {
                // The next attempt asks another member, keeping the place alive from there
                // (or, too late, taking a new one).
                crate::report!(
                    2,
                    KeepAliveUnanswered { "member" => at.as_str() },
                    "etcd at {at} has not answered the waiting place's keep-alives for two \
                     beats; asking another member"
                );
                self.conn.forget_member();
                Ok(true)
            }
            Some(Err(err)) => {
                let failure = self.conn.stream_failure(err);
                self.conn.forget_member();
                Err(failure)
            }
        }
    }

    /// What a take leaves for after the command's start: a waiter's run recorded, the run
    /// before it marked if it vanished, the record pruned.
    pub(super) fn settle(&mut self, token: &str, timeout: Duration) {
        let Some(seen) = self.settling.take() else {
            return;
        };
        let deadline = Instant::now() + timeout;
        if !seen.recorded
            && let (Some(lease), Some(taken)) = (self.lease, &self.taken)
        {
            // Only while our entry holds our revision: a lock lost meanwhile is the next
            // renewal's to find.
            let run = record::started(token, &self.holder, taken.at_ms, Some(taken.fence));
            let fence = taken.fence;
            let _ = self
                .recorder
                .send(&mut self.conn, deadline, |keys, record| {
                    protocol::record_start(keys, lease, fence, run.clone(), record)
                });
        }
        if let Some(before) = seen.runs.first()
            && self.vanished(before, &seen.queue)
        {
            self.recorder
                .mark_vanished(&mut self.conn, before, deadline);
        }
        self.recorder
            .tidy(&mut self.conn, seen.runs_total, deadline);
        // Each use of the name keeps its record: once an hour, a request of its own.
        self.recorder.keep(&mut self.conn, deadline);
    }

    /// Whether the run of record `kv` (the one before ours) vanished: not ours, its entry
    /// gone, and no end recorded.
    fn vanished(&self, kv: &KeyValue, queue: &[Entry]) -> bool {
        let lease = kv
            .key()
            .rsplit(|b| *b == b'/')
            .next()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .map(|l| l as i64);
        let Some(lease) = lease else { return false };
        let entry = self.keys.entry(lease);
        Some(lease) != self.lease
            && !queue.iter().any(|e| e.key == entry)
            && !record::has_ended(kv.value())
    }
}

/// What one look at the queue came to.
enum Joined {
    Seen(Seen),
    /// The run's lease is gone (its entry with it): the caller takes a new one.
    LeaseGone,
    /// The record's lease is gone: the caller tries again once it is granted.
    RecordGone,
}

/// A keep-alive of `lease`, if there is one to keep alive: false when it is gone.
async fn kept(client: Client, lease: Option<i64>) -> Result<bool, Error> {
    match lease {
        Some(lease) => keep_alive(client, lease).await,
        None => Ok(true),
    }
}
