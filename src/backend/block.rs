//! How a backend's waiter turns the boundary's [`Until`] into what it asks of its server: how
//! long the server holds the request ([`Block::hold`]) and how long its answer is awaited
//! ([`Block::limit`]), and how long a waiter turned away counts as waiting in a registry of
//! waiters. Pure functions, unit-tested below.
//!
//! The allowances are Redis's: a BLPOP that timed out is answered at the next tick of the
//! server's event loop, 100 ms apart at the default `hz 10`, and the answer takes a round trip.
//! etcd's watch and PostgreSQL's LISTEN end at `hold` by the client's own timer, so the
//! allowances only give a frozen server up a little later there; all three give up at the
//! same moments, so that a wait ends alike on every backend.

use std::time::Duration;

use crate::clock::Moment;
use crate::lock::Until;

/// How late past its timeout a blocked wait's answer may come before the connection is given
/// up, when nothing else (the end of a `--wait`) comes first.
pub(crate) const WAIT_SLACK: Duration = Duration::from_secs(1);

/// How late Redis may answer a BLPOP whose own timeout ran out: it looks at its blocked clients
/// at each tick of its event loop, 100 ms apart at the default `hz 10`, and the answer takes a
/// round trip.
pub(crate) const BLOCK_LATE: Duration = Duration::from_millis(150);

/// The shortest block asked of the server (BLPOP counts in milliseconds; 0 would be forever).
pub(crate) const MIN_HOLD: Duration = Duration::from_millis(1);

/// How a waiter blocks for a wake-up: what it asks of the server, and how long it waits for the
/// answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    /// How long the server holds the request before it answers that nobody woke it (on Redis
    /// BLPOP's own timeout; at least [`MIN_HOLD`]).
    pub hold: Duration,
    /// How long after it is sent the answer is given up, the connection with it: at least
    /// `hold`, by as much as the server may answer late.
    pub limit: Duration,
}

impl Block {
    /// The block of a wait [`Until`] when it says, from now.
    pub(crate) fn until(until: Until) -> Block {
        let left = until.wait_ends.map_or(Duration::MAX, Moment::until);
        block(until.pause.until(), left)
    }
}

/// How a waiter with `left` of its wait (`Duration::MAX`: forever) blocks for `pause`: the
/// server holds the request `pause`, and its answer may come [`WAIT_SLACK`] late, but the
/// answer is never awaited past the end of the wait. When the wait ends first, the server is
/// asked to answer [`BLOCK_LATE`] before it, so that a live connection answers within the
/// wait and a frozen one is given up as the wait ends; with less than that left, the block is
/// of [`MIN_HOLD`], its answer given up `BLOCK_LATE` later.
pub(crate) fn block(pause: Duration, left: Duration) -> Block {
    let limit = pause
        .saturating_add(WAIT_SLACK)
        .min(left.max(MIN_HOLD + BLOCK_LATE));
    Block {
        hold: pause.min(limit - BLOCK_LATE).max(MIN_HOLD),
        limit,
    }
}

/// How long a waiter turned away counts as waiting in the lock's registry of waiters (what
/// `redlock status` counts; each attempt refreshes it), when it pauses at most `longest_pause`
/// between attempts (`RunSpec::waiting`): that pause, the wait's allowed lateness
/// ([`WAIT_SLACK`]), and a second for the next attempt's round trip. A waiter that died is still
/// counted for up to this long after its last attempt.
pub(crate) fn waiting_lifetime(longest_pause: Duration) -> Duration {
    longest_pause + WAIT_SLACK + Duration::from_secs(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_counts_as_waiting_until_its_next_attempt() {
        for ms in [0u64, 100, 1000, 20_050, 3_600_000] {
            let pause = Duration::from_millis(ms);
            assert!(pause + WAIT_SLACK < waiting_lifetime(pause), "{ms}ms");
        }
    }

    #[test]
    fn a_wait_until_a_moment_blocks_for_the_time_left() {
        let now = Moment::now();
        let got = Block::until(Until {
            pause: now + Duration::from_secs(3000),
            wait_ends: None,
        });
        // The few microseconds since `now` come off the hold; the slack stays whole.
        assert!(got.hold <= Duration::from_secs(3000));
        assert!(got.hold > Duration::from_secs(2999));
        assert_eq!(got.limit, got.hold + WAIT_SLACK);
        let got = Block::until(Until {
            pause: now + Duration::from_secs(3000),
            wait_ends: Some(now),
        });
        assert_eq!((got.hold, got.limit), (MIN_HOLD, MIN_HOLD + BLOCK_LATE));
    }

    #[test]
    fn a_block_is_given_up_by_the_end_of_the_wait() {
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
            let got = block(pause, left);
            assert_eq!(
                (got.hold, got.limit),
                (hold, limit),
                "{pause:?} of {left:?}"
            );
        }
        // Whatever the pause and the wait: the server answering late still answers in time,
        // and nothing is awaited past the wait by more than the shortest block and its
        // lateness.
        let durations = [
            0u64,
            1,
            2,
            100,
            149,
            150,
            151,
            152,
            999,
            1000,
            1001,
            20_050,
            1 << 40,
        ];
        for pause in durations.map(ms) {
            for left in durations.map(ms).into_iter().chain([Duration::MAX]) {
                let got = block(pause, left);
                assert!(got.hold >= MIN_HOLD && got.hold <= pause.max(MIN_HOLD));
                assert!(got.limit >= got.hold + BLOCK_LATE, "{pause:?} of {left:?}");
                assert!(
                    got.limit <= left.max(MIN_HOLD + BLOCK_LATE),
                    "{pause:?} of {left:?}"
                );
                assert!(got.limit <= pause.saturating_add(WAIT_SLACK).max(MIN_HOLD + BLOCK_LATE));
            }
        }
    }
}
