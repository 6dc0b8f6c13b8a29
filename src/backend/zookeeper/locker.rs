//! The lock protocol on ZooKeeper, as a run's lease drives it ([`Locker`]): the standard
//! recipe (Curator's `InterProcessMutex`, the ZooKeeper documentation's "Locks").
//!
//! - **take**: the client's entry, an ephemeral sequential node `KIND-TOKEN-` under the lock's
//!   node (a container, made with its folders when missing), then the children read: the queue
//!   (`backend::queue`) decides who holds. The fencing token is the entry's creation zxid,
//!   which rises across the ensemble's whole history, leader changes included.
//! - **wait**: a watch on the entry just ahead (the whole queue for a semaphore): one waiter
//!   wakes per release, and reads the children again.
//! - **renew**: a transaction that only checks the entry (a `multi` of one check): it goes
//!   through the leader and a quorum, so an answer proves that the session held the entry when
//!   it committed, after the renewal was sent, and the session lives a session timeout from
//!   when the leader heard it. A read could be answered by a member cut off from the leader.
//! - **release**: the entry deleted, guarded by its version, in one transaction with the run's
//!   end written to the record (`recorder`); one release in 16 whose record the server keeps
//!   for ever (no TTL nodes) then removes other names unused for the record's lifetime
//!   (`prune`); then the session closed.
//! - **the record**: a run that took the lock is written to it beside the command's start
//!   (`settle`), the runs before it that vanished marked; a busy or skipped run counted.
//!
//! The session's timeout is the lease: a session the server gives shorter than `--ttl` is
//! refused, since the lease would outlive it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use zookeeper_client::{Acls, Error};

mod ending;
mod entry;

use super::client::Conn;
use super::names;
use super::recorder::Recorder;
use super::url::Base;
use crate::backend::block::{Allowances, Block};
use crate::backend::queue::{self, Place, Watch};
use crate::backend::run_record;
use crate::lock::record::{RunEnding, Tenure};
use crate::lock::{
    Acquire, Failure, Held, Holder, Interrupt, Kind, Locker, Renewal, RunSpec, Until,
};

/// How late a waiter's watch may end: the wait ends by the client's own timer at its hold, so
/// these only bound how long a member that froze meanwhile is waited for. Redis's figures for
/// its BLPOP, as on etcd, so that a wait ends at the same moments on every backend.
const WATCH: Allowances = Allowances {
    slack: Duration::from_secs(1),
    late: Duration::from_millis(150),
    min_hold: Duration::from_millis(1),
};

/// The least time a count is given ([`ZkLocker::count`]).
const COUNT_TIME: Duration = Duration::from_secs(1);

/// A run's lock on ZooKeeper.
pub(crate) struct ZkLocker {
    conn: Conn,
    /// Where the locks of the run's prefix are: the folder a prune looks in.
    base: Base,
    /// The lock's node, under the chroot.
    lock: String,
    token: String,
    kind: Kind,
    /// `--fair`: a turned-away run says when the lock is free but promised to a waiter ahead.
    fair: bool,
    holder: Holder,
    /// The lease asked for: the session's timeout, shown by `status` as the longest the lock
    /// outlives its holder once that goes silent.
    ttl: Duration,
    /// Whom the nodes redlock makes let in: everyone, or only the URL's user.
    acls: Acls<'static>,
    /// The client's entry, once made.
    entry: Option<Own>,
    /// What a waiter watches, after an attempt that found it behind.
    watch: Option<Watch>,
    /// The lock is the run's (its entry held it when last read): when, and for how long.
    taken: Option<Taken>,
    min_interval: Option<Duration>,
    recorder: Recorder,
    /// The record's node as the release wrote it, for the prune after it.
    released: Option<zookeeper_client::Stat>,
    /// The tokens queued when the run took the lock, for `settle` to tell a run that vanished.
    seen: Option<Vec<String>>,
    /// A create went unanswered and nothing was answered since: the entry may be there.
    unanswered: bool,
    /// A failed record write was said ([`ZkLocker::record_failed`]).
    record_said: bool,
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

/// The client's entry.
#[derive(Debug, Clone)]
struct Own {
    /// Its name, a child of the lock's node.
    name: String,
    /// Its place in the queue.
    seq: i64,
    /// Its creation zxid: the fencing token when it holds.
    czxid: i64,
    /// The session it was made in ([`Conn::session`]): it is gone when that one is.
    session: u64,
    /// When its create was answered; None for one found after a create went unanswered.
    made: Option<Instant>,
}

impl ZkLocker {
    pub(crate) fn new(conn: Conn, base: Base, acls: Acls<'static>, run: &RunSpec) -> Self {
        let lock = base.lock(&run.key);
        Self {
            conn,
            base,
            recorder: Recorder::new(&lock, acls),
            released: None,
            lock,
            token: run.token.clone(),
            kind: run.kind,
            fair: run.fair,
            holder: run.holder.clone(),
            ttl: run.ttl,
            acls,
            entry: None,
            watch: None,
            taken: None,
            min_interval: run.min_interval,
            seen: None,
            unanswered: false,
            record_said: false,
            interrupt: Arc::new(Notify::new()),
        }
    }

