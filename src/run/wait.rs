//! The wait for the lock, as the run sees it: the lease thread's news until the lock is taken or
//! the wait ends, what each says (`-v`), the signals that end a wait, and leaving the waiters'
//! queue when told to stop.

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::clock::Moment;
use crate::error::{Class, classified};
use crate::exit::Outcome;
use crate::lease::{Wait, WaitEvent};
use crate::lock::{Failure, Held, Kind};
use crate::process::signals::{self, Intake, Meaning};
use crate::report;
use crate::report::metrics::Stats;
use crate::run::{Event, Options};

/// How long a waiter that is told to stop waits for the lease thread to leave the waiters'
/// queue: a healthy server takes a millisecond; a frozen one must not keep a TERM waiting.
const LEAVE_WAIT: Duration = Duration::from_secs(1);

/// The lock, once taken: its fencing token, when the winning request was sent (the lease counts
/// from then), and when its answer came (the lock is held from then).
pub(super) struct Taken {
    pub fence: i64,
    pub sent: Moment,
    pub held: Moment,
}

/// Wait for the lease thread to take the lock: Ok(taken), or how the run ends without it
/// (busy, skipped, interrupted by a signal). An error: the server could not be used, or the lock is
/// held another way.
pub(super) fn acquire(
    options: &Options,
    intake: Intake,
    rx: &Receiver<Event>,
    stats: &mut Stats,
    started: Instant,
) -> anyhow::Result<Result<Taken, Outcome>> {
    let key = &options.key;
    // What this wait has warned of (the server could not be reached, too few replicas): once
    // each per wait.
    let mut warned = Warned::default();
    loop {
        match rx.recv().context("event channel closed")? {
            Event::Wait(WaitEvent::Acquired {
                fence,
                sent,
                waited,
            }) => return Ok(Ok(acquired(key, fence, sent, waited, stats))),
            Event::Wait(WaitEvent::Busy { waited, queued }) => {
                stats.waited = Some(waited);
                busy(key, options.kind, queued, (waited, options.wait));
                return Ok(Err(Outcome::Busy));
            }
            Event::Wait(WaitEvent::Skipped { ago, waited }) => {
                stats.waited = Some(waited);
                stats.success_ago = Some(ago);
                skipped(key, ago, waited);
                return Ok(Err(Outcome::Skipped));
            }
            Event::Wait(WaitEvent::Mismatch { found }) => {
                stats.waited = Some(started.elapsed());
                return Err(classified(Class::Usage, found.refusal(key, options.kind)));
            }
            Event::Wait(WaitEvent::Misconfigured(why)) => {
                stats.waited = Some(started.elapsed());
                return Err(classified(Class::Usage, why));
            }
            Event::Wait(WaitEvent::Retrying { failure, first }) => {
                retrying(key, &failure, (first, &mut warned), options.wait);
            }
            Event::Wait(WaitEvent::Failed(failure)) => {
                stats.waited = Some(started.elapsed());
                return Err(classified(Class::Unavailable, failure.to_string()))
                    .with_context(|| format!("cannot take lock '{key}'"));
            }
            Event::Wait(WaitEvent::GaveBack(released)) => gave_back(key, &released),
            // The lease thread ends a wait only with one of the above; a stop ends it here.
            Event::Wait(WaitEvent::Stopped) => {
                return Err(anyhow::anyhow!("the wait for lock '{key}' stopped unasked"));
            }
            // Job control while waiting: nothing of the command's to stop yet; redlock stops.
            Event::Signal(signal) if intake.meaning(signal) == Meaning::Suspend => {
                signals::stop_self(signal);
            }
            Event::Signal(signal) if intake.ends_a_wait(signal) => {
                stats.waited = Some(started.elapsed());
                report!(
                    1,
                    Interrupted { "signal" => signal.to_string() },
                    "{signal} while waiting for lock '{key}'; not running the command"
                );
                return Ok(Err(Outcome::Interrupted(signal.raw())));
            }
            Event::Signal(signal) => report!(
                1,
                SignalIgnored { "signal" => signal.to_string() },
                "{signal} while waiting for lock '{key}': nothing to pass it to yet; ignored"
            ),
            // Nothing of a command or a hold before the lock is taken (the reaper starts with
            // the command): a bug, said as one.
            event @ (Event::Hold(_) | Event::Child(..) | Event::Watchdog(_)) => {
                report::error(format!(
                    "internal error: {event:?} while waiting for lock '{key}'"
                ));
            }
        }
    }
}

