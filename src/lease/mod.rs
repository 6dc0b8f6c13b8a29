//! The lease: a thread that acquires the lock (waiting if asked), renews it every ttl/3,
//! releases it on request, and reports what happened; and, in [`timing`], the arithmetic of
//! when a lease ends and when to renew, retry and give up. It never touches the command: the
//! supervisor in `run` decides.
//!
//! May use `lock` (the protocol it drives) and `transport` (its failures); nothing above.

pub mod timing;

pub use timing::*;

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::lock::{Acquire, Failure, Held, HeldAs, Interrupt, Locker, Renewal};

/// How long to wait for a busy lock: up to a duration, or until it is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Up(Duration),
    Forever,
}

/// What the lease thread tells the supervisor.
#[derive(Debug)]
pub enum LeaseEvent {
    /// The lock is ours; the lease counts from `sent`.
    Acquired {
        fence: i64,
        sent: Instant,
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
    /// Redis could not be used to take the lock.
    Failed(Failure),
    /// A renewal succeeded; the lease now counts from `sent`.
    Renewed { sent: Instant },
    /// A renewal got no answer or an error; the thread keeps trying.
    RenewFailed(Failure),
    /// The master extended the lease but fewer replicas than `--min-replicas` acknowledged it
    /// (the message says how many): a failed renewal as far as the lease goes, since a
    /// promoted replica could still carry the older expiry. The thread keeps trying.
    Unacknowledged(String),
    /// A renewal found the key gone or held by another owner: the lock is lost.
    Lost(Held),
    /// The thread is done: the release result, or None if the lock was never ours or already lost.
    Finished(Option<Result<Held, Failure>>),
}

/// What the supervisor asks of the lease thread.
enum Stop {
    /// Stop, saying whether the run succeeded.
    Stop { succeeded: bool },
    /// Renew now rather than at the next ttl/3 (redlock was stopped, and is continued).
    RenewNow,
}

/// What the handle and the thread share about a wait: whether a stop was asked for, and
/// whether the thread is blocked in [`Locker::wait`], where it hears nothing else.
#[derive(Default)]
struct Waiting {
    stopping: bool,
    blocked: bool,
    /// The blocked wait was interrupted already (once is enough).
    interrupted: bool,
}

/// The handle the supervisor keeps on the lease thread.
pub struct Lease {
    stop: Sender<Stop>,
    waiting: Arc<Mutex<Waiting>>,
    /// Cuts the thread's blocked wait short; shared with the thread that does it.
    interrupt: Arc<dyn Interrupt>,
    ttl: Duration,
    thread: Option<JoinHandle<()>>,
}

impl Lease {
    /// Start the thread: it acquires at once, then renews until [`Lease::stop`].
    pub fn start(
        locker: Box<dyn Locker>,
        token: String,
        ttl: Duration,
        wait: Wait,
        report: impl Fn(LeaseEvent) + Send + 'static,
    ) -> Self {
        let (stop, stop_rx) = mpsc::channel();
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        let interrupt = Arc::from(locker.interrupter(&token));
        let shared = Arc::clone(&waiting);
        let thread = thread::Builder::new()
            .name("lease".into())
            .spawn(move || {
                let mut worker = Worker {
                    locker,
                    token,
                    ttl,
                    inbox: stop_rx,
                    waiting: shared,
                    report: &report,
                };
                let result = worker.run(wait);
                report(LeaseEvent::Finished(result));
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

    /// Ask the thread to stop waiting or renewing, and release the lock if it holds it.
    pub fn stop(&self) {
        self.finish(false);
    }

    /// [`Lease::stop`], telling the release whether the run succeeded (for `--min-interval`).
    ///
    /// A thread blocked waiting for a release hears nothing until its BLPOP answers, so that
    /// wait is interrupted through Redis (see [`Interrupt`] for why this way), from a thread of
    /// its own: the caller never blocks on Redis. Once unblocked, the lease thread leaves the
    /// queue over its own connection and reports [`LeaseEvent::Finished`], as for any stop.
    pub fn finish(&self, succeeded: bool) {
        let interrupt = {
            let mut waiting = lock(&self.waiting);
            waiting.stopping = true;
            let interrupt = waiting.blocked && !waiting.interrupted;
            waiting.interrupted |= interrupt;
            interrupt
        };
        let _ = self.stop.send(Stop::Stop { succeeded });
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
}

/// The shared state, whatever a panicking holder left in it (a few booleans, always whole).
fn lock(waiting: &Mutex<Waiting>) -> MutexGuard<'_, Waiting> {
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Lease {
    /// Renew at once, if the lock is held (redlock was stopped and is continued: the lease may
    /// be nearly spent). The answer comes as usual, a [`LeaseEvent::Renewed`] or a failure.
    pub fn renew_now(&self) {
        let _ = self.stop.send(Stop::RenewNow);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop();
        // Joining could block on a hung Redis; the thread ends with the process anyway.
        drop(self.thread.take());
    }
}

struct Worker<'a> {
    locker: Box<dyn Locker>,
    token: String,
    ttl: Duration,
    inbox: Receiver<Stop>,
    waiting: Arc<Mutex<Waiting>>,
    report: &'a (dyn Fn(LeaseEvent) + Send),
}

impl Worker<'_> {
    fn run(&mut self, wait: Wait) -> Option<Result<Held, Failure>> {
        let sent = self.acquire(wait)?;
        if let Some(succeeded) = self.renew(sent) {
            Some(self.release(succeeded))
        } else {
            // Lost: wait for the supervisor's stop; there is nothing of ours to release.
            while !self.sleep(Duration::MAX) {}
            None
        }
    }

    /// Sleep up to `duration`; true when asked to stop (or the supervisor is gone).
    fn sleep(&self, duration: Duration) -> bool {
        self.sleep_or_stop(duration).is_some()
    }

    /// Sleep up to `duration`; Some(succeeded) when asked to stop (false if the supervisor is
    /// gone). A request to renew now cuts the sleep short (None, as when it ran out).
    fn sleep_or_stop(&self, duration: Duration) -> Option<bool> {
        match self.inbox.recv_timeout(duration) {
            Ok(Stop::Stop { succeeded }) => Some(succeeded),
            Err(RecvTimeoutError::Disconnected) => Some(false),
            Ok(Stop::RenewNow) | Err(RecvTimeoutError::Timeout) => None,
        }
    }

    /// Block until a release wakes us or `pause` passes; true when asked to stop.
    ///
    /// The BLPOP runs on the lock's own connection, so a waiter costs Redis one connection
    /// (per node), not two, and it has always answered before we try again: nothing of ours
    /// stays blocked to swallow someone else's wake-up once we hold the lock. A stop cannot
    /// reach this thread while it blocks: [`Lease::finish`] sees `blocked` and interrupts the
    /// BLPOP through Redis. Without a working connection the pause is sat out like a timer,
    /// listening for a stop.
    fn wait_for_release(&mut self, pause: Duration) -> bool {
        {
            let mut waiting = lock(&self.waiting);
            if waiting.stopping {
                return true;
            }
            waiting.blocked = true;
        }
        let started = Instant::now();
        let woken = self.locker.wait(&self.token, pause);
        let stopping = {
            let mut waiting = lock(&self.waiting);
            waiting.blocked = false;
            waiting.stopping
        };
        if stopping {
            return true;
        }
        match woken {
            Ok(_) => false,
            Err(_) => self.sleep(pause.saturating_sub(started.elapsed())),
        }
    }

    /// A waiter stops waiting: leave the fair queue and pass on any wake-up it took.
    fn leave(&mut self) {
        let _ = self.locker.leave(&self.token, acquire_timeout(self.ttl));
    }

    /// Take the lock, waiting as asked. When taken (and reported): when the winning request was sent.
    fn acquire(&mut self, wait: Wait) -> Option<Instant> {
        let start = Instant::now();
        let give_up = match wait {
            Wait::Up(d) => start.checked_add(d),
            Wait::Forever => None,
        };
        let timeout = acquire_timeout(self.ttl);
        let until_give_up = || {
            give_up.map_or(Duration::MAX, |g| {
                g.saturating_duration_since(Instant::now())
            })
        };
        let mut attempt = 0u32;
        let mut busy_seen = false;
        loop {
            let sent = Instant::now();
            let stopped = match self.locker.acquire(&self.token, self.ttl, timeout) {
                Ok(Acquire::Acquired { fence }) => {
                    (self.report)(LeaseEvent::Acquired {
                        fence,
                        sent,
                        waited: sent - start,
                    });
                    return Some(sent);
                }
                Ok(Acquire::Skipped { ago }) => {
                    // Pass on a wake-up we may have taken: the next waiter skips too, at once.
                    if busy_seen {
                        self.leave();
                    }
                    (self.report)(LeaseEvent::Skipped {
                        ago,
                        waited: start.elapsed(),
                    });
                    return None;
                }
                Ok(Acquire::Mismatch { found }) => {
                    if busy_seen {
                        self.leave();
                    }
                    (self.report)(LeaseEvent::Mismatch { found });
                    return None;
                }
                Ok(Acquire::Busy { remaining, queued }) => {
                    busy_seen = true;
                    let left = until_give_up();
                    if left.is_zero() {
                        self.leave();
                        (self.report)(LeaseEvent::Busy {
                            waited: start.elapsed(),
                            queued,
                        });
                        return None;
                    }
                    self.wait_for_release(wake_wait(self.ttl, remaining, random_unit()).min(left))
                }
                // A first failure is a misconfiguration more often than a blip: report it at once.
                Err(failure @ Failure::Refused(_)) => {
                    (self.report)(LeaseEvent::Failed(failure));
                    return None;
                }
                Err(failure) if attempt == 0 || until_give_up().is_zero() => {
                    (self.report)(LeaseEvent::Failed(failure));
                    return None;
                }
                Err(_) => self.sleep(backoff(attempt, None, random_unit()).min(until_give_up())),
            };
            if stopped {
                if busy_seen {
                    self.leave();
                }
                return None;
            }
            attempt = attempt.saturating_add(1);
        }
    }

    /// Renew (the lease sent at `acquired`) until asked to stop (Some(whether the run succeeded)) or until the lock is found
    /// lost (None).
    fn renew(&mut self, acquired: Instant) -> Option<bool> {
        // Counted from the acquire request, as the supervisor counts the lease: time spent
        // after it (WAIT for replicas, reporting) does not push the first renewal later.
        let mut next = acquired + renew_interval(self.ttl);
        let mut last_sent = acquired;
        loop {
            if let Some(succeeded) =
                self.sleep_or_stop(next.saturating_duration_since(Instant::now()))
            {
                return Some(succeeded);
            }
            let sent = Instant::now();
            let left = deadline(last_sent, self.ttl).saturating_duration_since(sent);
            let timeout = renew_timeout(self.ttl).min(left.max(Duration::from_millis(1)));
            match self.locker.extend(&self.token, self.ttl, timeout) {
                Ok(Renewal::Extended) => {
                    last_sent = sent;
                    next = sent + renew_interval(self.ttl);
                    (self.report)(LeaseEvent::Renewed { sent });
                }
                // The lease still counts from the last acknowledged renewal (`last_sent`).
                Ok(Renewal::Unacknowledged(why)) => {
                    next = Instant::now() + retry_interval(self.ttl);
                    (self.report)(LeaseEvent::Unacknowledged(why));
                }
                Ok(Renewal::Lost(lost)) => {
                    (self.report)(LeaseEvent::Lost(lost));
                    return None;
                }
                Err(failure) => {
                    next = Instant::now() + retry_interval(self.ttl);
                    (self.report)(LeaseEvent::RenewFailed(failure));
                }
            }
        }
    }

    /// Compare-and-delete, retrying an unanswered request within [`RELEASE_BUDGET`].
    fn release(&mut self, succeeded: bool) -> Result<Held, Failure> {
        let give_up = Instant::now() + RELEASE_BUDGET;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            match self
                .locker
                .release(&self.token, succeeded, left.min(Duration::from_secs(1)))
            {
                Err(Failure::Unreachable(_))
                    if give_up > Instant::now() + Duration::from_millis(50) =>
                {
                    thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }
}