    fn path(&self, child: &str) -> String {
        format!("{}/{child}", self.lock)
    }

    /// The entry, if it is still there as far as this client knows: made in the session that
    /// is open now.
    fn live_entry(&self) -> Option<&Own> {
        self.entry
            .as_ref()
            .filter(|own| own.session == self.conn.session())
    }

    /// The entry's data: the holder's details and how it holds the lock, for `status`.
    fn entry_value(&self) -> Vec<u8> {
        serde_json::json!({
            "token": self.token,
            "host": self.holder.host,
            "pid": self.holder.pid,
            "command": self.holder.command,
            "started": self.holder.started,
            "kind": self.kind.stored(),
            "ttl_ms": self.ttl.as_millis() as u64,
        })
        .to_string()
        .into_bytes()
    }

    /// The lock's children (none when its node is not there).
    fn children(&mut self, deadline: Instant) -> Result<Vec<String>, Failure> {
        let lock = self.lock.clone();
        match self
            .conn
            .run(deadline, |c| async move { c.list_children(&lock).await })
        {
            Ok(children) => Ok(children),
            Err(Error::NoNode) => Ok(Vec::new()),
            Err(err) => Err(self.conn.failure(err)),
        }
    }

    /// Whether a `--fair` run turned away was turned away from a lock that is free but promised
    /// to the waiters ahead: a shared run is behind a waiting exclusive one; an exclusive one
    /// finds a head of the queue whose run has not started (a waiter not yet woken).
    fn promised(&mut self, children: &[String], deadline: Instant) -> bool {
        let entries = names::entries(children);
        let holders = queue::holders(&entries);
        if self.kind == Kind::Shared {
            return holders.iter().all(|e| e.kind == Kind::Shared.stored());
        }
        let Ok((record, _)) = self.recorder.read(&mut self.conn, deadline) else {
            return false;
        };
        !holders
            .iter()
            .all(|e| names::parse(&e.key).is_some_and(|named| record.running(&named.token)))
    }

    /// How long ago a run succeeded, when that is within the `--min-interval` it ran with
    /// (and this run has one): the run is skipped.
    fn skipped(&mut self, deadline: Instant) -> Result<Option<Duration>, Failure> {
        let Some(interval) = self.min_interval else {
            return Ok(None);
        };
        let (record, _) = self
            .recorder
            .read(&mut self.conn, deadline)
            .map_err(|e| self.conn.failure(e))?;
        Ok(run_record::success_ago(&record.last_success()).filter(|ago| *ago < interval))
    }

