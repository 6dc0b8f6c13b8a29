//! The lease thread: acquires the lock (waiting if asked), renews it every ttl/3, releases it on
//! request, and reports what happened. It never touches the child; the supervisor decides.
//!
//! Lease arithmetic lives here too: a lease counts from when its acquire/renew request was *sent*,
//! minus a drift allowance, and every sum saturates instead of overflowing.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::cli::Wait;
use crate::lock::{Acquire, Failure, Held, Locker, Waker};

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
    Busy { waited: Duration },
    /// Not run: a run of this lock succeeded `ago`, within the min-interval.
    Skipped { ago: Duration, waited: Duration },
    /// Redis could not be used to take the lock.
    Failed(Failure),
    /// A renewal succeeded; the lease now counts from `sent`.
    Renewed { sent: Instant },
    /// A renewal got no answer or an error; the thread keeps trying.
    RenewFailed(Failure),
    /// A renewal found the key gone or held by another owner: the lock is lost.
    Lost(Held),
    /// The thread is done: the release result, or None if the lock was never ours or already lost.
    Finished(Option<Result<Held, Failure>>),
}

/// The allowance for clock drift between us and Redis: 1% of the ttl plus 2 ms (as in the Redlock spec).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The last instant at which the lease sent at `sent` is certainly still ours.
pub fn deadline(sent: Instant, ttl: Duration) -> Instant {
    sent + ttl.saturating_sub(drift(ttl))
}

/// How long before the deadline the command's whole process group must be dead: room for
/// delivering SIGKILL and for the supervisor waking up late on a busy machine.
pub fn kill_margin(ttl: Duration) -> Duration {
    ttl / 50 + Duration::from_millis(10)
}

/// How often the lease is renewed.
pub fn renew_interval(ttl: Duration) -> Duration {
    ttl / 3
}

/// The wait before retrying a renewal that failed.
pub fn retry_interval(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(5), Duration::from_millis(500))
}

/// The time limit of one renewal request (it is also cut to the lease that remains).
pub fn renew_timeout(ttl: Duration) -> Duration {
    (ttl / 6).clamp(Duration::from_millis(10), Duration::from_secs(2))
}

/// The time limit of one acquire request: a third of the ttl, so a slow reply still leaves
/// most of the lease, and at most 5 s, so an unreachable Redis is reported within seconds.
pub fn acquire_timeout(ttl: Duration) -> Duration {
    (ttl / 3).clamp(Duration::from_millis(10), Duration::from_secs(5))
}

/// How long `--min-replicas` waits for replicas to acknowledge a fresh lock (the server's WAIT
/// timeout; the reply may take as long again): a tenth of the ttl, at least 10 ms, at most 1 s,
/// so the first renewal, due ttl/3 after the acquire was sent, still comes in time.
pub fn replica_wait(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The most time spent releasing (a lost reply is retried within it).
pub const RELEASE_BUDGET: Duration = Duration::from_secs(2);

/// The longest a waiter blocks for a wake-up before trying again on its own. Wake-ups can be
/// lost (a waiter that took one died), so this bounds the lag; it also sets the cost of
/// waiting: two requests (a BLPOP and an acquire) per period, under 0.2 a second.
pub const WAKE_CAP: Duration = Duration::from_secs(15);

/// How late past its timeout a waker may answer before the waiter stops waiting for it.
const WAKER_GRACE: Duration = Duration::from_secs(1);

/// How long a busy waiter blocks for a wake-up before trying again: until the holder's lease
/// runs out (a holder that dies releases nothing), at most `min(ttl, WAKE_CAP)`, plus a little
/// jitter so waiters do not all retry at the same instant. `random` is uniform in [0, 1).
pub fn wake_wait(ttl: Duration, holder_remaining: Option<Duration>, random: f64) -> Duration {
    let cap = ttl.min(WAKE_CAP);
    let base = holder_remaining.map_or(cap, |r| r.min(cap));
    let jitter = (base / 20).min(Duration::from_millis(50));
    (base + jitter.mul_f64(random.clamp(0.0, 1.0))).max(Duration::from_millis(1))
}

/// How long a `--fair` waiter's queue entry lives without a refresh: every attempt refreshes
/// it, and attempts are at most [`wake_wait`] plus [`WAKER_GRACE`] apart, so three of those.
pub fn queue_entry_lifetime(ttl: Duration) -> Duration {
    (ttl.min(WAKE_CAP) + Duration::from_millis(50) + WAKER_GRACE) * 3
}

const BACKOFF_BASE: Duration = Duration::from_millis(5);
const BACKOFF_CAP: Duration = Duration::from_millis(500);

/// Capped exponential backoff with full jitter for attempt `attempt` (0-based), never longer
/// than the holder's remaining lease, and at least 1 ms. `random` is a uniform value in [0, 1).
pub fn backoff(attempt: u32, holder_remaining: Option<Duration>, random: f64) -> Duration {
    let ceiling = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.min(16))
        .min(BACKOFF_CAP);
    let mut sleep = ceiling.mul_f64(random.clamp(0.0, 1.0));
    if let Some(remaining) = holder_remaining {
        sleep = sleep.min(remaining);
    }
    sleep.max(Duration::from_millis(1))
}

