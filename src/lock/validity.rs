//! How long an acquired lock is certainly ours, by our own clock, and the limits on a lease.
//!
//! A lease counts from when its acquire or renew request was *sent*, minus an allowance for
//! clock drift, and every sum saturates instead of overflowing.

use std::time::Duration;

use crate::clock::Moment;

/// The shortest lease redlock accepts: below it the drift allowance and scheduling noise eat the lease.
pub const MIN_TTL: Duration = Duration::from_millis(100);
/// The longest lease or duration redlock accepts (a year); keeps every deadline sum far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The allowance for clock drift between us and the server: 1% of the ttl plus 2 ms (as in the
/// Redlock algorithm's description).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The last moment at which the lease sent at `sent` is certainly still ours (on CLOCK_BOOTTIME:
/// a suspend counts, as it does on the server).
pub fn deadline(sent: Moment, ttl: Duration) -> Moment {
    sent + ttl.saturating_sub(drift(ttl))
}

/// A uniform random number in [0, 1), for jitter.
pub fn random_unit() -> f64 {
    // The low 53 bits of a v4 UUID come from the OS RNG (its fixed version and variant bits
    // sit higher up) and make a uniform double in [0, 1).
    let bits = uuid::Uuid::new_v4().as_u128() as u64 & ((1u64 << 53) - 1);
    bits as f64 / (1u64 << 53) as f64
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
        let now = Moment::now();
        // A ttl shorter than its drift allowance gives a lease that is already over, not a huge one.
        assert_eq!(deadline(now, Duration::from_millis(1)), now);
        assert_eq!(deadline(now, Duration::ZERO), now);
        assert_eq!(
            deadline(now, Duration::from_secs(30)),
            now + Duration::from_millis(29_698)
        );
        let year = MAX_DURATION;
        assert!(deadline(now, year) > now + year / 2);
    }

    #[test]
    fn random_unit_is_in_range() {
        for _ in 0..1000 {
            let r = random_unit();
            assert!((0.0..1.0).contains(&r));
        }
    }
}