    /// The entry given up, if there is one in the session open now.
    fn remove_entry(&mut self, deadline: Instant) -> Result<(), Failure> {
        let Some(own) = self.live_entry().cloned() else {
            self.entry = None;
            return Ok(());
        };
        let path = self.path(&own.name);
        let deleted = self
            .conn
            .run(deadline, |c| async move { c.delete(&path, Some(0)).await });
        self.entry = None;
        self.taken = None;
        match deleted {
            Ok(()) | Err(Error::NoNode) => Ok(()),
            Err(err) => Err(self.conn.failure(err)),
        }
    }

    /// A busy or skipped run counted in the record, given a second at least whatever the step
    /// it closes has left (a run turned away without `--wait` has 100 ms for its whole leave):
    /// a count is one request, as on etcd.
    fn count(&mut self, label: &str, deadline: Instant) {
        let deadline = deadline.max(Instant::now() + COUNT_TIME);
        let _ = self.recorder.count(&mut self.conn, deadline, label);
    }

    /// Whether the client's entry is there, by a transaction that only checks it (through the
    /// leader and a quorum, unlike a read).
    fn entry_there(&mut self, own: &Own, deadline: Instant) -> Result<bool, Failure> {
        let path = self.path(&own.name);
        let checked = self.conn.run(deadline, |c| async move {
            let mut check = c.new_multi_writer();
            check.add_check_version(&path, 0)?;
            check.commit().await.map_err(Error::from)
        });
        match checked {
            Ok(_) => Ok(true),
            Err(Error::NoNode | Error::BadVersion | Error::SessionExpired) => Ok(false),
            Err(err) => Err(self.conn.failure(err)),
        }
    }

    /// A record write that failed said, once per run: the lock is unaffected, but the run is
    /// missing from what `history`, `status` and `check` read.
    fn record_failed(&mut self, err: Error) {
        // No answer says nothing of the write (it may have been made), and the renewals say
        // what an ensemble gone silent means for the lock.
        let unanswered = matches!(
            err,
            Error::Timeout | Error::ConnectionLoss | Error::SessionExpired | Error::Custom(_)
        );
        if unanswered || std::mem::replace(&mut self.record_said, true) {
            return;
        }
        let failure = self.conn.failure(err);
        crate::report!(
            0,
            RecordFailed { "error" => failure.to_string() },
            "warning: the run's record could not be written ({failure}); `redlock history`, \
             `status` and `check` do not see this run"
        );
    }

