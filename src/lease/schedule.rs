//! The lease thread's decisions, apart from doing them: while waiting for the lock, what follows
//! each attempt (take it, give up, block for a release, back off from a server that does not
//! answer or whose replicas did not acknowledge the take) and each block, and their time limits, none past the wait; while holding it, when the next renewal is due, its
//! time limit, and where the lease ends (only renewals that counted move it). Pure functions of
//! what happened and the time, tested below with made-up moments.

use std::time::Duration;

use crate::clock::Moment;
use crate::lease::Wait;
use crate::lease::timing::{
    acquire_timeout, deadline, renew_interval, renew_timeout, retry_interval, unreachable_backoff,
    wake_wait,
};
use crate::lock::{Acquire, Failure, HeldAs, Until};

/// The shortest time limit an attempt gets within a wait that is nearly over.
pub const MIN_ATTEMPT: Duration = Duration::from_millis(100);

/// Where the wait for the lock stands.
#[derive(Debug, Clone)]
pub struct Waiting {
    ttl: Duration,
    started: Moment,
    /// When the wait ends (None: `--wait forever`).
    give_up: Option<Moment>,
    attempts: u32,
    /// Attempts in a row that found no answer (0: the last one had an answer).
    unreachable: u32,
    /// Attempts in a row whose take too few replicas acknowledged (0: the last one's did, or
    /// it took nothing).
    unacknowledged: u32,
    /// An attempt found the lock busy: this waiter is registered as one, and may have taken a
    /// wake-up, so leaving must tell the server.
    busy_seen: bool,
    /// When the last wait for a release was to end.
    held_until: Option<Moment>,
}

/// What follows an attempt to take the lock.
#[derive(Debug)]
pub enum Next {
    /// The lock is ours, with this fencing token.
    Acquired { fence: i64 },
    /// The wait is over without the lock: `leave` the waiters first if this one registered.
    Over { ending: Ending, leave: bool },
    /// Block until a release wakes this waiter, as this says; then [`Waiting::after_block`].
    WaitForRelease(Until),
    /// The server did not answer, or too few replicas acknowledged the take (given back): sleep
    /// `pause`, then try again; `first`: the first such failure in a row.
    Retry {
        failure: Failure,
        pause: Duration,
        first: bool,
    },
}

/// How a wait for the lock ended without it.
#[derive(Debug)]
pub enum Ending {
    /// Busy to the end (`queued`: free, but promised to `--fair` waiters ahead).
    Busy { queued: bool },
    /// `--min-interval`: a run succeeded `ago`.
    Skipped { ago: Duration },
    /// Its holders use the lock otherwise, or its key is not redlock's.
    Mismatch { found: HeldAs },
    /// The servers given cannot hold this lock as asked (why).
    Misconfigured(String),
    /// The server could not be used.
    Failed(Failure),
}

impl Waiting {
    pub fn new(started: Moment, wait: Wait, ttl: Duration) -> Self {
        let give_up = match wait {
            Wait::Up(d) => Some(started + d),
            Wait::Forever => None,
        };
        Self {
            ttl,
            started,
            give_up,
            attempts: 0,
            unreachable: 0,
            unacknowledged: 0,
            busy_seen: false,
            held_until: None,
        }
    }

    /// How long the wait has lasted.
    pub fn waited(&self, now: Moment) -> Duration {
        now.saturating_since(self.started)
    }

    /// What is left of the wait (`Duration::MAX`: forever).
    pub fn left(&self, now: Moment) -> Duration {
        self.give_up
            .map_or(Duration::MAX, |g| g.saturating_since(now))
    }

    /// Whether this waiter may have registered as one (and must leave when it stops).
    pub fn registered(&self) -> bool {
        self.busy_seen
    }

    /// The time limit of the next attempt (or of leaving the waiters): its whole limit for the
    /// first attempt, as without a wait; after it, no longer than the wait that is left (a
    /// silent server must not keep a `--wait 2s` waiting 5 s), but at least [`MIN_ATTEMPT`],
    /// which is also all that the last attempt, after the wait ran out, gets.
    pub fn timeout(&self, now: Moment) -> Duration {
        let whole = acquire_timeout(self.ttl);
        match self.left(now) {
            _ if self.attempts == 0 => whole,
            left => whole.min(left.max(MIN_ATTEMPT)),
        }
    }

