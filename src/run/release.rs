//! The release, as the run sees it: waiting for the lease thread's last report, what it says,
//! and how what the release found changes the run's outcome.

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::exit::Outcome;
use crate::lease::HoldEvent;
use crate::lock::Held;
use crate::report;
use crate::run::Event;

/// How long to wait for the lease thread to report its release before giving up on it.
const FINISH_WAIT: Duration = Duration::from_secs(5);

/// Wait for the lease thread's final report, say what became of the lock, and return what the
/// release found (None: nothing released, or no answer).
pub(super) fn finish(rx: &Receiver<Event>, key: &str) -> Option<Held> {
    let give_up = Instant::now() + FINISH_WAIT;
    loop {
        match rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
            Ok(Event::Hold(HoldEvent::Released(result))) => {
                match &result {
                    Some(Ok(Held::Ours)) => report!(1, Released {}, "released lock '{key}'"),
                    // Not warnings: the run's outcome becomes a lost lock, and its one line
                    // says why (`judged`).
                    Some(Ok(Held::Gone)) => report!(
                        1,
                        ReleaseFailed { "reason" => "gone" },
                        "lock '{key}' was already gone when released"
                    ),
                    Some(Ok(Held::Theirs)) => report!(
                        1,
                        ReleaseFailed { "reason" => "taken" },
                        "lock '{key}' was held by another owner when released; left it alone"
                    ),
                    Some(Err(failure)) => report!(
                        0,
                        ReleaseFailed { "reason" => "error" },
                        "warning: could not release lock '{key}' ({failure}); it expires by itself"
                    ),
                    None => {}
                }
                return result.and_then(Result::ok);
            }
            // The command is gone and the release under way: a signal (a second TERM) adds
            // nothing; a renewal's news, a reaped orphan's or the watchdog's changes nothing.
            Ok(Event::Hold(
                HoldEvent::Renewed { .. }
                | HoldEvent::RenewFailed(_)
                | HoldEvent::Unacknowledged(_)
                | HoldEvent::Lost(_),
            )) => {}
            Ok(Event::Signal(_) | Event::Child(..) | Event::Watchdog(_)) => {}
            Ok(Event::Wait(event)) => report::error(format!(
                "internal error: news of the wait for lock '{key}' during its release ({event:?})"
            )),
            Err(_) => {
                report!(
                    0,
                    ReleaseFailed { "reason" => "no_answer" },
                    "warning: no answer while releasing lock '{key}'; it expires by itself"
                );
                return None;
            }
        }
    }
}

/// The outcome once the release is known: a lost lease is always reported, whatever the
/// command's status (or another verdict) says. The lease ran out before the release (redlock
/// was stopped or frozen while the command ended, or while it ran: not `in_time`), or the
/// release found the key gone or someone else's (deleted, evicted, broken with `release
/// --force`, or expired and taken). Returns the outcome and, if the release changed it, why.
pub(super) fn judged(
    outcome: Outcome,
    released: Option<Held>,
    in_time: bool,
) -> (Outcome, Option<&'static str>) {
    if outcome == Outcome::LockLost {
        return (outcome, None);
    }
    let lost = match released {
        Some(Held::Gone) => Some("it was gone at release"),
        Some(Held::Theirs) => Some("another owner held it at release"),
        Some(Held::Ours) | None if !in_time => Some("its lease ran out before the release"),
        Some(Held::Ours) | None => None,
    };
    match lost {
        Some(why) => (Outcome::LockLost, Some(why)),
        None => (outcome, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_release_found_decides_whether_the_lock_was_lost() {
        let ok = Outcome::Exited(0);
        // (the outcome so far, what the release found, in time, the outcome, said why)
        let rows = [
            (ok, Some(Held::Ours), true, ok, false),
            (ok, None, true, ok, false),
            (ok, Some(Held::Gone), true, Outcome::LockLost, true),
            (ok, Some(Held::Theirs), true, Outcome::LockLost, true),
            (ok, Some(Held::Ours), false, Outcome::LockLost, true),
            (ok, None, false, Outcome::LockLost, true),
            (
                Outcome::MaxRuntime,
                Some(Held::Gone),
                true,
                Outcome::LockLost,
                true,
            ),
            (
                Outcome::Signaled(2),
                Some(Held::Ours),
                true,
                Outcome::Signaled(2),
                false,
            ),
            // Said once already: not again.
            (
                Outcome::LockLost,
                Some(Held::Gone),
                false,
                Outcome::LockLost,
                false,
            ),
        ];
        for (i, (before, released, in_time, after, said)) in rows.into_iter().enumerate() {
            let (outcome, why) = judged(before, released, in_time);
            assert_eq!((outcome, why.is_some()), (after, said), "row {i}");
        }
    }
}
