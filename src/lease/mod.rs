//! The lease: a thread that acquires the lock (waiting if asked), renews it every ttl/3,
//! releases it on request, and reports what happened; its decisions (`schedule`) and the
//! arithmetic of a lease (`timing`) apart from it. It never touches the command: the
//! supervisor in `run` decides.
//!
//! The thread reads time through a [`Clock`], so that its tests run it against a fake clock and
//! a fake [`Locker`] without a server (`tests`).
//!
//! May use `lock` (the protocol it drives, and its failures), `clock` and `exit` (how
//! a run ended, which its release records); nothing above.

pub mod schedule;
#[cfg(test)]
mod tests;
pub mod timing;

pub use timing::*;

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::clock::Moment;
use crate::exit::Outcome;
use crate::lock::{Acquire, Failure, Held, HeldAs, Interrupt, Locker, Renewal, RunEnding, Until};
use schedule::{AfterBlock, Ending, Next, Renewals, Waiting};

/// How long to wait for a busy lock: up to a duration, or until it is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Up(Duration),
    Forever,
}

/// What the lease thread tells the supervisor while it waits for the lock. The last one it
/// sends is the first of these that ends the wait (all but [`WaitEvent::Retrying`]).
#[derive(Debug)]
pub enum WaitEvent {
    /// The lock is ours; the lease counts from `sent`, the request that took it, whose answer
    /// (a majority's, on a quorum) came `waited` after the first attempt.
    Acquired {
        fence: i64,
        sent: Moment,
        waited: Duration,
    },
    /// The lock stayed busy for the whole wait.
    /// `queued`: the lock was free, but `--fair` waiters were ahead.
    Busy { waited: Duration, queued: bool },
    /// Not run: a run of this lock succeeded `ago`, within the min-interval.
    Skipped { ago: Duration, waited: Duration },
    /// Not run: the lock's holders use it otherwise (another `--limit`, a semaphore against an
    /// exclusive lock), or its key is not redlock's.
    Mismatch { found: HeldAs },
    /// Not run: the servers given cannot hold this lock as asked (why, in one line).
    Misconfigured(String),
    /// The server could not be used to take the lock.
    Failed(Failure),
    /// An attempt failed in a way a wait outlasts: the server could not be reached (or did not
    /// answer), or too few replicas acknowledged the lock it took, which was given back
    /// ([`Failure::Unacknowledged`]). The thread tries again, backing off, until the wait runs
    /// out. Reported for every failed attempt (`first`: the first such failure in a row).
    Retrying { failure: Failure, first: bool },
    /// Asked to stop while waiting: the thread left the waiters' queue (or tried to).
    Stopped,
    /// Sent before [`WaitEvent::Failed`] or [`WaitEvent::Stopped`] when an attempt's reply was
    /// lost, so that it may have taken the lock: what releasing it found (Ours: it had).
    GaveBack(Result<Held, Failure>),
}

/// What the lease thread tells the supervisor once the lock is held.
#[derive(Debug)]
pub enum HoldEvent {
    /// A renewal succeeded; the lease now counts from `sent`.
    Renewed { sent: Moment },
    /// A renewal got no answer or an error; the thread keeps trying.
    RenewFailed(Failure),
    /// The master extended the lease but fewer replicas than `--min-replicas` acknowledged it
    /// (the message says how many): a failed renewal as far as the lease goes, since a
    /// promoted replica could still carry the older expiry. The thread keeps trying.
    Unacknowledged(String),
    /// A renewal found the key gone or held by another owner: the lock is lost.
    Lost(Held),
    /// The thread is done, as asked: what the release found (None: the lock was lost before,
    /// there was nothing to release).
    Released(Option<Result<Held, Failure>>),
}

/// What the supervisor asks of the lease thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Stop, saying how the run ended (for the record of runs, and `--min-interval`).
    Stop { ended: RunEnding },
    /// Renew now rather than at the next ttl/3 (redlock was stopped, and is continued).
    RenewNow,
}

/// The lease thread's time: the real clock, or a fake one in tests.
pub trait Clock: Send {
    fn now(&self) -> Moment;
    /// The next message on `inbox`, if one comes before `until`; None when the time came
    /// first. A supervisor that went away counts as asking to stop.
    fn wait(&self, inbox: &Receiver<Stop>, until: Moment) -> Option<Stop>;
    /// Sleep `duration` (a short pause between two attempts of a release).
    fn sleep(&self, duration: Duration);
}

