//! The lock protocol: the [`Locker`] trait the lease drives, the key layout ([`keys`]), the Lua
//! scripts ([`scripts`], one `.lua` file each), a lock on one server ([`single`]) or on a
//! quorum of independent masters ([`quorum`]), how long a lease is certainly ours
//! ([`validity`]), and who holds a lock ([`holder`]); plus the eviction-policy warning
//! ([`preflight`]).
//!
//! May use `transport` (the connection to each server and its failures) and `report`
//! (diagnostics); never `lease`, `run`, `cli` or `admin`, which use it.
//!
//! Every key a script touches is passed in KEYS and carries the `{name}` hash tag, so the same
//! scripts run unchanged on Redis Cluster.

mod holder;
mod keys;
mod preflight;
pub(crate) mod quorum;
mod scripts;
mod single;
pub(crate) mod validity;

use std::time::Duration;

pub use crate::transport::Failure;
pub(crate) use holder::{Forced, Holder, LockInfo, shell_quote};
pub(crate) use keys::Keys;
pub(crate) use single::SingleRedis;

/// The result of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// Taken; the fencing counter after this acquisition.
    Acquired { fence: i64 },
    /// Held by someone else, who has this much lease left (None: no expiry, or unknown).
    Busy { remaining: Option<Duration> },
    /// Not attempted: a run of this lock succeeded this long ago, within the min-interval.
    Skipped { ago: Duration },
}

/// What a compare-and-extend or compare-and-delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The key held our token (and was extended or deleted).
    Ours,
    /// The key was gone.
    Gone,
    /// The key held another owner's token; it was left untouched.
    Theirs,
}

/// The lock protocol as the lease and run code see it. One implementation per deployment kind
/// ([`SingleRedis`]: one server, a Sentinel service's master or the Cluster node of the
/// lock's slot; a quorum of masters composes several).
pub trait Locker: Send {
    /// A second connection on which a waiter blocks until a release wakes it.
    fn waker(&self, token: &str) -> Box<dyn Waker>;
    /// Stop waiting: leave the fair queue and, if the lock is free, pass on a wake-up this
    /// waiter may have taken.
    fn leave(&mut self, token: &str, timeout: Duration) -> Result<(), Failure>;
    /// One attempt to take the lock with `token` for `ttl`, within `timeout`.
    fn acquire(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Acquire, Failure>;
    /// Extend the lease to `ttl` from now if the lock still holds `token`.
    fn extend(&mut self, token: &str, ttl: Duration, timeout: Duration) -> Result<Held, Failure>;
    /// Delete the lock if it still holds `token`; `succeeded` records a successful run for
    /// the min-interval, if one is set.
    fn release(&mut self, token: &str, succeeded: bool, timeout: Duration)
    -> Result<Held, Failure>;
}

/// Blocks until a release wakes this waiter.
pub trait Waker: Send {
    /// Block up to `timeout`: Ok(true) when woken, Ok(false) when the time ran out.
    fn wait(&mut self, timeout: Duration) -> Result<bool, Failure>;
}

/// How long a wake-up waits in its list for a waiter to take it.
pub(crate) const WAKE_LINGER: Duration = Duration::from_secs(5);
