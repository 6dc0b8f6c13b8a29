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
use crate::lock::record::RunEnding;
use crate::lock::{Acquire, Block, Failure, Held, Interrupt, Locker, Renewal};

impl Locker for EtcdLocker {
    fn acquire(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Acquire, Failure> {
        self.take(token, ttl, timeout)
    }

    fn wait(&mut self, _token: &str, block: Block) -> Result<bool, Failure> {
        self.wait_for(block)
    }

    fn settle(&mut self, token: &str, timeout: Duration) {
        EtcdLocker::settle(self, token, timeout)
    }

    fn interrupter(&self, _token: &str) -> Box<dyn Interrupt> {
        crate::backend::blocking::interrupter(&self.interrupt())
    }

    fn leave(&mut self, _token: &str, busy: bool, timeout: Duration) -> Result<(), Failure> {
        EtcdLocker::leave(self, busy, timeout)
    }

    fn unanswered(&self) -> bool {
        EtcdLocker::unanswered(self)
    }

    fn extend(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Renewal, Failure> {
        self.renew(token, ttl, timeout)
    }

    fn release(
        &mut self,
        token: &str,
        ended: RunEnding,
        timeout: Duration,
    ) -> Result<Held, Failure> {
        EtcdLocker::release(self, token, ended, timeout)
    }
}