/// CLOCK_BOOTTIME, and the thread's own waiting.
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Moment {
        Moment::now()
    }

    fn wait(&self, inbox: &Receiver<Stop>, until: Moment) -> Option<Stop> {
        match inbox.recv_timeout(until.until()) {
            Ok(stop) => Some(stop),
            Err(RecvTimeoutError::Disconnected) => Some(Stop::Stop {
                ended: unaccounted(),
            }),
            Err(RecvTimeoutError::Timeout) => None,
        }
    }

    fn sleep(&self, duration: Duration) {
        thread::sleep(duration);
    }
}

/// What the handle and the thread share about a blocked wait: whether a stop was asked for,
/// and whether the thread is blocked in [`Locker::wait`], where it hears nothing else.
#[derive(Default)]
struct Blocked {
    stopping: bool,
    blocked: bool,
    /// The blocked wait was interrupted already (once is enough).
    interrupted: bool,
}

/// The handle the supervisor keeps on the lease thread.
pub struct Lease {
    stop: Sender<Stop>,
    waiting: Arc<Mutex<Blocked>>,
    /// Cuts the thread's blocked wait short; shared with the thread that does it.
    interrupt: Arc<dyn Interrupt>,
    ttl: Duration,
    thread: Option<JoinHandle<()>>,
}

/// Where the thread's reports go.
pub struct Reports {
    pub wait: Box<dyn Fn(WaitEvent) + Send>,
    pub hold: Box<dyn Fn(HoldEvent) + Send>,
}

/// How a run ends that nobody said the end of (the supervisor went away): an internal error.
fn unaccounted() -> RunEnding {
    RunEnding::of(Outcome::Internal, 0)
}

impl Lease {
    /// Start the thread: it waits `splay` (`--splay`: zero for none; a stop ends it), then
    /// acquires, then renews until [`Lease::stop`].
    pub fn start(
        locker: Box<dyn Locker>,
        ttl: Duration,
        (splay, wait): (Duration, Wait),
        reports: Reports,
    ) -> Self {
        let (stop, stop_rx) = mpsc::channel();
        let waiting = Arc::new(Mutex::new(Blocked::default()));
        let interrupt = Arc::from(locker.interrupter());
        let shared = Arc::clone(&waiting);
        let thread = thread::Builder::new()
            .name("lease".into())
            .spawn(move || {
                let mut worker = Worker {
                    locker,
                    ttl,
                    inbox: stop_rx,
                    waiting: shared,
                    clock: RealClock,
                    reports,
                    stopped: None,
                    behind: None,
                };
                worker.run(splay, wait);
            })
            .expect("spawning the lease thread");
        Self {
            stop,
            waiting,
            interrupt,
            ttl,
            thread: Some(thread),
        }
    }

    /// Ask the thread to stop waiting or renewing, and release the lock if it holds it, the run
    /// recorded as an internal error: [`Lease::finish`] says how it ended.
    pub fn stop(&self) {
        self.finish(unaccounted());
    }

    /// [`Lease::stop`], telling the release how the run ended (its record; `--min-interval`).
    ///
    /// A thread blocked waiting for a release hears nothing until its block answers, so that
    /// wait is interrupted through the backend (see [`Interrupt`] for why this way), from a
    /// thread of its own: the caller never blocks on the server. Once unblocked, the lease
    /// thread leaves the queue over its own connection and reports [`WaitEvent::Stopped`], as
    /// for any stop.
    pub fn finish(&self, ended: RunEnding) {
        let interrupt = {
            let mut waiting = lock(&self.waiting);
            waiting.stopping = true;
            let interrupt = waiting.blocked && !waiting.interrupted;
            waiting.interrupted |= interrupt;
            interrupt
        };
        let _ = self.stop.send(Stop::Stop { ended });
        if interrupt {
            let (interrupt, timeout) = (Arc::clone(&self.interrupt), acquire_timeout(self.ttl));
            let spawned = thread::Builder::new()
                .name("interrupt".into())
                .spawn(move || interrupt.interrupt(timeout));
            if spawned.is_err() {
                let _ = self.interrupt.interrupt(timeout);
            }
        }
    }

