//! The steps that end a run's hold or its place: a waiter giving up its place, a renewal, a
//! release, and what they share (a lost take dropped, a place given up, the lease revoked, the
//! run recorded as lost). A child of `steps`, so that the locker's fields stay private to both.

use std::time::{Duration, Instant};

use super::*;

impl EtcdLocker {
    /// The run turned away gives up its place, counted as busy if it was.
    pub(in crate::backend::etcd) fn leave(
        &mut self,
        busy: bool,
        timeout: Duration,
    ) -> Result<(), Failure> {
        let deadline = Instant::now() + timeout;
        // Counted even when giving the place up had no answer in time (the lease ends it then).
        let left = self.give_up_place(deadline).map(drop);
        if busy {
            self.recorder.count(&mut self.conn, "busy", true, deadline);
        }
        self.recorder.keep(&mut self.conn, deadline);
        left
    }

    /// A renewal: a keep-alive of the lease, then a read of the entry: a lease that is being
    /// revoked can still be renewed on etcd 3.4, and an entry an operator deleted is a lock lost.
    pub(in crate::backend::etcd) fn renew(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Renewal, Failure> {
        let sent = Instant::now();
        let deadline = sent + timeout;
        let (Some(lease), Some(rev)) = (self.lease, self.taken.as_ref().map(|t| t.fence)) else {
            // Never taken (a waiter's place holds nothing for it until its take), or given back.
            return Ok(Renewal::Lost(self.found(self.entry, deadline)?));
        };
        let alive = self
            .conn
            .run(deadline, move |client| keep_alive(client, lease))?;
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
            let found = self.found(None, deadline.max(Instant::now() + timeout));
            return Ok(Renewal::Lost(found.unwrap_or(Held::Gone)));
        }
        if let Some(taken) = &mut self.taken {
            taken.tenure.renewed(sent, ttl);
        }
        Ok(Renewal::Extended)
    }

    /// A release ([`protocol::release`]), then the lease revoked. A run whose take had no
    /// answer revokes its lease: whatever it put goes with it.
    pub(in crate::backend::etcd) fn release(
        &mut self,
        token: &str,
        ended: RunEnding,
        timeout: Duration,
    ) -> Result<Held, Failure> {
        let deadline = Instant::now() + timeout;
        let Some(lease) = self.lease else {
            return self.found(None, deadline);
        };
        let Some(taken) = &self.taken else {
            if self.unanswered {
                return self.drop_unanswered(lease, deadline);
            }
            // A waiter's place, given up: it held nothing.
            let left = self.give_up_place(deadline)?;
            return Ok(queue::found(&left, None));
        };
        let rev = taken.fence;
        let run = record::ended(
            token,
            &self.holder,
            (taken.at_ms, taken.fence, self.min_interval),
            taken.tenure.held(),
            &ended,
        );
        let (outcome, succeeded) = (ended.outcome.to_owned(), ended.succeeded());
        let released = self
            .recorder
            .send(&mut self.conn, deadline, |keys, record| {
                let end = End {
                    run: run.clone(),
                    outcome: outcome.clone(),
                    succeeded,
                    record,
                };
                protocol::release(keys, lease, rev, end)
            })?;
        let held = if released.succeeded() || self.record_lost(token, ended, deadline) {
            // Ours, or an earlier attempt of this release went through; its answer was lost.
            Held::Ours
        } else {
            queue::found(&queue_of(&released), None)
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

    /// An attempt's answer was lost: whatever it put goes with the lease.
    fn drop_unanswered(&mut self, lease: i64, deadline: Instant) -> Result<Held, Failure> {
        let entry = self.keys.entry(lease);
        let had = self
            .conn
            .run(deadline, move |mut client| {
                let entry = entry.clone();
                async move { client.get(entry, None).await }
            })
            .map(|r| !r.kvs().is_empty())
            .unwrap_or(false);
        self.revoke(lease, deadline)?;
        self.lease = None;
        Ok(if had { Held::Ours } else { Held::Gone })
    }

    /// Our entry deleted (if it still holds our revision) and our lease revoked: the run gives
    /// up its place, holding nothing. The queue as the give-up left it (empty: no place).
    pub(super) fn give_up_place(&mut self, deadline: Instant) -> Result<Vec<Entry>, Failure> {
        let Some(lease) = self.lease.take() else {
            return Ok(Vec::new());
        };
        let mut left = Vec::new();
        if let Some(rev) = self.entry.take() {
            let step = protocol::give_up(&self.keys, lease, rev);
            let read = send_step(&mut self.conn, &step, deadline)?;
            left = read.map(|r| queue_of(&r)).unwrap_or_default();
        }
        self.revoke(lease, deadline)?;
        Ok(left)
    }

    /// What a client that does not hold the lock finds ([`queue::found`]), from one read of
    /// the queue; `ours`: its own place, which holds nothing for it.
    fn found(&mut self, ours: Option<i64>, deadline: Instant) -> Result<Held, Failure> {
        let read = send_step(&mut self.conn, &protocol::look(&self.keys), deadline)?;
        Ok(read.map_or(Held::Gone, |r| queue::found(&queue_of(&r), ours)))
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

    /// Record the taken run's end as lost (its lease or entry found gone), if it has no end yet.
    ///
    /// True when the run's record already ends as `ended` says: an earlier attempt of this
    /// release went through though its answer was lost, and the lock was released, not lost.
    fn record_lost(&mut self, token: &str, ended: RunEnding, deadline: Instant) -> bool {
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
        self.recorder.lost(
            &mut self.conn,
            lease,
            value,
            (lost.outcome, ended.outcome),
            deadline,
        )
    }
}