pub(crate) fn random_unit() -> f64 {
    // The low 53 bits of a v4 UUID come from the OS RNG (its fixed version and variant bits
    // sit higher up) and make a uniform double in [0, 1).
    let bits = uuid::Uuid::new_v4().as_u128() as u64 & ((1u64 << 53) - 1);
    bits as f64 / (1u64 << 53) as f64
}

/// What the lease thread hears: the supervisor's stop (saying whether the run succeeded), or
/// its waker's "try again".
enum Msg {
    Stop { succeeded: bool },
    Retry,
}

/// The handle the supervisor keeps on the lease thread.
pub struct Lease {
    stop: Sender<Msg>,
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
        let retry = stop.clone();
        let thread = thread::Builder::new()
            .name("lease".into())
            .spawn(move || {
                let mut worker = Worker {
                    locker,
                    token,
                    ttl,
                    inbox: stop_rx,
                    retry,
                    waker: None,
                    report: &report,
                };
                let result = worker.run(wait);
                report(LeaseEvent::Finished(result));
            })
            .expect("spawning the lease thread");
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Ask the thread to stop waiting or renewing, and release the lock if it holds it.
    pub fn stop(&self) {
        self.finish(false);
    }

    /// [`Lease::stop`], telling the release whether the run succeeded (for `--min-interval`).
    pub fn finish(&self, succeeded: bool) {
        let _ = self.stop.send(Msg::Stop { succeeded });
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
    inbox: Receiver<Msg>,
    /// Given to the waker thread, to say "try again".
    retry: Sender<Msg>,
    /// Arms the waker thread with a pause, once this waiter has found the lock busy.
    waker: Option<Sender<Duration>>,
    report: &'a (dyn Fn(LeaseEvent) + Send),
}

impl Worker<'_> {
    fn run(&mut self, wait: Wait) -> Option<Result<Held, Failure>> {
        let sent = self.acquire(wait)?;
        if let Some(succeeded) = self.renew(sent) {
            Some(self.release(succeeded))
        } else {
            // Lost: wait for the supervisor's stop; there is nothing of ours to release.
            self.sleep(Duration::MAX);
            None
        }
    }

    /// Sleep up to `duration`; true when asked to stop (or the supervisor is gone).
    fn sleep(&self, duration: Duration) -> bool {
        self.sleep_or_stop(duration).is_some()
    }

    /// Sleep up to `duration`; Some(succeeded) when asked to stop (false if the supervisor is gone).
    fn sleep_or_stop(&self, duration: Duration) -> Option<bool> {
        let until = Instant::now().checked_add(duration);
        loop {
            let left = until.map_or(Duration::MAX, |u| {
                u.saturating_duration_since(Instant::now())
            });
            match self.inbox.recv_timeout(left) {
                Ok(Msg::Retry) => {} // a late word from a waker no longer listened to
                Ok(Msg::Stop { succeeded }) => return Some(succeeded),
                Err(RecvTimeoutError::Disconnected) => return Some(false),
                Err(RecvTimeoutError::Timeout) => return None,
            }
        }
    }