    /// Renew at once, if the lock is held (redlock was stopped and is continued: the lease may
    /// be nearly spent). The answer comes as usual, a [`HoldEvent::Renewed`] or a failure.
    pub fn renew_now(&self) {
        let _ = self.stop.send(Stop::RenewNow);
    }
}

/// The shared state, whatever a panicking holder left in it (a few booleans, always whole).
fn lock(waiting: &Mutex<Blocked>) -> MutexGuard<'_, Blocked> {
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop();
        // Joining could block on a hung server; the thread ends with the process anyway.
        drop(self.thread.take());
    }
}

/// The lease thread's work: the wait, the renewals, the release.
struct Worker<C: Clock> {
    locker: Box<dyn Locker>,
    ttl: Duration,
    inbox: Receiver<Stop>,
    waiting: Arc<Mutex<Blocked>>,
    clock: C,
    reports: Reports,
    /// How the run ended, as the stop that ended the wait said.
    stopped: Option<RunEnding>,
    /// The answer of the attempt sent behind the last block ([`Locker::wait_then_acquire`]),
    /// and when it was sent: the next attempt, not yet judged.
    behind: Option<(Moment, Acquire)>,
}

impl<C: Clock> Worker<C> {
    fn run(&mut self, splay: Duration, wait: Wait) {
        // The splay: a stop ends it as it ends a wait for the lock, nothing taken.
        if !splay.is_zero() && self.sleep(self.clock.now() + splay) {
            (self.reports.wait)(WaitEvent::Stopped);
            return;
        }
        let Some(sent) = self.acquire(wait) else {
            return;
        };
        // The command starts as this runs; the first renewal is due ttl/3 after `sent`.
        self.locker.settle(renew_timeout(self.ttl));
        let released = match self.renew(sent) {
            Some(ended) => Some(self.release(ended)),
            // Lost: wait for the supervisor's stop; there is nothing of ours to release.
            None => {
                while !matches!(self.next_message(None), Some(Stop::Stop { .. })) {}
                None
            }
        };
        (self.reports.hold)(HoldEvent::Released(released));
    }

    /// The next message before `until` (None: forever); None when the time came first.
    fn next_message(&self, until: Option<Moment>) -> Option<Stop> {
        let until = until.unwrap_or_else(|| self.clock.now() + MAX_DURATION);
        self.clock.wait(&self.inbox, until)
    }

    /// Sleep until `until`; true when asked to stop meanwhile.
    fn sleep(&mut self, until: Moment) -> bool {
        loop {
            match self.next_message(Some(until)) {
                Some(Stop::Stop { ended }) => {
                    self.stopped = Some(ended);
                    return true;
                }
                // Nothing to renew while waiting: a request to renew changes nothing.
                Some(Stop::RenewNow) => {}
                None => return false,
            }
        }
    }

    /// Block until a release wakes us, or `until` says; true when asked to stop.
    ///
    /// The block runs on the lock's own connection, so a waiter costs the server one
    /// connection (per node), not two, and it has always answered before we try again:
    /// nothing of ours stays blocked to swallow someone else's wake-up once we hold the lock.
    /// A stop cannot reach this thread while it blocks: [`Lease::finish`] sees `blocked` and
    /// interrupts the block through the backend. What follows the block, `waiting` decides.
    fn wait_for_release(&mut self, until: Until, waiting: &mut Waiting) -> bool {
        {
            let mut shared = lock(&self.waiting);
            if shared.stopping {
                return true;
            }
            shared.blocked = true;
        }
        let sent = self.clock.now();
        let (woken, taken) = self.locker.wait_then_acquire(until, self.ttl);
        self.behind = taken.map(|taken| (sent, taken));
        let stopping = {
            let mut shared = lock(&self.waiting);
            shared.blocked = false;
            shared.stopping
        };
        if stopping {
            return true;
        }
        let now = self.clock.now();
        let next = waiting.after_block(woken, now, random_unit());
        if self.behind.is_some() {
            // The attempt was made, whatever the block came to: it is judged now.
            return false;
        }
        match next {
            AfterBlock::Attempt => false,
            AfterBlock::Sleep(pause) => self.sleep(now + pause),
            AfterBlock::Retry {
                failure,
                pause,
                first,
            } => self.back_off(failure, pause, first),
        }
    }