    /// What a renewal or release that found no entry of its own found instead.
    fn found(&mut self, deadline: Instant) -> Result<Held, Failure> {
        let children = self.children(deadline)?;
        Ok(queue::found(&names::entries(&children), None))
    }
}

impl Locker for ZkLocker {
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        let called = Instant::now();
        let deadline = called + timeout;
        // A run within the min-interval is skipped wherever it would queue; one that waited
        // is looked at again once it holds, in case a run succeeded meanwhile.
        if self.live_entry().is_none()
            && let Some(ago) = self.skipped(deadline)?
        {
            self.count(crate::exit::Outcome::Skipped.label(), deadline);
            return Ok(Acquire::Skipped { ago });
        }
        let (mut own, mut children) = self.join(ttl, deadline)?;
        if !children.contains(&own.name) {
            // Its entry was deleted (`release --force` sends the waiters to the back, and takes
            // the lock from its holder): a new one, at the back.
            self.entry = None;
            self.taken = None;
            (own, children) = self.join(ttl, deadline)?;
        }
        match queue::place(&names::entries(&children), own.seq, self.kind) {
            Place::Holds => {
                self.watch = None;
                // The read may come from a member a little behind the leader: it shows every
                // entry ahead that is still there (none comes back once deleted), but may still
                // show this client's own entry after its session ended on the leader (a waiter
                // whose member is cut off from it) or an operator deleted it. A check of the
                // entry, a write, proves it is there when the lock is said to be taken. Not
                // for an entry whose create this call had answered: that write, a round trip
                // ago, proved the session; an operator's delete since is what a renewal finds,
                // as one just after the check would be. It saves a write (an fsync) per run.
                let made_now = own.made.is_some_and(|made| made >= called);
                if !made_now && !self.entry_there(&own, deadline)? {
                    self.entry = None;
                    return Ok(Acquire::Busy {
                        remaining: None,
                        queued: false,
                    });
                }
                if let Some(ago) = self.skipped(deadline)? {
                    self.remove_entry(deadline)?;
                    self.count(crate::exit::Outcome::Skipped.label(), deadline);
                    return Ok(Acquire::Skipped { ago });
                }
                self.taken = Some(Taken {
                    at_ms: run_record::now_ms(),
                    fence: own.czxid,
                    tenure: Tenure::new(ttl),
                });
                let live = children
                    .iter()
                    .filter_map(|c| names::parse(c))
                    .map(|n| n.token);
                self.seen = Some(live.collect());
                Ok(Acquire::Acquired { fence: own.czxid })
            }
            Place::Behind(watch) => {
                self.watch = Some(watch);
                let queued = self.fair && self.promised(&children, deadline);
                Ok(Acquire::Busy {
                    remaining: None,
                    queued,
                })
            }
            Place::Mismatch(found) => {
                self.remove_entry(deadline)?;
                Ok(Acquire::Mismatch { found })
            }
        }
    }

    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        let block = Block::until(until, WATCH);
        let (Some(watch), Some(own)) = (self.watch.clone(), self.live_entry()) else {
            return Ok(true);
        };
        let (seq, kind) = (own.seq, self.kind);
        let limit = Instant::now() + block.limit;
        let lock = self.lock.clone();
        let interrupt = Arc::clone(&self.interrupt);
        let woken = self.conn.wait(limit, |c| async move {
            // The watch is set by a read: what it read may have changed since the take's look
            // (the entry ahead gone, a place freed), and then the queue is read again at once.
            let watcher = match watch {
                Watch::Key(key) => match c.check_and_watch_stat(&format!("{lock}/{key}")).await? {
                    (None, _) => return Ok(true),
                    (Some(_), watcher) => watcher,
                },
                Watch::Queue => {
                    let (children, _, watcher) = c.get_and_watch_children(&lock).await?;
                    let place = queue::place(&names::entries(&children), seq, kind);
                    if place != Place::Behind(Watch::Queue) {
                        return Ok(true);
                    }
                    watcher
                }
            };
            tokio::select! {
                _ = watcher.changed() => Ok(true),
                _ = interrupt.notified() => Ok(true),
                _ = tokio::time::sleep(block.hold) => Ok(false),
            }
        });
        match woken {
            Ok(woken) => Ok(woken),
            Err(Error::NoNode) => Ok(true),
            Err(err) => Err(self.conn.failure(err)),
        }
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        crate::backend::blocking::interrupter(&self.interrupt)
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let deadline = Instant::now() + timeout;
        let left = self.remove_entry(deadline);
        if busy {
            self.count(crate::exit::Outcome::Busy.label(), deadline);
        }
        self.conn.close(deadline);
        left
    }

    fn unanswered(&self) -> bool {
        self.unanswered
    }

    fn settle(&mut self, timeout: Duration) {
        let (Some(seen), Some(taken)) = (self.seen.take(), &self.taken) else {
            return;
        };
        let deadline = Instant::now() + timeout;
        let run = run_record::started(&self.token, &self.holder, taken.at_ms, Some(taken.fence));
        let fence = taken.fence;
        let written = self
            .recorder
            .write(&mut self.conn, deadline, None, |record| {
                let live: Vec<&str> = seen.iter().map(String::as_str).collect();
                let vanished = record.vanish(fence, &live);
                record.start(&run);
                vanished
            });
        if let Err(err) = written {
            self.record_failed(err);
        }
    }

    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        self.renew(ttl, timeout)
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        let deadline = Instant::now() + timeout;
        let held = self.give_back(&ended, deadline);
        if let Some(record) = self.released.take() {
            self.prune(&record, deadline);
        }
        // On every path, a failed release's too: the close deletes the run's entry at once if
        // the server hears it, rather than a session timeout later.
        self.conn.close(deadline);
        held
    }
}
