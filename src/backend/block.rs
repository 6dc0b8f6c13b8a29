//! How a backend's waiter turns the boundary's [`Until`] into what it asks of its server: how
//! long the server holds the request ([`Block::hold`]) and how long its answer is awaited
//! ([`Block::limit`]), given how late that server may answer ([`Allowances`], each backend's
//! own); and how long a waiter turned away counts as waiting in a registry of waiters. The
//! arithmetic is written once here, pure, and unit-tested below; the figures are each
//! backend's, with its reasons beside them.

use std::time::Duration;

use crate::clock::Moment;
use crate::lock::Until;

/// How late a backend's server may answer a wait for a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allowances {
    /// How late past its hold an answer is still awaited before the connection is given up,
    /// when nothing else (the end of a `--wait`) comes first.
    pub slack: Duration,
    /// How late the server answers a hold that ran out: a wait that ends first asks the server
    /// to answer this long before it, so that a live server answers within the wait.
    pub late: Duration,
    /// The shortest hold the server is asked for.
    pub min_hold: Duration,
}

/// How a waiter blocks for a wake-up: what it asks of the server, and how long it waits for the
/// answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    /// How long the server holds the request before it answers that nobody woke it (at least
    /// [`Allowances::min_hold`]).
    pub hold: Duration,
    /// How long after it is sent the answer is given up, the connection with it: at least
    /// `hold`, by as much as the server may answer late.
    pub limit: Duration,
}

impl Block {
    /// The block of a wait [`Until`] when it says, from now, on a server that answers as
    /// `allowances` say.
    pub(crate) fn until(until: Until, allowances: Allowances) -> Block {
        let left = until.wait_ends.map_or(Duration::MAX, Moment::until);
        block(until.pause.until(), left, allowances)
    }
}

/// How a waiter with `left` of its wait (`Duration::MAX`: forever) blocks for `pause`: the
/// server holds the request `pause`, and its answer may come `slack` late, but the answer is
/// never awaited past the end of the wait. When the wait ends first, the server is asked to
/// answer `late` before it, so that a live connection answers within the wait and a frozen one
/// is given up as the wait ends; with less than that left, the block is of `min_hold`, its
/// answer given up `late` later.
pub(crate) fn block(pause: Duration, left: Duration, allowances: Allowances) -> Block {
    let Allowances {
        slack,
        late,
        min_hold,
    } = allowances;
    let limit = pause.saturating_add(slack).min(left.max(min_hold + late));
    Block {
        hold: pause.min(limit - late).max(min_hold),
        limit,
    }
}

/// How long a waiter turned away counts as waiting in the lock's registry of waiters (what
/// `redlock status` counts; each attempt refreshes it), when it pauses at most `longest_pause`
/// between attempts (`RunSpec::waiting`): that pause, how late its wait's answer may come
/// (`slack`), and a second for the next attempt's round trip. A waiter that died is still
/// counted for up to this long after its last attempt.
pub(crate) fn waiting_lifetime(longest_pause: Duration, allowances: Allowances) -> Duration {
    longest_pause + allowances.slack + Duration::from_secs(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOME: Allowances = Allowances {
        slack: Duration::from_secs(1),
        late: Duration::from_millis(150),
        min_hold: Duration::from_millis(1),
    };

    #[test]
    fn a_waiter_counts_as_waiting_until_its_next_attempt() {
        for ms in [0u64, 100, 1000, 20_050, 3_600_000] {
            let pause = Duration::from_millis(ms);
            assert!(pause + SOME.slack < waiting_lifetime(pause, SOME), "{ms}ms");
        }
    }

    #[test]
    fn a_wait_until_a_moment_blocks_for_the_time_left() {
        let now = Moment::now();
        let got = Block::until(
            Until {
                pause: now + Duration::from_secs(3000),
                wait_ends: None,
            },
            SOME,
        );
        // The few microseconds since `now` come off the hold; the slack stays whole.
        assert!(got.hold <= Duration::from_secs(3000));
        assert!(got.hold > Duration::from_secs(2999));
        assert_eq!(got.limit, got.hold + SOME.slack);
        let got = Block::until(
            Until {
                pause: now + Duration::from_secs(3000),
                wait_ends: Some(now),
            },
            SOME,
        );
        assert_eq!(
            (got.hold, got.limit),
            (SOME.min_hold, SOME.min_hold + SOME.late)
        );
    }

    #[test]
    fn a_block_is_given_up_by_the_end_of_the_wait() {
        // Whatever the pause and the wait: a server answering late still answers in time, and
        // nothing is awaited past the wait by more than the shortest block and its lateness.
        let ms = Duration::from_millis;
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
        let Allowances {
            slack,
            late,
            min_hold,
        } = SOME;
        for pause in durations.map(ms).into_iter().chain([Duration::MAX]) {
            for left in durations.map(ms).into_iter().chain([Duration::MAX]) {
                let got = block(pause, left, SOME);
                assert!(got.hold >= min_hold && got.hold <= pause.max(min_hold));
                assert!(got.limit >= got.hold + late, "{pause:?} of {left:?}");
                assert!(
                    got.limit <= left.max(min_hold + late),
                    "{pause:?} of {left:?}"
                );
                assert!(got.limit <= pause.saturating_add(slack).max(min_hold + late));
            }
        }
    }
}
