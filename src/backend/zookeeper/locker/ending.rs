//! The steps that end a hold or find it lost: a renewal, a release (its end written to the
//! record with the entry's delete), a lost run's end recorded. A child of `locker`, so that the
//! locker's fields stay private to both.

use std::time::{Duration, Instant};

use zookeeper_client::{Error, Stat};

use super::ZkLocker;
use crate::backend::run_record;
use crate::backend::zookeeper::prune;
use crate::backend::zookeeper::record::Counted;
use crate::backend::zookeeper::recorder::Written;
use crate::lock::record::{RunEnding, VANISHED};
use crate::lock::{Failure, Held, Renewal};

impl ZkLocker {
    /// A renewal: the entry checked by a transaction, which proves the session held it after
    /// the renewal was sent.
    pub(super) fn renew(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let sent = Instant::now();
        let deadline = sent + timeout;
        let own = match (&self.taken, self.live_entry()) {
            (Some(_), Some(own)) => own.clone(),
            (Some(_), None) => return self.lost(deadline),
            (None, _) => return Ok(Renewal::Lost(self.found(deadline)?)),
        };
        if !self.entry_there(&own, deadline)? {
            return self.lost(deadline);
        }
        if let Some(taken) = &mut self.taken {
            taken.tenure.renewed(sent, ttl);
        }
        Ok(Renewal::Extended)
    }

    /// The taken run's end as `ended` says, written to the record (with the entry's delete,
    /// when `entry` is given); a failed write is the record's loss.
    fn record_end(
        &mut self,
        ended: &RunEnding,
        entry: Option<&str>,
        deadline: Instant,
    ) -> Result<Written, Error> {
        let Some(taken) = &self.taken else {
            return Ok(Written::Done(None));
        };
        let run = run_record::ended(
            &self.token,
            &self.holder,
            (taken.at_ms, taken.fence, self.min_interval),
            taken.tenure.held(),
            ended,
        );
        let token = self.token.clone();
        self.recorder
            .write(&mut self.conn, deadline, entry, |record| {
                // Once: a lost run whose end an earlier attempt wrote is not counted twice (one
                // the next holder marked vanished is, as lost, its vanishing taken back).
                match record.outcome_of(&token) {
                    Some(outcome) if entry.is_none() && outcome != VANISHED => Counted::default(),
                    _ => record.end(&run),
                }
            })
    }

    /// The taken run found lost (its entry gone): its end written as the lost one, unless an
    /// earlier attempt of its release wrote `ended` (its answer lost): then true, the lock was
    /// released, not lost.
    pub(super) fn record_lost(&mut self, ended: &RunEnding, deadline: Instant) -> bool {
        let lost = RunEnding {
            outcome: ended.lost.lost_outcome,
            status: ended.lost.lost_status,
            ..*ended
        };
        let released = match self.recorder.read(&mut self.conn, deadline) {
            Ok((record, _)) => record.outcome_of(&self.token) == Some(ended.outcome),
            Err(_) => false,
        };
        if !released {
            let _ = self.record_end(&lost, None, deadline);
        }
        self.taken = None;
        released
    }

    /// A release's steps before the session is closed.
    pub(super) fn give_back(
        &mut self,
        ended: &RunEnding,
        deadline: Instant,
    ) -> Result<Held, Failure> {
        let (true, Some(own)) = (self.taken.is_some(), self.live_entry().cloned()) else {
            if self.taken.is_some() {
                return self.released_or_lost(ended, deadline);
            }
            // A waiter's release: its entry (if any) goes; what holds the lock is what it
            // found.
            self.remove_entry(deadline)?;
            return self.found(deadline);
        };
        let entry = self.path(&own.name);
        match self.record_end(ended, Some(&entry), deadline) {
            Ok(Written::Done(record)) => {
                self.entry = None;
                self.taken = None;
                self.released = record;
                Ok(Held::Ours)
            }
            Ok(Written::EntryGone) | Err(Error::SessionExpired) => {
                self.entry = None;
                self.released_or_lost(ended, deadline)
            }
            // The record could not be written (another client's writes kept coming first, or
            // the server refused it): the lock is released all the same, the record's loss.
            Err(err @ (Error::BadVersion | Error::NodeExists | Error::NoNode | Error::NoAuth)) => {
                self.record_failed(err);
                let deleted = self
                    .conn
                    .run(deadline, |c| async move { c.delete(&entry, Some(0)).await });
                self.entry = None;
                match deleted {
                    Ok(()) => {
                        self.taken = None;
                        Ok(Held::Ours)
                    }
                    Err(Error::NoNode | Error::BadVersion | Error::SessionExpired) => {
                        self.released_or_lost(ended, deadline)
                    }
                    Err(err) => Err(self.conn.failure(err)),
                }
            }
            Err(err) => Err(self.conn.failure(err)),
        }
    }

    /// After a release that wrote `record`: one in [`prune::PRUNE_EVERY`], at random, removes
    /// other names of the folder unused for the record's lifetime, by the server's clock (the
    /// record's modification time). On every server: one with TTL nodes removes its own, but
    /// not the plain nodes a name got before it had them, and a client cannot tell the two
    /// apart (a TTL node's Stat reads as a plain one's). Its failure changes nothing the run
    /// did (a later release prunes instead), and is said at `-v`.
    pub(super) fn prune(&mut self, record: &Stat, deadline: Instant) {
        if !prune::sampled(uuid::Uuid::new_v4().as_u128() as u64) {
            return;
        }
        let (base, lock) = (&self.base, &self.lock);
        let pruned = prune::prune(&mut self.conn, base, lock, record.mtime, deadline);
        if let Err(err) = pruned {
            let failure = self.conn.failure(err);
            crate::report!(
                1,
                PruneFailed { "error" => failure.to_string() },
                "pruning locks unused for 40 days failed (a later release tries again): {failure}"
            );
        }
    }

    /// A holder's renewal that found its entry gone: the run recorded as lost, and what holds
    /// the lock now.
    pub(super) fn lost(&mut self, deadline: Instant) -> Result<Renewal, Failure> {
        // No release follows a lock found lost: its record says so now.
        let lost = RunEnding::of(crate::exit::Outcome::LockLost, 0);
        self.record_lost(&lost, deadline);
        Ok(Renewal::Lost(self.found(deadline)?))
    }

    /// A holder's release that found its entry gone: released by an earlier attempt whose
    /// answer was lost (the record says the run ended as `ended`), or lost.
    fn released_or_lost(&mut self, ended: &RunEnding, deadline: Instant) -> Result<Held, Failure> {
        if self.record_lost(ended, deadline) {
            return Ok(Held::Ours);
        }
        self.found(deadline)
    }
}
