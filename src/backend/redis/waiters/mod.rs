//! Waiting for a lock: the registry of waiters, the wake-up a release passes on, and the fair
//! queue. Its Lua is here: `wake.lua` (the wake lists), `pass_on.lua` (wake one waiter, if any
//! may wait), `registry.lua` (who was turned away and waits), `queue.lua` (`--fair`, and an
//! exclusive waiter behind shared holders), the steps a plain run's scripts take after their
//! own (`registered.lua` after the take, `wake_next.lua` after the give-back), and the scripts
//! of a waiter that gives up or is interrupted (`leave.lua`, `interrupt.lua`). A plain run
//! nobody waits for pays one `EXISTS` for all of it, at its release.
//!
//! The keys are `PREFIX{NAME}:wake` (and a waiter's own `:wake:TOKEN`), `:waiting`, `:queue` and
//! `:alive`, laid out as redlock 0.1 laid them, so that waiters of both are woken by releases of
//! both. [`crate::lock::Locker::wait`] blocks on the wake lists (a BLPOP); the timing is below,
//! with how late Redis may answer it ([`BLPOP`]).

use std::time::Duration;

use crate::backend::block::Allowances;

/// The longest a `--fair` waiter blocks before it tries again, which refreshes its place in the
/// queue.
pub(crate) const FAIR_BEAT: Duration = Duration::from_millis(1500);

/// How long a `--fair` waiter's place in the queue lasts without a refresh: a waiter that died
/// (SIGKILL, a lost host) is forgotten this long after its last attempt, so it holds up the
/// others no longer. Three beats and a late reply fit in it.
pub const FAIR_ENTRY_LIFETIME: Duration = Duration::from_secs(5);

/// How long a wake-up waits in its list for a waiter to take it.
pub(crate) const WAKE_LINGER: Duration = Duration::from_secs(5);

/// How late past its timeout a blocked wait's answer may come before the connection is given
/// up, when nothing else (the end of a `--wait`) comes first.
pub(crate) const WAIT_SLACK: Duration = Duration::from_secs(1);

/// How late Redis may answer a BLPOP whose own timeout ran out: it looks at its blocked clients
/// at each tick of its event loop, 100 ms apart at the default `hz 10`, and the answer takes a
/// round trip.
pub(crate) const BLOCK_LATE: Duration = Duration::from_millis(150);

/// The shortest block asked of the server (BLPOP counts in milliseconds; 0 would be forever).
pub(crate) const MIN_HOLD: Duration = Duration::from_millis(1);

/// How late Redis may answer a waiter's BLPOP, for [`crate::backend::block`].
pub(crate) const BLPOP: Allowances = Allowances {
    slack: WAIT_SLACK,
    late: BLOCK_LATE,
    min_hold: MIN_HOLD,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::block::block;

    #[test]
    fn a_blpop_is_given_up_by_the_end_of_the_wait() {
        let ms = Duration::from_millis;
        // (pause, left of the wait) -> (hold, limit)
        let rows = [
            // The wait is far off: the whole pause, and the usual slack for its answer.
            (ms(20_000), Duration::MAX, (ms(20_000), ms(21_000))),
            (ms(3000), ms(60_000), (ms(3000), ms(4000))),
            (ms(3000), ms(4000), (ms(3000), ms(4000))),
            // The answer would be due after the wait: given up when the wait ends, and asked
            // for BLOCK_LATE before it.
            (ms(3000), ms(3000), (ms(2850), ms(3000))),
            (ms(3000), ms(3500), (ms(3000), ms(3500))),
            (ms(3000), ms(3100), (ms(2950), ms(3100))),
            (ms(1000), ms(1000), (ms(850), ms(1000))),
            // Little or nothing left: the shortest block, given up BLOCK_LATE after it.
            (ms(150), ms(150), (MIN_HOLD, ms(151))),
            (ms(40), ms(40), (MIN_HOLD, ms(151))),
            (Duration::ZERO, Duration::ZERO, (MIN_HOLD, ms(151))),
            (Duration::ZERO, Duration::MAX, (MIN_HOLD, ms(1000))),
            (
                Duration::MAX,
                Duration::MAX,
                (Duration::MAX - BLOCK_LATE, Duration::MAX),
            ),
            (Duration::MAX, ms(5000), (ms(4850), ms(5000))),
            // What the lease's schedule asks in its own tests: a holder with 500 ms left
            // within a wait of 300, 1200 and 5000 ms; forever with a 3 s ttl; a 30 s ttl
            // within a 1 s wait busy at 10 ms, and then with 8 ms left.
            (ms(295), ms(295), (ms(145), ms(295))),
            (ms(500), ms(1195), (ms(500), ms(1195))),
            (ms(500), ms(4995), (ms(500), ms(1500))),
            (ms(3000), Duration::MAX, (ms(3000), ms(4000))),
            (ms(990), ms(990), (ms(840), ms(990))),
            (ms(8), ms(8), (MIN_HOLD, ms(151))),
        ];
        for (pause, left, (hold, limit)) in rows {
            let got = block(pause, left, BLPOP);
            assert_eq!(
                (got.hold, got.limit),
                (hold, limit),
                "{pause:?} of {left:?}"
            );
        }
    }
}
