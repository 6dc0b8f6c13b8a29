//! `--min-replicas` and `--fsync` on one server: what a write that must reach replicas or the
//! append-only files sends beside it (WAIT or WAITAOF), what their answer says of it, and the
//! fresh lock given back when it did not reach them.

use std::time::{Duration, Instant};

use redis::Value;

use crate::backend::redis::durable::Durability;
use crate::backend::redis::reply::unexpected;
use crate::exit::Outcome;
use crate::lock::Failure;
use crate::lock::record::RunEnding;

use super::{Beside, SingleRedis};

impl SingleRedis {
    /// What `acked` (the reply to what `beside` sent) says of a write described as `what`:
    /// Ok(Ok(())) when it counts, or nothing was asked; Ok(Err(why)) when it does not.
    pub(super) fn judged(
        &self,
        beside: Beside,
        acked: Option<&Value>,
        what: &str,
    ) -> Result<Result<(), String>, Failure> {
        let (Beside::Durable(durability, wait), Some(acked)) = (beside, acked) else {
            return Ok(Ok(()));
        };
        let flags = durability.flags();
        durability
            .judge(acked, what, wait)
            .map(|judged| judged.map_err(|why| format!("{why} ({flags})")))
            .ok_or_else(|| unexpected(self.endpoint(), acked))
    }

    /// With `--min-replicas` or `--fsync`, what a write that must reach them sends beside it:
    /// WAIT or WAITAOF, half of `timeout` at most (the server holds the reply up to then, then
    /// sends it).
    pub(super) fn acknowledged(&self, timeout: Duration) -> Beside {
        match self.durability {
            Some((durability, wait)) => Beside::Durable(durability, wait.min(timeout / 2)),
            None => Beside::Nothing,
        }
    }

    /// `--min-replicas`, `--fsync`: wait, `wait` at most, for the lock to reach what they ask.
    /// If it does not, fail with Unacknowledged, the lock still taken: the lease thread gives
    /// it back ([`Locker::give_back_unacknowledged`]), as a take that never was when its wait
    /// tries again, else as the run's end. If the server cannot (WAITAOF without an
    /// append-only file, or before Redis 7.2), or the wait itself fails, release it and fail
    /// with Refused, which no wait retries. Either way the command never runs.
    pub(super) fn durable(
        &mut self,
        token: &str,
        durability: Durability,
        wait: Duration,
    ) -> Result<(), Failure> {
        // The server gives up after `wait`; the reply gets as long again to arrive.
        let deadline = Instant::now() + wait * 2 + Duration::from_millis(10);
        let acked = self.conn.request(deadline, |node| {
            durability.command(wait).query::<Value>(&mut node.conn)
        });
        let flags = durability.flags();
        let judged = acked.map(|acked| durability.judge(&acked, "the lock", wait));
        let why = match &judged {
            Ok(Some(Ok(()))) => return Ok(()),
            // Answered, but not reached: the replicas (or the disk) may catch up. Whether the
            // take is tried again is the wait's to say, and so is how it is given back.
            Ok(Some(Err(why))) => {
                return Err(Failure::Unacknowledged(format!("{why} ({flags})").into()));
            }
            Ok(None) => format!("an unexpected answer to {flags}'s wait"),
            // Not for a NOPERM: the user lacks WAITAOF, whatever the server can do.
            Err(refusal @ Failure::Refused(_))
                if durability.fsync && !crate::backend::redis::transport::is_denied(refusal) =>
            {
                format!(
                    "{refusal}: --fsync needs WAITAOF, so an append-only file (appendonly yes) and \
                 Redis 7.2 or later, or Valkey 8; without them, run without --fsync"
                )
            }
            Err(failure) => format!("waiting for {flags} failed ({failure})"),
        };
        // The command never ran: the run ends as one that Redis could not be used for.
        let never = RunEnding::of(Outcome::Unavailable, 0);
        let released = match self.finish(token, None, (never, false), wait * 2) {
            Ok(_) => "released it".to_owned(),
            Err(failure) => format!("releasing it failed ({failure}); it expires by itself"),
        };
        Err(Failure::Refused(format!("{why}; {released}").into()))
    }

    /// The take an Unacknowledged acquire left: a release, which wakes a waiter as any does.
    /// `ended` None: the wait tries again, and the take leaves no run in the record and
    /// counts nowhere; Some: the wait is over, and the run ends so, recorded and counted once.
    ///
    /// Not the quorum's undo (undo.lua), which wakes nobody: that waiter blocks next, and
    /// would take its own wake-up. This one sleeps its back-off instead, and leaves the
    /// registry of waiters before the wake-up is passed on (wake_next.lua), so nothing wakes
    /// it; while a waiter turned away during the take's WAIT would otherwise sit out its
    /// fallback (up to the ttl, 20 s at most) with the lock free.
    pub(super) fn give_back_unacknowledged_take(
        &mut self,
        token: &str,
        ended: Option<RunEnding>,
        timeout: Duration,
    ) -> Result<(), Failure> {
        let never = RunEnding::of(Outcome::Unavailable, 0);
        let ending = ended.map_or((never, true), |ended| (ended, false));
        self.finish(token, None, ending, timeout).map(drop)
    }
}
