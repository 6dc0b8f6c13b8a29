//! What a quorum asks of each of its nodes beyond the lock's own steps: undo a partial
//! acquire, read and raise the fencing counter, and take the quorum's token as the run's.

use std::time::Duration;

use crate::backend::redis::record::Kept;
use crate::backend::redis::scripts::calls;
use crate::lock::Failure;

use super::{Beside, SingleRedis};

impl SingleRedis {
    /// Undo a partial quorum acquire on this node, waking nobody. `waiting`: the attempt ended
    /// turned away with this ttl, and the waiter is recorded as waiting here too (it may block
    /// on this node, whose releases must then wake it).
    pub fn undo(&mut self, waiting: Option<Duration>, timeout: Duration) -> Result<(), Failure> {
        let token: &str = &self.token.clone();
        let lifetime = waiting.map(|ttl| self.waiting_lifetime(ttl));
        self.waited |= lifetime.is_some();
        let slot = self.slot();
        let undo = calls::Undo {
            token,
            slot: &slot,
            lifetime,
            record: Kept::DEFAULT,
        };
        self.call(&undo, timeout, Beside::Nothing).map(drop)
    }

    /// The fencing counter as it is (a quorum's read phase).
    pub fn read_fence(&mut self, timeout: Duration) -> Result<i64, Failure> {
        self.call(&calls::FenceRead {}, timeout, Beside::Nothing)
            .map(|(fence, _)| fence)
    }

    /// Raise the fencing counter to at least `to` (a quorum's write-back phase); the counter after.
    /// With `--min-replicas` or `--fsync`, only once the raise reached what they ask, as the
    /// acquire's own is: a failover or a restart of this node must not lower the counter again.
    pub fn raise_fence(&mut self, to: i64, timeout: Duration) -> Result<i64, Failure> {
        let beside = self.acknowledged(timeout);
        let (fence, acked) = self.call(&calls::FenceRaise { at_least: to }, timeout, beside)?;
        if let Err(why) = self.judged(beside, acked.as_ref(), "the fencing counter")? {
            return Err(Failure::Unreachable(
                format!("Redis at {}: {why}", self.endpoint()).into(),
            ));
        }
        Ok(fence)
    }

    /// The run this client took holds `fence` as its fencing token (a quorum's, raised past
    /// every node's counter): its release records that one.
    pub fn fenced_as(&mut self, fence: i64) {
        if let Some(taken) = &mut self.taken {
            taken.run.fence = fence;
        }
    }
}