    /// What follows the attempt that ended at `now` with `result`. `random` is uniform in
    /// [0, 1), for jitter.
    pub fn after(&mut self, result: Result<Acquire, Failure>, now: Moment, random: f64) -> Next {
        self.attempts = self.attempts.saturating_add(1);
        let left = self.left(now);
        let over = |ending, leave| Next::Over { ending, leave };
        match result {
            Ok(Acquire::Acquired { fence }) => Next::Acquired { fence },
            Ok(Acquire::Skipped { ago }) => over(Ending::Skipped { ago }, self.busy_seen),
            Ok(Acquire::Mismatch { found }) => over(Ending::Mismatch { found }, self.busy_seen),
            Ok(Acquire::Misconfigured(why)) => over(Ending::Misconfigured(why), self.busy_seen),
            Ok(Acquire::Busy { remaining, queued }) => {
                self.busy_seen = true;
                (self.unreachable, self.unacknowledged) = (0, 0);
                if left.is_zero() {
                    over(Ending::Busy { queued }, true)
                } else {
                    let pause = now + wake_wait(self.ttl, remaining, random).min(left);
                    self.held_until = Some(pause);
                    Next::WaitForRelease(Until {
                        pause,
                        wait_ends: self.give_up,
                    })
                }
            }
            // The server answered with an error (credentials, a replica, a server of another
            // kind...): no wait makes it right.
            Err(failure @ Failure::Refused(_)) => over(Ending::Failed(failure), false),
            // No wait (`--wait 0`), or the wait ran out with the server still unreachable: nothing
            // to leave on a server that does not answer. One whose replicas lag does answer.
            Err(failure @ Failure::Unacknowledged(_)) if left.is_zero() => {
                over(Ending::Failed(failure), self.busy_seen)
            }
            Err(failure) if left.is_zero() => over(Ending::Failed(failure), false),
            // Within a wait, the server being down (a failover, a restart, a pod that starts
            // before its server) is waited out like a busy lock, backing off with jitter so
            // that a fleet does not hammer a recovering server in step. So are too few replicas
            // (a master just promoted, with none yet; a replica resyncing): the take was given
            // back, and a later one may reach them.
            Err(failure) => {
                let (pause, first) = self.back_off(&failure, left, random);
                Next::Retry {
                    failure,
                    pause,
                    first,
                }
            }
        }
    }

    /// What follows a block for a release that ended at `now` with `woken` (Ok(true): woken).
    /// An answer, woken or not, is followed by an attempt at once, the last one when the wait
    /// is over. No answer is a failure to reach the server like an attempt's, retried in the
    /// same way, except that an attempt still follows when the wait is over: the last word is an
    /// attempt's (busy or not, reachable or not). An error the server answered with (a user
    /// not allowed to wait, say) is sat out until the block would have ended: the waiter polls.
    pub fn after_block(
        &mut self,
        woken: Result<bool, Failure>,
        now: Moment,
        random: f64,
    ) -> AfterBlock {
        match woken {
            Ok(_) => {
                self.unreachable = 0;
                AfterBlock::Attempt
            }
            Err(failure @ Failure::Unreachable(_)) => {
                let (pause, first) = self.back_off(&failure, self.left(now), random);
                AfterBlock::Retry {
                    failure,
                    pause,
                    first,
                }
            }
            // A block takes nothing, so nothing of it is unacknowledged.
            Err(Failure::Refused(_) | Failure::Unacknowledged(_)) => AfterBlock::Sleep(
                self.held_until
                    .map_or(Duration::ZERO, |h| h.saturating_since(now)),
            ),
        }
    }

    /// Back off after `failure` (no answer, or too few replicas), within the `left` of the
    /// wait, at the one pace for both: the pause, and whether this is the first such failure in
    /// a row. An unacknowledged take was an answer: it ends a row of unreachable attempts.
    fn back_off(&mut self, failure: &Failure, left: Duration, random: f64) -> (Duration, bool) {
        let (row, other) = match failure {
            Failure::Unacknowledged(_) => (&mut self.unacknowledged, &mut self.unreachable),
            Failure::Unreachable(_) | Failure::Refused(_) => {
                (&mut self.unreachable, &mut self.unacknowledged)
            }
        };
        *other = 0;
        let first = *row == 0;
        let pause = unreachable_backoff(*row, random).min(left);
        *row = row.saturating_add(1);
        (pause, first)
    }
}

/// What follows a block for a release ([`Waiting::after_block`]).
#[derive(Debug)]
pub enum AfterBlock {
    /// Try to take the lock at once.
    Attempt,
    /// Sleep this long (listening for a stop), then try.
    Sleep(Duration),
    /// The server did not answer: as [`Next::Retry`].
    Retry {
        failure: Failure,
        pause: Duration,
        first: bool,
    },
}

/// The renewals of a held lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewals {
    ttl: Duration,
    /// When the last request that counted (the acquire, or a renewal acknowledged as asked)
    /// was sent: the lease counts from then.
    counted: Moment,
    /// When the next renewal is due.
    next: Moment,
}

impl Renewals {
    /// The renewals of a lease taken by the request sent at `acquired`: the first is due ttl/3
    /// after it (time spent after the request, waiting for replicas, say, does not push it).
    pub fn new(acquired: Moment, ttl: Duration) -> Self {
        Self {
            ttl,
            counted: acquired,
            next: acquired + renew_interval(ttl),
        }
    }

    /// When the next renewal is due.
    pub fn due(&self) -> Moment {
        self.next
    }

    /// Where the lease ends, by the last request that counted.
    pub fn deadline(&self) -> Moment {
        deadline(self.counted, self.ttl)
    }

    /// The time limit of a renewal sent at `sent`: [`renew_timeout`], cut to what is left of
    /// the lease (a reply after the lease's end could not save it), at least 1 ms.
    pub fn timeout(&self, sent: Moment) -> Duration {
        let left = self.deadline().saturating_since(sent);
        renew_timeout(self.ttl).min(left.max(Duration::from_millis(1)))
    }

    /// The renewal sent at `sent` extended the lease (acknowledged as asked): the lease counts
    /// from it, and the next one is due ttl/3 after it.
    pub fn extended(&mut self, sent: Moment) {
        self.counted = sent;
        self.next = sent + renew_interval(self.ttl);
    }

    /// A renewal that ended at `now` did not count (no answer, an error, or too few replicas
    /// acknowledged it): the lease still counts from the last one that did; retry soon.
    pub fn not_counted(&mut self, now: Moment) {
        self.next = now + retry_interval(self.ttl);
    }
}

#[cfg(test)]
mod tests;
