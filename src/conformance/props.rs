//! The model beside a real backend: one sequence of operations by a few holders of one lock,
//! applied to both, each answer compared. Tokens are compared by their order (each backend
//! numbers them its own way); everything else by what it is. The random sequences come from the
//! integration test (proptest is a test dependency); what an operation is and how answers
//! compare is here, beside the cases.

use std::fmt;

use super::Subject;
use crate::exit::Outcome;
use crate::lock::{Acquire, Forced, Held, Kind, Locker, Renewal, RunEnding};

/// One operation of a sequence, by holder index (taken modulo the holders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// One attempt by a run that does not wait: turned away, it leaves (a place left in a
    /// queue would make a lock that is first come, first served differ from one that is not).
    Take(usize),
    Renew(usize),
    /// Release, as a success; the holder takes a new token for its next run.
    Release(usize),
    /// Forced release with no token named.
    Force,
    /// Let this many fifths of twice the lease pass (0.4 of a lease each), so that a step
    /// never lands near a lease's end, where a real server's answer depends on its latency.
    Step(u8),
}

/// What one operation answered, in words both sides share.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// Taken; whether the token rose over the last one seen (false: the same as this
    /// holder's, a retry of its own take).
    Acquired {
        rose: bool,
    },
    Busy,
    Mismatch,
    Skipped,
    Renewal(Renewal),
    Released(Held),
    Forced(&'static str),
    Stepped,
    Failed,
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// One side: its holders' lockers (each bound to its run's token) and kinds, the last token
/// seen.
struct Side<'a> {
    subject: &'a Subject,
    /// The lock's name as this subject's cases name it, and under the subject's name.
    case_key: String,
    key: String,
    lockers: Vec<(Box<dyn Locker>, Kind)>,
    last_fence: Option<i64>,
}

impl<'a> Side<'a> {
    fn new(subject: &'a Subject, key: &str, kinds: &[Kind]) -> Self {
        let lockers = kinds
            .iter()
            .map(|kind| {
                let locker = subject.backend.locker(&subject.spec(key, *kind));
                (locker, *kind)
            })
            .collect();
        Side {
            subject,
            case_key: key.to_owned(),
            key: format!("{}-{key}", subject.name),
            lockers,
            last_fence: None,
        }
    }

    fn apply(&mut self, op: Op) -> Answer {
        let (ttl, timeout) = (self.subject.lease, self.subject.timeout);
        let n = self.lockers.len();
        match op {
            Op::Take(i) => {
                let (locker, _) = &mut self.lockers[i % n];
                match locker.acquire(ttl, timeout) {
                    Ok(Acquire::Acquired { fence }) => {
                        // As a run does beside its command's start.
                        locker.settle(timeout);
                        let rose = self.last_fence.is_none_or(|last| fence > last);
                        self.last_fence = Some(self.last_fence.map_or(fence, |l| l.max(fence)));
                        Answer::Acquired { rose }
                    }
                    Ok(Acquire::Busy { .. }) => match locker.leave(false, timeout) {
                        Ok(()) => Answer::Busy,
                        Err(_) => Answer::Failed,
                    },
                    Ok(Acquire::Mismatch { .. }) => Answer::Mismatch,
                    Ok(Acquire::Skipped { .. }) => Answer::Skipped,
                    Ok(Acquire::Misconfigured(_)) | Err(_) => Answer::Failed,
                }
            }
            Op::Renew(i) => {
                let (locker, _) = &mut self.lockers[i % n];
                locker
                    .extend(ttl, timeout)
                    .map_or(Answer::Failed, Answer::Renewal)
            }
            Op::Release(i) => {
                let (locker, kind) = &mut self.lockers[i % n];
                let ended = RunEnding::of(Outcome::Exited(0), 75);
                let answer = locker
                    .release(ended, timeout)
                    .map_or(Answer::Failed, Answer::Released);
                // The holder's next run: a new token, so a new locker.
                *locker = self
                    .subject
                    .backend
                    .locker(&self.subject.spec(&self.case_key, *kind));
                answer
            }
            Op::Force => {
                let forced = self
                    .subject
                    .backend
                    .node(0)
                    .force_release(&self.key, None, timeout);
                let fence = match &forced {
                    Ok(Forced::Removed { fence, .. }) => Some(*fence),
                    _ => None,
                };
                if let Some(fence) = fence {
                    self.last_fence = Some(self.last_fence.map_or(fence, |l| l.max(fence)));
                }
                Answer::Forced(match forced {
                    Ok(Forced::Free { .. }) => "free",
                    Ok(Forced::Removed { .. }) => "removed",
                    Ok(Forced::Several { .. }) => "several",
                    Ok(_) => "other",
                    Err(_) => "failed",
                })
            }
            Op::Step(k) => {
                self.subject
                    .service
                    .advance(self.subject.lease * 2 * u32::from(k) / 5);
                Answer::Stepped
            }
        }
    }
}

/// Apply `ops` by holders of `kinds` to lock `key` on the model and on `real`; Err says where
/// their answers first differ, with the sequence up to there.
pub fn compare(
    model: &Subject,
    real: &Subject,
    key: &str,
    kinds: &[Kind],
    ops: &[Op],
) -> Result<(), String> {
    let (mut m, mut r) = (Side::new(model, key, kinds), Side::new(real, key, kinds));
    for (at, op) in ops.iter().enumerate() {
        let (want, got) = (m.apply(*op), r.apply(*op));
        if want != got {
            return Err(format!(
                "holders {kinds:?}, after {:?}: {op:?} answered {got} where the model answers {want}",
                &ops[..at]
            ));
        }
    }
    // Nothing left held for the next case's time.
    for (locker, _) in m.lockers.iter_mut().chain(r.lockers.iter_mut()) {
        let _ = locker.release(RunEnding::of(Outcome::Exited(0), 75), model.timeout);
    }
    Ok(())
}