    /// Block until a release wakes us or `pause` passes; true when asked to stop.
    ///
    /// The BLPOP runs on the waker thread's own connection so that a stop is heard at once.
    /// We try again only after the waker answers (or is overdue), so it is never still
    /// blocked, ready to swallow someone else's wake-up, once we hold the lock.
    fn wait_for_release(&mut self, pause: Duration) -> bool {
        if self.waker.is_none() {
            self.waker = spawn_waker(self.locker.waker(&self.token), self.retry.clone());
        }
        let armed = self.waker.as_ref().is_some_and(|w| w.send(pause).is_ok());
        if !armed {
            self.waker = None;
            return self.sleep(pause);
        }
        let until = Instant::now() + pause + WAKER_GRACE;
        match self
            .inbox
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            Ok(Msg::Retry) | Err(RecvTimeoutError::Timeout) => false,
            Ok(Msg::Stop { .. }) | Err(RecvTimeoutError::Disconnected) => true,
        }
    }

    /// A waiter stops waiting: leave the fair queue and pass on any wake-up it took.
    fn leave(&mut self) {
        self.waker = None;
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
                Ok(Acquire::Taken { fence }) => {
                    self.waker = None;
                    (self.report)(LeaseEvent::Acquired {
                        fence,
                        sent,
                        waited: sent - start,
                    });
                    return Some(sent);
                }
                Ok(Acquire::Done { ago }) => {
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
                Ok(Acquire::Busy { remaining }) => {
                    busy_seen = true;
                    let left = until_give_up();
                    if left.is_zero() {
                        self.leave();
                        (self.report)(LeaseEvent::Busy {
                            waited: start.elapsed(),
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
                Ok(Held::Ours) => {
                    last_sent = sent;
                    next = sent + renew_interval(self.ttl);
                    (self.report)(LeaseEvent::Renewed { sent });
                }
                Ok(lost) => {
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

/// The waker thread: for each pause it is armed with, block on the wake list, then tell the
/// worker to try again. Without a working connection it sits the pause out like a timer.
fn spawn_waker(mut waker: Box<dyn Waker>, retry: Sender<Msg>) -> Option<Sender<Duration>> {
    let (arm, armed) = mpsc::channel::<Duration>();
    thread::Builder::new()
        .name("waker".into())
        .spawn(move || {
            for pause in armed {
                let started = Instant::now();
                if waker.wait(pause).is_err() {
                    thread::sleep(pause.saturating_sub(started.elapsed()));
                }
                if retry.send(Msg::Retry).is_err() {
                    break;
                }
            }
        })
        .ok()
        .map(|_| arm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(30)), Duration::from_millis(302));
        assert_eq!(drift(Duration::from_millis(100)), Duration::from_millis(3));
    }

    #[test]
    fn deadline_never_underflows_or_overflows() {
        let now = Instant::now();
        // A ttl shorter than its drift allowance gives a lease that is already over, not a huge one.
        assert_eq!(deadline(now, Duration::from_millis(1)), now);
        assert_eq!(deadline(now, Duration::ZERO), now);
        assert_eq!(
            deadline(now, Duration::from_secs(30)),
            now + Duration::from_millis(29_698)
        );
        let year = crate::cli::MAX_DURATION;
        assert!(deadline(now, year) > now + year / 2);
    }

    #[test]
    fn the_group_can_be_stopped_before_the_lease_ends() {
        // For every ttl accepted and the largest --kill-after allowed (ttl/2), the stop signal
        // goes out after the first renewal had a chance, and SIGKILL lands before the deadline.
        for ms in [
            100u64,
            101,
            250,
            1000,
            1999,
            30_000,
            3_600_000,
            crate::cli::MAX_DURATION.as_millis() as u64,
        ] {
            let ttl = Duration::from_millis(ms);
            let kill_after = ttl / 2;
            let start = Instant::now();
            let kill_at = deadline(start, ttl) - kill_margin(ttl);
            let stop_at = kill_at - kill_after;
            assert!(stop_at > start + renew_interval(ttl), "ttl {ms}ms");
            assert!(kill_at < start + ttl, "ttl {ms}ms");
        }
    }

    #[test]
    fn backoff_is_jittered_capped_and_bounded_by_the_holder() {
        assert_eq!(backoff(0, None, 0.0), Duration::from_millis(1));
        assert_eq!(backoff(0, None, 0.999_999), Duration::from_nanos(4_999_995));
        assert!(backoff(3, None, 0.5) <= Duration::from_millis(20));
        assert_eq!(backoff(40, None, 0.999_999), BACKOFF_CAP.mul_f64(0.999_999));
        assert_eq!(
            backoff(40, Some(Duration::from_millis(7)), 0.999_999),
            Duration::from_millis(7)
        );
        assert_eq!(
            backoff(u32::MAX, Some(Duration::ZERO), 1.0),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn random_unit_is_in_range() {
        for _ in 0..1000 {
            let r = random_unit();
            assert!((0.0..1.0).contains(&r));
        }
    }

    #[test]
    fn replica_wait_leaves_room_for_the_first_renewal() {
        for ms in [100u64, 1000, 30_000, 3_600_000] {
            let ttl = Duration::from_millis(ms);
            // WAIT's reply may take twice the wait (plus 10 ms) after the acquire.
            assert!(replica_wait(ttl) * 2 + Duration::from_millis(10) < renew_interval(ttl));
        }
    }

    #[test]
    fn timeouts_fit_inside_the_lease() {
        for ms in [100u64, 1000, 30_000, 3_600_000] {
            let ttl = Duration::from_millis(ms);
            assert!(renew_timeout(ttl) < ttl / 3);
            assert!(acquire_timeout(ttl) <= ttl / 3);
            assert!(retry_interval(ttl) < ttl / 3);
        }
    }
}