    /// The server did not answer, or its replicas did not acknowledge the take: say so, then
    /// sleep `pause`; true when asked to stop meanwhile.
    fn back_off(&mut self, failure: Failure, pause: Duration, first: bool) -> bool {
        (self.reports.wait)(WaitEvent::Retrying { failure, first });
        self.sleep(self.clock.now() + pause)
    }

    /// A waiter stops waiting: leave the fair queue and pass on any wake-up it took, within
    /// what `waiting` gives an attempt now.
    fn leave(&mut self, waiting: &Waiting, busy: bool) {
        let timeout = waiting.timeout(self.clock.now());
        let _ = self.locker.leave(busy, timeout);
    }

    /// Take the lock, waiting as asked. When taken (and reported): when the winning request was
    /// sent. Every other ending is reported here.
    fn acquire(&mut self, wait: Wait) -> Option<Moment> {
        let mut waiting = Waiting::new(self.clock.now(), wait, self.ttl);
        loop {
            let (sent, result) = self.next_attempt(&waiting);
            let now = self.clock.now();
            let waited = waiting.waited(now);
            let stopped = match waiting.after(result, now, random_unit()) {
                Next::Acquired { fence } => {
                    (self.reports.wait)(WaitEvent::Acquired {
                        fence,
                        sent,
                        waited,
                    });
                    return Some(sent);
                }
                Next::Over { ending, leave } => {
                    self.wait_over(&waiting, ending, leave, waited);
                    return None;
                }
                Next::WaitForRelease(until) => self.wait_for_release(until, &mut waiting),
                Next::Retry {
                    failure,
                    pause,
                    first,
                } => {
                    // A take tried again leaves nothing of itself: the run is recorded once.
                    let failure = match failure {
                        failure @ Failure::Unacknowledged(_) => {
                            self.give_back_unacknowledged(failure, None)
                        }
                        failure => failure,
                    };
                    self.back_off(failure, pause, first)
                }
            };
            if stopped {
                self.stop_waiting(&waiting);
                return None;
            }
        }
    }

    /// The next attempt's answer, and when it was sent: the one sent behind the last block,
    /// if any, or one made now.
    fn next_attempt(&mut self, waiting: &Waiting) -> (Moment, Result<Acquire, Failure>) {
        match self.behind.take() {
            // A lease counts from when its attempt was sent, behind a block that may have
            // lasted most of a ttl: one taken that long ago is taken again (our own token
            // is found, the lease restarts, the run is the same) to count from now.
            Some((sent, Acquire::Acquired { .. }))
                if self.clock.now().saturating_since(sent) > self.ttl / 3 =>
            {
                self.attempt(waiting)
            }
            Some((sent, taken)) => (sent, Ok(taken)),
            None => self.attempt(waiting),
        }
    }

    /// The wait ended without the lock, as `ending` says, `waited` after it began: leave the
    /// waiters (when `leave`), give back what an attempt may have taken, and report it.
    fn wait_over(&mut self, waiting: &Waiting, ending: Ending, leave: bool, waited: Duration) {
        let unanswered = self.locker.unanswered();
        // Pass on a wake-up we may have taken: the next waiter finds out at once.
        if leave {
            self.leave(waiting, matches!(ending, Ending::Busy { .. }));
        }
        // The last take too few replicas acknowledged ends the run: recorded so.
        let ending = match ending {
            Ending::Failed(failure @ Failure::Unacknowledged(_)) => {
                let ended = RunEnding::of(Outcome::Unavailable, 0);
                Ending::Failed(self.give_back_unacknowledged(failure, Some(ended)))
            }
            ending => ending,
        };
        if unanswered && matches!(ending, Ending::Failed(_)) {
            // A stop that came while the attempt hung (a TERM during an acquire on a
            // frozen server) says how the run ended; else the server could not be used.
            let ended = match self.next_message(Some(self.clock.now())) {
                Some(Stop::Stop { ended }) => ended,
                _ => RunEnding::of(Outcome::Unavailable, 0),
            };
            self.give_back(ended);
        }
        (self.reports.wait)(match ending {
            Ending::Busy { queued } => WaitEvent::Busy { waited, queued },
            Ending::Skipped { ago } => WaitEvent::Skipped { ago, waited },
            Ending::Mismatch { found } => WaitEvent::Mismatch { found },
            Ending::Misconfigured(why) => WaitEvent::Misconfigured(why),
            Ending::Failed(failure) => WaitEvent::Failed(failure),
        });
    }

