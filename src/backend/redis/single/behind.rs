//! A waiter blocks for a wake-up with a BLPOP on its wake lists ([`SingleRedis::wait_block`]),
//! and a plain waiter's take rides behind that BLPOP, in the same request: a release's wake-up is
//! followed in Redis by the woken waiter's take at once, and the hand-over saves the round trip
//! that a take sent after hearing the wake-up costs (0.3-0.7 ms on loopback, measured; a
//! network's round trip elsewhere). Which commands run, and in what order, is as before: a 0.1
//! host sees nothing new. Only a plain waiter without `--min-replicas` or `--fsync` (whose WAIT
//! must follow the take) does so ([`Locker::wait_then_acquire`] in the module above); a new
//! connection's first request carries the eviction-policy question instead, and its attempt
//! goes as usual.
//!
//! A waiter's wait is cut short from another thread by a [`SingleInterrupt`], here too.
//!
//! [`Locker::wait_then_acquire`]: crate::lock::Locker::wait_then_acquire

use std::time::{Duration, Instant};

use redis::Value;

use crate::backend::block::Block;
use crate::backend::redis::Keys;
use crate::backend::redis::reply::FromReply;
use crate::backend::redis::scripts::calls;
use crate::backend::redis::scripts::{self, calls::AcquireReply};
use crate::backend::redis::transport::endpoint::Endpoint;
use crate::backend::redis::waiters::{FAIR_BEAT, WAIT_SLACK, WAKE_LINGER};
use crate::lock::{Acquire, Failure, Interrupt, record};

use super::{Beside, SingleRedis};

impl SingleRedis {
    /// Block for a wake-up as `block` says ([`Locker::wait`]; a quorum's node, for what is
    /// left of the quorum's block).
    ///
    /// [`Locker::wait`]: crate::lock::Locker::wait
    pub(crate) fn wait_block(&mut self, block: Block) -> Result<bool, Failure> {
        let limit = Instant::now() + block.limit;
        // A --fair waiter (or an exclusive one queued behind shared holders) comes back every
        // FAIR_BEAT to refresh its place (its attempt does), so that a waiter that died is
        // forgotten within FAIR_ENTRY_LIFETIME.
        let (hold, limit) = if self.fair || self.queued {
            let hold = block.hold.min(FAIR_BEAT);
            (hold, limit.min(Instant::now() + hold + WAIT_SLACK))
        } else {
            (block.hold, limit)
        };
        let blpop = self.blpop(&self.token, hold);
        let reply = self
            .conn
            .request(limit, |node| blpop.query::<Value>(&mut node.conn))?;
        self.woken(reply)
    }

    /// Block for a wake-up as [`Block`] says, the plain take of `token` for `ttl` behind it:
    /// the block's answer, and the take's when it came and can be acted on.
    pub(super) fn take_behind_the_block(
        &mut self,
        token: &str,
        block: Block,
        ttl: Duration,
    ) -> (Result<bool, Failure>, Option<Acquire>) {
        let limit = Instant::now() + block.limit;
        let blpop = self.blpop(token, block.hold);
        let holder = self.holder.clone();
        let run = record::started_json(token, &holder);
        let take = self.take(token, ttl, &holder, &run);
        let keys = &self.keys;
        // The take's answer, kept even when the BLPOP's is an error (a NOPERM for BLPOP alone
        // says nothing of the take, which ran).
        let mut taken = None;
        let mut sent = false;
        let reply = self.conn.request(limit, |node| {
            taken = None;
            sent = !node.fresh;
            if node.fresh {
                return blpop.query::<Value>(&mut node.conn);
            }
            let (woken, take) = scripts::send_behind(&mut node.conn, keys, &take, &blpop)?;
            taken = Some(take);
            match woken {
                Value::ServerError(e) => Err(e.into()),
                woken => Ok(woken),
            }
        });
        let woken = reply.and_then(|reply| self.woken(reply));
        // Cut off before the take's answer was read: it may have taken the lock.
        if sent && taken.is_none() && self.conn.unanswered() {
            self.acquire_unanswered = true;
        }
        // An error reply took nothing (guard.lua); the attempt made again says what it was.
        let Some(reply) = taken.and_then(Result::ok) else {
            return (woken, None);
        };
        let Some(reply) = AcquireReply::from_reply(&reply) else {
            // Carried out, but what it did cannot be read: as good as no answer.
            self.acquire_unanswered = true;
            return (woken, None);
        };
        let acquired = match reply {
            // A key the plain take cannot take: the next attempt goes to the feature acquire.
            AcquireReply::Several(_) => {
                self.several = true;
                None
            }
            reply => {
                self.acquire_unanswered = false;
                self.answered(token, reply, ttl).ok()
            }
        };
        (woken, acquired)
    }
}

/// Interrupts a [`SingleRedis`] waiter's wait from another thread, over a connection opened
/// for that one request (see [`Interrupt`]): none is kept while waiting. A marker is pushed
/// through the server onto the waiter's own wake list, since the sync connection a BLPOP blocks
/// on cannot be interrupted from outside, and the least privileged user must not need CLIENT
/// UNBLOCK.
pub(super) struct SingleInterrupt {
    pub endpoint: Endpoint,
    pub keys: Keys,
    pub token: String,
}

impl Interrupt for SingleInterrupt {
    fn interrupt(&self, timeout: Duration) -> Result<(), Failure> {
        let mut once = SingleRedis::new(
            self.endpoint.clone(),
            self.keys.clone(),
            false,
            Duration::ZERO,
        );
        let interrupt = calls::Interrupt {
            token: &self.token,
            linger: WAKE_LINGER,
        };
        once.call(&interrupt, timeout, Beside::Nothing).map(drop)
    }
}
