//! The lock protocol on etcd, as a run's lease drives it ([`Locker`]); each method is a step of
//! `steps`, each step a few transactions of `protocol`:
//!
//! - **take**: a lease of the ttl (whole seconds, rounded up), then the client's entry
//!   `BASE/q/LEASE` put with it in a transaction only if absent. Without `--min-interval` and with
//!   nobody else queued, the same transaction records the run: one request takes the lock. The
//!   queue decides who holds it (`queue`); the fencing token is the entry's create revision.
//! - **wait**: a watch on the entry just ahead (the whole queue for a semaphore) from the
//!   revision the queue was read at, so that no release in between is missed; a watch that
//!   compaction cancelled, or a stream that failed, ends the wait and the queue is read again. The
//!   waiter's lease is kept alive meanwhile (`session`).
//! - **renew**: a keep-alive of the lease, then a read of the entry: a lease that is being revoked
//!   can still be renewed on etcd 3.4, and an entry an operator deleted is a lock lost.
//! - **release**: the entry deleted in a transaction guarded by its create revision (never a bare
//!   delete: a late retry must not remove a newer holder's), with the run's end recorded and
//!   counted in the same transaction; then the lease revoked.
//!
//! The record (`recorder`) lives on the name's record lease: it goes `RECORD_TTL` after the
//! name's last use, less up to an hour.

use std::time::Duration;

use super::steps::EtcdLocker;
use crate::backend::block::{Allowances, Block};
use crate::lock::record::RunEnding;
use crate::lock::{Acquire, Failure, Held, Interrupt, Locker, Renewal, Until};

/// How late a waiter's watch may end: it ends by the client's own timer at its hold, so these
/// only bound how long a member that froze meanwhile is waited for. They are Redis's figures
/// for its BLPOP, so that a wait ends at the same moments on every backend.
const WATCH: Allowances = Allowances {
    slack: Duration::from_secs(1),
    late: Duration::from_millis(150),
    min_hold: Duration::from_millis(1),
};

impl Locker for EtcdLocker {
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        let token = self.token().to_owned();
        self.take(&token, ttl, timeout)
    }

    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        self.wait_for(Block::until(until, WATCH))
    }

    fn settle(&mut self, timeout: Duration) {
        let token = self.token().to_owned();
        EtcdLocker::settle(self, &token, timeout)
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        crate::backend::blocking::interrupter(&self.interrupt())
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        EtcdLocker::leave(self, busy, timeout)
    }

    fn unanswered(&self) -> bool {
        EtcdLocker::unanswered(self)
    }

    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let token = self.token().to_owned();
        self.renew(&token, ttl, timeout)
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        let token = self.token().to_owned();
        EtcdLocker::release(self, &token, ended, timeout)
    }
}