    /// Asked to stop while waiting: leave the waiters, give back what an attempt may have
    /// taken (recording the run as the stop said), and report it.
    fn stop_waiting(&mut self, waiting: &Waiting) {
        // The attempt behind the block may have taken the lock as the stop came.
        let took = matches!(self.behind.take(), Some((_, Acquire::Acquired { .. })));
        let unanswered = self.locker.unanswered() || took;
        if waiting.registered() {
            self.leave(waiting, false);
        }
        if unanswered {
            // A stop that came while blocked is still in the inbox.
            let ended = match self.stopped.take() {
                Some(ended) => Some(ended),
                None => match self.inbox.try_recv() {
                    Ok(Stop::Stop { ended }) => Some(ended),
                    _ => None,
                },
            };
            self.give_back(ended.unwrap_or(RunEnding::of(Outcome::Interrupted(0), 0)));
        }
        (self.reports.wait)(WaitEvent::Stopped);
    }

    /// One attempt to take the lock, sent now: when, and its result.
    fn attempt(&mut self, waiting: &Waiting) -> (Moment, Result<Acquire, Failure>) {
        let sent = self.clock.now();
        let result = self.locker.acquire(self.ttl, waiting.timeout(sent));
        (sent, result)
    }

    /// The wait ends without the lock, but an attempt whose reply was lost may have taken it:
    /// release it (recording the run as `ended`), so that it is not left taken for its ttl.
    /// Within the time an acquire has, 1 s at most: the exit waits for it.
    fn give_back(&mut self, ended: RunEnding) {
        let timeout = acquire_timeout(self.ttl).min(GIVE_BACK_LIMIT);
        let released = self.locker.release(ended, timeout);
        (self.reports.wait)(WaitEvent::GaveBack(released));
    }

    /// Give back the take of an attempt that failed as `failure` (too few replicas
    /// acknowledged it): `ended` None when the wait tries again (the take leaves no run in the
    /// record), else how the run ends. The failure, saying what came of it. Within the time an
    /// acquire has, 1 s at most, as [`Worker::give_back`].
    fn give_back_unacknowledged(&mut self, failure: Failure, ended: Option<RunEnding>) -> Failure {
        let timeout = acquire_timeout(self.ttl).min(GIVE_BACK_LIMIT);
        let released = self.locker.give_back_unacknowledged(ended, timeout);
        failure.reworded(|why| match released {
            Ok(()) => format!("{why}; released it"),
            Err(failure) => format!("{why}; releasing it failed ({failure}); it expires by itself"),
        })
    }

    /// Renew (the lease sent at `acquired`) until asked to stop (Some(how the run ended)) or
    /// until the lock is found lost (None).
    fn renew(&mut self, acquired: Moment) -> Option<RunEnding> {
        let mut renewals = Renewals::new(acquired, self.ttl);
        loop {
            match self.next_message(Some(renewals.due())) {
                Some(Stop::Stop { ended }) => return Some(ended),
                Some(Stop::RenewNow) | None => {}
            }
            let sent = self.clock.now();
            let result = self.locker.extend(self.ttl, renewals.timeout(sent));
            match result {
                Ok(Renewal::Extended) => {
                    renewals.extended(sent);
                    (self.reports.hold)(HoldEvent::Renewed { sent });
                }
                // The lease still counts from the last acknowledged renewal.
                Ok(Renewal::Unacknowledged(why)) => {
                    renewals.not_counted(self.clock.now());
                    (self.reports.hold)(HoldEvent::Unacknowledged(why));
                }
                Ok(Renewal::Lost(lost)) => {
                    (self.reports.hold)(HoldEvent::Lost(lost));
                    return None;
                }
                Err(failure) => {
                    renewals.not_counted(self.clock.now());
                    (self.reports.hold)(HoldEvent::RenewFailed(failure));
                }
            }
        }
    }

    /// Compare-and-delete, retrying an unanswered request within [`RELEASE_BUDGET`].
    fn release(&mut self, ended: RunEnding) -> Result<Held, Failure> {
        let give_up = self.clock.now() + RELEASE_BUDGET;
        loop {
            let left = give_up.saturating_since(self.clock.now());
            match self.locker.release(ended, left.min(Duration::from_secs(1))) {
                Err(Failure::Unreachable(_)) if left > Duration::from_millis(50) => {
                    self.clock.sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }
}
