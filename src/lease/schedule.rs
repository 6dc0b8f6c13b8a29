//! The lease thread's decisions, apart from doing them: while waiting for the lock, what follows
//! each attempt (take it, give up, block for a release, back off from a server that does not
//! answer) and each block, and their time limits, none past the wait; while holding it, when the next renewal is due, its
//! time limit, and where the lease ends (only renewals that counted move it). Pure functions of
//! what happened and the time, tested below with made-up moments.

use std::time::Duration;

use crate::clock::Moment;
use crate::lease::Wait;
use crate::lease::timing::{
    acquire_timeout, block, deadline, renew_interval, renew_timeout, retry_interval,
    unreachable_backoff, wake_wait,
};
use crate::lock::{Acquire, Block, Failure, HeldAs};

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
    /// An attempt found the lock busy: this waiter is registered as one, and may have taken a
    /// wake-up, so leaving must tell Redis.
    busy_seen: bool,
    /// When the server was last asked to end a block for a release.
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
    WaitForRelease(Block),
    /// Redis did not answer: sleep `pause`, then try again; `first` since it last answered.
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
    /// Several nodes of the quorum are one server (these).
    SameServer { nodes: Vec<String> },
    /// Redis could not be used.
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
            Ok(Acquire::SameServer { nodes }) => over(Ending::SameServer { nodes }, self.busy_seen),
            Ok(Acquire::Busy { remaining, queued }) => {
                self.busy_seen = true;
                self.unreachable = 0;
                if left.is_zero() {
                    over(Ending::Busy { queued }, true)
                } else {
                    let block = block(wake_wait(self.ttl, remaining, random).min(left), left);
                    self.held_until = Some(now + block.hold);
                    Next::WaitForRelease(block)
                }
            }
            // Redis answered with an error (credentials, a replica, a Sentinel given as a
            // server...): no wait makes it right.
            Err(failure @ Failure::Refused(_)) => over(Ending::Failed(failure), false),
            // No wait (`--wait 0`), or the wait ran out with Redis still unreachable: nothing
            // to leave on a server that does not answer.
            Err(failure) if left.is_zero() => over(Ending::Failed(failure), false),
            // Within a wait, Redis being down (a failover, a restart, a pod that starts before
            // Redis) is waited out like a busy lock, backing off with jitter so that a fleet
            // does not hammer a recovering server in step.
            Err(failure) => {
                let (pause, first) = self.back_off(left, random);
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
    /// is over. No answer is a failure to reach Redis like an attempt's, retried in the same
    /// way, except that an attempt still follows when the wait is over: the last word is an
    /// attempt's (busy or not, reachable or not). An error the server answered with (an ACL
    /// without BLPOP, say) is sat out until the block would have ended: the waiter polls.
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
                let (pause, first) = self.back_off(self.left(now), random);
                AfterBlock::Retry {
                    failure,
                    pause,
                    first,
                }
            }
            Err(Failure::Refused(_)) => AfterBlock::Sleep(
                self.held_until
                    .map_or(Duration::ZERO, |h| h.saturating_since(now)),
            ),
        }
    }

    /// Back off from a server that did not answer, within the `left` of the wait: the pause,
    /// and whether this is the first failure since it last answered.
    fn back_off(&mut self, left: Duration, random: f64) -> (Duration, bool) {
        let first = self.unreachable == 0;
        let pause = unreachable_backoff(self.unreachable, random).min(left);
        self.unreachable = self.unreachable.saturating_add(1);
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
    /// Redis did not answer: as [`Next::Retry`].
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
mod tests {
    use super::*;

    fn at(ms: u64) -> Moment {
        Moment::from_boot(Duration::from_millis(ms))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const TTL: Duration = Duration::from_secs(3);

    fn busy(remaining: Option<Duration>) -> Result<Acquire, Failure> {
        Ok(Acquire::Busy {
            remaining,
            queued: false,
        })
    }

    fn unreachable() -> Result<Acquire, Failure> {
        Err(Failure::Unreachable("no answer".into()))
    }

    fn refused() -> Result<Acquire, Failure> {
        Err(Failure::Refused("WRONGPASS".into()))
    }

    /// What a [`Next`] comes to, failures aside (they are not comparable).
    #[derive(Debug, PartialEq)]
    enum Step {
        Acquired,
        Over { ending: &'static str, leave: bool },
        WaitForRelease(Block),
        Retry { pause: Duration, first: bool },
    }

    fn step(next: Next) -> Step {
        match next {
            Next::Acquired { .. } => Step::Acquired,
            Next::Over { ending, leave } => Step::Over {
                ending: match ending {
                    Ending::Busy { .. } => "busy",
                    Ending::Skipped { .. } => "skipped",
                    Ending::Mismatch { .. } => "mismatch",
                    Ending::SameServer { .. } => "same server",
                    Ending::Failed(Failure::Refused(_)) => "refused",
                    Ending::Failed(Failure::Unreachable(_)) => "unreachable",
                },
                leave,
            },
            Next::WaitForRelease(d) => Step::WaitForRelease(d),
            Next::Retry { pause, first, .. } => Step::Retry { pause, first },
        }
    }

    fn over(ending: &'static str, leave: bool) -> Step {
        Step::Over { ending, leave }
    }

    fn blocks(hold: u64, limit: u64) -> Step {
        Step::WaitForRelease(Block {
            hold: ms(hold),
            limit: ms(limit),
        })
    }

    #[test]
    fn every_attempt_result_has_its_next_step() {
        // (the wait, the result, when it ended, what follows)
        let rows: Vec<(Wait, Result<Acquire, Failure>, u64, Step)> = vec![
            (
                Wait::Up(ms(0)),
                Ok(Acquire::Acquired { fence: 1 }),
                5,
                Step::Acquired,
            ),
            (Wait::Up(ms(0)), busy(Some(ms(500))), 5, over("busy", true)),
            (
                Wait::Up(ms(0)),
                Ok(Acquire::Skipped { ago: ms(1) }),
                5,
                over("skipped", false),
            ),
            (
                Wait::Up(ms(0)),
                Ok(Acquire::Mismatch {
                    found: HeldAs::Kind(crate::lock::Kind::Limit(3)),
                }),
                5,
                over("mismatch", false),
            ),
            // Within a wait too: no wait makes two names of one server two nodes.
            (
                Wait::Up(ms(5000)),
                Ok(Acquire::SameServer {
                    nodes: vec!["127.0.0.1:6379".into(), "localhost:6379".into()],
                }),
                5,
                over("same server", false),
            ),
            (
                Wait::Up(ms(0)),
                unreachable(),
                5,
                over("unreachable", false),
            ),
            (Wait::Up(ms(5000)), refused(), 5, over("refused", false)),
            // Busy within a wait: until the holder's lease ends, plus a little jitter (none
            // at random 0), its answer awaited a second more, but never past the wait (the
            // server asked to answer BLOCK_LATE before it ends).
            (
                Wait::Up(ms(5000)),
                busy(Some(ms(500))),
                5,
                blocks(500, 1500),
            ),
            (Wait::Up(ms(300)), busy(Some(ms(500))), 5, blocks(145, 295)),
            (
                Wait::Up(ms(1200)),
                busy(Some(ms(500))),
                5,
                blocks(500, 1195),
            ),
            (Wait::Forever, busy(None), 5, blocks(3000, 4000)),
            (
                Wait::Up(ms(5000)),
                unreachable(),
                5,
                Step::Retry {
                    pause: ms(50),
                    first: true,
                },
            ),
            (
                Wait::Up(ms(30)),
                unreachable(),
                5,
                Step::Retry {
                    pause: ms(25),
                    first: true,
                },
            ),
            (
                Wait::Up(ms(30)),
                unreachable(),
                40,
                over("unreachable", false),
            ),
        ];
        for (i, (wait, result, now, want)) in rows.into_iter().enumerate() {
            let mut waiting = Waiting::new(at(0), wait, TTL);
            assert_eq!(step(waiting.after(result, at(now), 0.0)), want, "row {i}");
        }
    }

    #[test]
    fn a_waiter_that_was_busy_leaves_the_queue_whatever_ends_its_wait() {
        let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), TTL);
        assert!(!waiting.registered());
        waiting.after(busy(None), at(10), 0.0);
        assert!(waiting.registered());
        assert_eq!(
            step(waiting.after(Ok(Acquire::Skipped { ago: ms(1) }), at(20), 0.0)),
            over("skipped", true)
        );
        assert_eq!(
            step(waiting.after(busy(None), at(1000), 0.0)),
            over("busy", true)
        );
    }

    #[test]
    fn an_unreachable_server_is_retried_backing_off_and_an_answer_resets_it() {
        let mut waiting = Waiting::new(at(0), Wait::Forever, TTL);
        let pauses: Vec<Step> = (0..4)
            .map(|i| step(waiting.after(unreachable(), at(i * 100), 0.0)))
            .collect();
        assert_eq!(
            pauses,
            [50, 100, 200, 400]
                .iter()
                .enumerate()
                .map(|(i, &p)| Step::Retry {
                    pause: ms(p),
                    first: i == 0
                })
                .collect::<Vec<_>>()
        );
        // Redis answered (busy): the next failure is a first one again.
        waiting.after(busy(Some(ms(10))), at(1000), 0.0);
        assert_eq!(
            step(waiting.after(unreachable(), at(1100), 0.0)),
            Step::Retry {
                pause: ms(50),
                first: true
            }
        );
    }

    #[test]
    fn attempts_within_a_wait_are_cut_to_the_wait() {
        let waiting = Waiting::new(at(0), Wait::Up(ms(2000)), Duration::from_secs(30));
        // The first attempt gets its whole limit (ttl/3, at most 5 s).
        assert_eq!(waiting.timeout(at(0)), ms(5000));
        let mut waiting = waiting;
        waiting.after(unreachable(), at(10), 0.0);
        assert_eq!(waiting.timeout(at(500)), ms(1500));
        assert_eq!(waiting.timeout(at(1950)), MIN_ATTEMPT);
        // Past the wait: the last attempt gets MIN_ATTEMPT, so that it ends the wait soon.
        assert_eq!(waiting.timeout(at(2000)), MIN_ATTEMPT);
        assert_eq!(waiting.timeout(at(90_000)), MIN_ATTEMPT);
        // Without a wait, the one attempt has its whole limit, and leaving after it MIN_ATTEMPT.
        let mut waiting = Waiting::new(at(0), Wait::Up(ms(0)), Duration::from_secs(30));
        assert_eq!(waiting.timeout(at(0)), ms(5000));
        waiting.after(busy(None), at(3), 0.0);
        assert_eq!(waiting.timeout(at(3)), MIN_ATTEMPT);
        assert_eq!(waiting.waited(at(1234)), ms(1234));
        assert_eq!(
            Waiting::new(at(0), Wait::Forever, TTL).left(at(5)),
            Duration::MAX
        );
    }

    /// What an [`AfterBlock`] comes to, failures aside.
    #[derive(Debug, PartialEq)]
    enum Then {
        Attempt,
        Sleep(Duration),
        Retry { pause: Duration, first: bool },
    }

    fn then(after: AfterBlock) -> Then {
        match after {
            AfterBlock::Attempt => Then::Attempt,
            AfterBlock::Sleep(d) => Then::Sleep(d),
            AfterBlock::Retry { pause, first, .. } => Then::Retry { pause, first },
        }
    }

    #[test]
    fn every_end_of_a_block_has_its_next_step() {
        // A waiter found it busy at 0 (a holder with 60 s left) within a 2 s wait, so blocked
        // for its answer by 2000, asked of the server by 1850; (how the block ended, when, what
        // follows).
        let silent = || unreachable().map(|_| true);
        let retry = |pause| Then::Retry {
            pause: ms(pause),
            first: true,
        };
        let rows: Vec<(Result<bool, Failure>, u64, Then)> = vec![
            (Ok(true), 700, Then::Attempt),
            (Ok(false), 1900, Then::Attempt),
            // No answer (frozen, reset): retried as an attempt is, and when the wait is over,
            // still followed by the last attempt.
            (silent(), 300, retry(50)),
            (silent(), 1990, retry(10)),
            (silent(), 2000, retry(0)),
            // An error answered: sit out the rest of the block.
            (refused().map(|_| true), 50, Then::Sleep(ms(1800))),
            (refused().map(|_| true), 1900, Then::Sleep(Duration::ZERO)),
        ];
        for (i, (woken, now, want)) in rows.into_iter().enumerate() {
            let mut waiting = Waiting::new(at(0), Wait::Up(ms(2000)), TTL);
            assert_eq!(
                step(waiting.after(busy(Some(ms(60_000))), at(0), 0.0)),
                blocks(1850, 2000)
            );
            assert_eq!(
                then(waiting.after_block(woken, at(now), 0.0)),
                want,
                "row {i}"
            );
        }
    }

    #[test]
    fn a_waiter_whose_redis_froze_while_it_blocked_ends_with_its_wait() {
        // Busy at 10 within a 1 s wait: blocked until 1000 at most.
        let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), Duration::from_secs(30));
        assert_eq!(waiting.timeout(at(0)), ms(5000));
        assert_eq!(
            step(waiting.after(busy(Some(ms(30_000))), at(10), 0.0)),
            blocks(840, 990)
        );
        // The block is given up at 1000: the first failure, said, and the last attempt at
        // once, with MIN_ATTEMPT; it gets no answer either: 69, at 1100.
        assert_eq!(
            then(waiting.after_block(unreachable().map(|_| true), at(1000), 0.0)),
            Then::Retry {
                pause: Duration::ZERO,
                first: true
            }
        );
        assert_eq!(waiting.timeout(at(1000)), MIN_ATTEMPT);
        assert_eq!(
            step(waiting.after(unreachable(), at(1100), 0.0)),
            over("unreachable", false)
        );
        // The same block answered (nobody woke it) at 990: the last attempt finds it busy: 75.
        let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), Duration::from_secs(30));
        waiting.after(busy(Some(ms(30_000))), at(10), 0.0);
        assert_eq!(
            then(waiting.after_block(Ok(false), at(990), 0.0)),
            Then::Attempt
        );
        assert_eq!(waiting.timeout(at(990)), MIN_ATTEMPT);
        // Busy with 8 ms left: the shortest block, whose answer comes at the server's next tick.
        assert_eq!(
            step(waiting.after(busy(Some(ms(29_000))), at(992), 0.0)),
            blocks(1, 151)
        );
        waiting.after_block(Ok(false), at(1090), 0.0);
        assert_eq!(
            step(waiting.after(busy(Some(ms(28_900))), at(1092), 0.0)),
            over("busy", true)
        );
    }

    #[test]
    fn only_renewals_that_counted_move_the_deadline() {
        // ttl 3 s: renew every 1 s, retry every 150 ms, drift 32 ms.
        let mut renewals = Renewals::new(at(0), TTL);
        assert_eq!(renewals.due(), at(1000));
        assert_eq!(renewals.deadline(), at(2968));
        renewals.extended(at(1000));
        assert_eq!((renewals.due(), renewals.deadline()), (at(2000), at(3968)));
        // Two renewals that did not count (no answer; too few replicas): the deadline stays.
        renewals.not_counted(at(2500));
        assert_eq!((renewals.due(), renewals.deadline()), (at(2650), at(3968)));
        renewals.not_counted(at(2700));
        assert_eq!((renewals.due(), renewals.deadline()), (at(2850), at(3968)));
        // The one that counted counts from when it was sent, not when it was answered.
        renewals.extended(at(2850));
        assert_eq!((renewals.due(), renewals.deadline()), (at(3850), at(5818)));
    }

    #[test]
    fn a_renewal_never_waits_past_the_lease() {
        let renewals = Renewals::new(at(0), TTL);
        // renew_timeout(3 s) is 500 ms; 100 ms before the end only 100 ms are left.
        assert_eq!(renewals.timeout(at(1000)), ms(500));
        assert_eq!(renewals.timeout(at(2868)), ms(100));
        assert_eq!(renewals.timeout(at(9000)), ms(1));
    }
}
