//! The lease's clock: when it ends, how much of it the command's group needs to be stopped,
//! and how often to renew, retry and wake up. Pure functions of the ttl, unit-tested below.

use std::time::Duration;

pub use crate::lock::validity::{MAX_DURATION, MIN_TTL, deadline, drift, random_unit};

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
/// most of the lease, and at most 5 s, so an unreachable server is reported within seconds.
pub fn acquire_timeout(ttl: Duration) -> Duration {
    (ttl / 3).clamp(Duration::from_millis(10), Duration::from_secs(5))
}

/// The most time spent releasing (a lost reply is retried within it).
pub const RELEASE_BUDGET: Duration = Duration::from_secs(2);

/// The most a wait that ends without the lock spends giving back one an attempt may have taken
/// though its reply was lost (the acquire's own limit, ttl/3, when smaller).
pub const GIVE_BACK_LIMIT: Duration = Duration::from_secs(1);

/// The longest a waiter blocks for a wake-up before trying again on its own. Wake-ups can be
/// lost (a waiter that took one died), so this bounds the lag; it also sets the cost of
/// waiting: two requests (an attempt and a wait for a release) per period, at most 0.1 a second whenever
/// the holder has 20 s of lease left (a renewing holder with the default 30 s ttl always has).
pub const WAKE_CAP: Duration = Duration::from_secs(20);

/// How long a busy waiter blocks for a wake-up before trying again: until the holder's lease
/// runs out (a holder that dies releases nothing), at most `min(ttl, WAKE_CAP)`, plus a little
/// jitter so waiters do not all retry at the same instant. `random` is uniform in [0, 1).
pub fn wake_wait(ttl: Duration, holder_remaining: Option<Duration>, random: f64) -> Duration {
    let cap = ttl.min(WAKE_CAP);
    let base = holder_remaining.map_or(cap, |r| r.min(cap));
    let jitter = (base / 20).min(Duration::from_millis(50));
    (base + jitter.mul_f64(random.clamp(0.0, 1.0))).max(Duration::from_millis(1))
}

/// The longest a waiter turned away pauses before its next attempt ([`wake_wait`]:
/// `min(ttl, WAKE_CAP)` and 50 ms of jitter): what the backend is told (`RunSpec::waiting`),
/// so that it counts such a waiter as waiting until then, and a little longer for its own
/// allowances.
pub fn longest_pause(ttl: Duration) -> Duration {
    ttl.min(WAKE_CAP) + Duration::from_millis(50)
}

/// The pause before retrying a server that did not answer while waiting for the lock, after
/// `failures` such attempts in a row (0-based): 100 ms doubling to at most 2 s, of which a random
/// half (`random` is uniform in [0, 1)), so that a fleet's waiters spread out instead of
/// reconnecting to a recovering server in step.
pub fn unreachable_backoff(failures: u32, random: f64) -> Duration {
    let ceiling = UNREACHABLE_BASE
        .saturating_mul(1u32 << failures.min(16))
        .min(UNREACHABLE_CAP);
    ceiling / 2 + (ceiling / 2).mul_f64(random.clamp(0.0, 1.0))
}

const UNREACHABLE_BASE: Duration = Duration::from_millis(100);
/// The longest pause between two attempts to reach a server that is down.
pub const UNREACHABLE_CAP: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

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
            MAX_DURATION.as_millis() as u64,
        ] {
            let ttl = Duration::from_millis(ms);
            let kill_after = ttl / 2;
            let start = crate::clock::Moment::now();
            let kill_at = deadline(start, ttl) - kill_margin(ttl);
            let stop_at = kill_at - kill_after;
            assert!(stop_at > start + renew_interval(ttl), "ttl {ms}ms");
            assert!(kill_at < start + ttl, "ttl {ms}ms");
        }
    }

    #[test]
    fn an_unreachable_server_is_retried_with_a_capped_jittered_backoff() {
        let ms = Duration::from_millis;
        assert_eq!(unreachable_backoff(0, 0.0), ms(50));
        assert_eq!(
            unreachable_backoff(0, 0.999_999),
            ms(100) - Duration::from_nanos(50)
        );
        assert_eq!(unreachable_backoff(1, 0.0), ms(100));
        assert_eq!(unreachable_backoff(3, 0.0), ms(400));
        assert_eq!(unreachable_backoff(5, 0.0), UNREACHABLE_CAP / 2);
        assert_eq!(unreachable_backoff(u32::MAX, 1.0), UNREACHABLE_CAP);
        for failures in 0..40 {
            let pause = unreachable_backoff(failures, 0.5);
            assert!(
                pause >= ms(50) && pause <= UNREACHABLE_CAP,
                "{failures}: {pause:?}"
            );
        }
    }

    #[test]
    fn waiting_costs_at_most_a_tenth_of_a_request_a_second() {
        // Against a holder that renews every ttl/3, at least two thirds of its ttl are left
        // whenever a waiter looks; each period costs an attempt and a block.
        for secs in [30u64, 60, 3600, MAX_DURATION.as_secs()] {
            let ttl = Duration::from_secs(secs);
            let period = wake_wait(ttl, Some(ttl * 2 / 3), 0.0);
            assert!(2.0 / period.as_secs_f64() <= 0.1, "ttl {secs}s: {period:?}");
        }
    }

    #[test]
    fn a_waiter_pauses_no_longer_than_it_says() {
        for ms in [
            100u64,
            1000,
            30_000,
            3_600_000,
            MAX_DURATION.as_millis() as u64,
        ] {
            let ttl = Duration::from_millis(ms);
            for remaining in [None, Some(Duration::ZERO), Some(ttl), Some(ttl * 2)] {
                let longest = wake_wait(ttl, remaining, 0.999_999);
                assert!(longest <= longest_pause(ttl), "ttl {ms}ms, {remaining:?}");
            }
        }
        assert!(longest_pause(Duration::from_secs(3600)) <= WAKE_CAP + Duration::from_millis(50));
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