/// Say that the lock was taken, `waited` after the first attempt, by the request `sent` then.
fn acquired(key: &str, fence: i64, sent: Moment, waited: Duration, stats: &mut Stats) -> Taken {
    report!(
        1,
        Acquired { "waited_ms" => waited.as_millis(), "fence" => fence },
        "acquired lock '{key}' after {} (fencing token {fence})",
        report::duration(waited)
    );
    stats.waited = Some(waited);
    Taken {
        fence,
        sent,
        held: Moment::now(),
    }
}

/// Say what giving back a lock an attempt may have taken, its reply lost, found.
pub(super) fn gave_back(key: &str, released: &Result<Held, Failure>) {
    match released {
        Ok(Held::Ours) => report!(
            1,
            GaveBack {},
            "an attempt whose reply was lost had taken lock '{key}'; released it"
        ),
        // It had not taken it: nothing to say.
        Ok(Held::Gone | Held::Theirs) => {}
        // Said with -v only: the failure that ends the run says already that the server is not
        // answering, and what is left is what the lock's ttl takes care of anyway.
        Err(failure) => report!(
            1,
            GiveBackFailed { "error" => failure.to_string() },
            "an attempt to take lock '{key}' got no reply, and releasing what it may have \
             taken failed too ({failure}); if it took the lock, it expires with its ttl"
        ),
    }
}

/// Say that `--min-interval` skips the run: a run succeeded `ago`; and how long this run waited
/// for the lock first, if it did (a waiter that waited for that very run).
fn skipped(key: &str, ago: Duration, waited: Duration) {
    let waited_for = if waited >= Duration::from_millis(100) {
        format!(" (waited {})", report::duration(waited))
    } else {
        String::new()
    };
    report!(
        1,
        Skipped { "waited_ms" => waited.as_millis(), "last_success_ms_ago" => ago.as_millis() },
        "lock '{key}' last succeeded {} ago, within --min-interval; skipping the run{waited_for}",
        report::duration(Duration::from_secs(ago.as_secs()))
    );
}

/// Say that the lock stayed busy to the end of the wait (`waited`, of the `--wait` asked for),
/// as a `kind` client found it (`queued`: free, but promised to waiters ahead).
fn busy(key: &str, kind: Kind, queued: bool, (waited, wait): (Duration, Wait)) {
    let found = match (kind, queued) {
        // A run nested in a run of the same lock waits for itself: the environment says so.
        (Kind::Exclusive, false) if nested_in(key) => format!(
            "is held by another run, perhaps the one this command runs under (its REDLOCK_KEY \
             is '{key}')"
        ),
        _ => found_busy(kind, queued),
    };
    let gave_up = match wait {
        Wait::Up(wait) if wait.is_zero() => "gave up at once (no --wait)".to_owned(),
        _ => format!("gave up after {}", report::duration(waited)),
    };
    report!(
        1,
        Busy { "waited_ms" => waited.as_millis(), "queued" => u32::from(queued) },
        "lock '{key}' {found}; {gave_up}"
    );
}

/// Whether this redlock runs inside a command that a run of lock `key` started (its
/// `REDLOCK_KEY`): that run holds the lock, on this host.
fn nested_in(key: &str) -> bool {
    std::env::var_os("REDLOCK_KEY").is_some_and(|outer| outer == key)
}

/// What a busy lock was found to be, for a `kind` client (`queued`: free, but promised).
fn found_busy(kind: Kind, queued: bool) -> String {
    match (kind, queued) {
        (Kind::Exclusive, false) => "is held by another run (on this host or another)".to_owned(),
        (Kind::Exclusive, true) => {
            "is free but promised to --fair waiters ahead of this one".to_owned()
        }
        (Kind::Limit(n), false) => format!("has all {n} slots held by other runs (--limit {n})"),
        (Kind::Limit(_), true) => {
            "has a free slot, promised to --fair waiters ahead of this one".to_owned()
        }
        (Kind::Shared, false) => "is held exclusively by another run".to_owned(),
        (Kind::Shared, true) => {
            "is promised to an exclusive waiter ahead of this --shared one".to_owned()
        }
    }
}

/// What a wait has warned of, each once: an unreachable server, too few replicas.
#[derive(Debug, Default)]
struct Warned {
    unreachable: bool,
    unacknowledged: bool,
}

impl Warned {
    /// How loud to say `failure` (`first`: the first of a row), and its word: a warning the
    /// first time in the wait for its kind, then a `-v` line for the first failure of each later
    /// row, `-vv` for the rest. In cron every line is a line of mail: a server that drops its
    /// connections now and then is one warning, and so is a replica that lags now and then.
    fn said(&mut self, failure: &Failure, first: bool) -> (i8, &'static str) {
        let warned = match failure {
            Failure::Unacknowledged(_) => &mut self.unacknowledged,
            // A refusal is never retried: it ends the wait.
            Failure::Unreachable(_) | Failure::Refused(_) => &mut self.unreachable,
        };
        let said = match (first, *warned) {
            (true, false) => (0, "warning: "),
            (true, true) => (1, "again: "),
            (false, _) => (2, "still: "),
        };
        *warned = true;
        said
    }
}

/// Say that an attempt within a wait failed, and is tried again: the server could not be
/// reached, or too few replicas acknowledged the lock it took; as loud as `warned` says.
fn retrying(key: &str, failure: &Failure, (first, warned): (bool, &mut Warned), wait: Wait) {
    let until = match wait {
        Wait::Forever => "for as long as it waits (--wait forever)".to_owned(),
        Wait::Up(wait) => format!(
            "until the wait ends (--wait {})",
            humantime::format_duration(wait)
        ),
    };
    let (level, what) = warned.said(failure, first);
    match failure {
        Failure::Unacknowledged(_) => report!(
            level,
            AcquireUnacknowledged { "error" => failure.to_string() },
            "{what}cannot take lock '{key}': {failure}; retrying {until}"
        ),
        Failure::Unreachable(_) | Failure::Refused(_) => report!(
            level,
            Unreachable { "error" => failure.to_string() },
            "{what}cannot take lock '{key}': {failure}; retrying {until}"
        ),
    }
}

/// Wait a little for the lease thread of a waiter told to stop to leave the waiters' queue.
/// Nothing was held, so nothing is lost if it cannot: the waiter's place lapses by itself.
pub(super) fn left_the_queue(rx: &Receiver<Event>, key: &str) {
    let give_up = Instant::now() + LEAVE_WAIT;
    loop {
        match rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
            Ok(Event::Wait(WaitEvent::Stopped)) => return,
            Ok(Event::Wait(WaitEvent::GaveBack(released))) => gave_back(key, &released),
            // Redlock is on its way out already: another signal adds nothing, and the rest
            // (a last attempt's news) is moot.
            Ok(Event::Signal(_) | Event::Wait(_) | Event::Hold(_)) => {}
            Ok(Event::Child(..) | Event::Watchdog(_)) => {}
            Err(_) => {
                report!(
                    1,
                    LeaveFailed {},
                    "no answer from the server while leaving the waiters of lock '{key}'; \
                     the place lapses by itself"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_a_wait_outlasts_is_one_warning() {
        let unreachable = || Failure::Unreachable("cannot reach the server".into());
        let unacknowledged = || Failure::Unacknowledged("only 0 of 1 replica(s)".into());
        let mut warned = Warned::default();
        // (the failure, the first of a row, how loud)
        let rows = [
            (unreachable(), true, 0),
            (unreachable(), false, 2),
            // The server back, its replicas not: a warning of its own, once.
            (unacknowledged(), true, 0),
            (unacknowledged(), false, 2),
            (unacknowledged(), false, 2),
            (unreachable(), true, 1),
            (unacknowledged(), true, 1),
            (unacknowledged(), false, 2),
        ];
        for (i, (failure, first, level)) in rows.into_iter().enumerate() {
            assert_eq!(warned.said(&failure, first).0, level, "row {i}");
        }
    }
}
