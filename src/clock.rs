//! The clock a lease is counted on: CLOCK_BOOTTIME, which keeps counting while the machine is
//! suspended.
//!
//! std's `Instant` reads CLOCK_MONOTONIC, which stops during a suspend (a laptop's lid, a cloud
//! VM hibernated) while Redis, on another machine, goes on counting the lease down. A deadline
//! kept on it would outlive the lease by the length of the suspend, and the command would run
//! on, unlocked, after the resume (swarthy/redis-semaphore #24, "lock lost after host standby").
//! On CLOCK_BOOTTIME a deadline that passed during the suspend has passed on resume; the
//! watchdog waits for it on a timer of that clock, which fires at once on resume.
//!
//! Socket timeouts and pauses between attempts stay on `Instant`: they bound waiting, not the
//! lease. Used by every layer; uses only std and nix.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// A point on CLOCK_BOOTTIME: the time since the machine booted, suspends included.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moment(Duration);

impl Moment {
    /// Now, on CLOCK_BOOTTIME.
    pub fn now() -> Self {
        // CLOCK_BOOTTIME exists on every Linux since 2.6.39; reading it cannot fail there.
        let now = clock_gettime(ClockId::CLOCK_BOOTTIME)
            .or_else(|_| clock_gettime(ClockId::CLOCK_MONOTONIC))
            .map_or(Duration::ZERO, Duration::from);
        Self(now)
    }

    /// The moment `since_boot` after boot (for tests, and for reading one back from a pipe).
    pub const fn from_boot(since_boot: Duration) -> Self {
        Self(since_boot)
    }

    /// The time since boot.
    pub const fn since_boot(self) -> Duration {
        self.0
    }

    /// How long after `earlier` this is; zero if it is not later.
    pub fn saturating_since(self, earlier: Moment) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The time from now until this moment; zero if it has passed.
    pub fn until(self) -> Duration {
        self.saturating_since(Moment::now())
    }

    /// The time since this moment; zero if it is still ahead.
    pub fn elapsed(self) -> Duration {
        Moment::now().saturating_since(self)
    }
}

/// Later by a duration; saturates (every duration redlock takes is at most a year).
impl Add<Duration> for Moment {
    type Output = Moment;
    fn add(self, later: Duration) -> Moment {
        Moment(self.0.saturating_add(later))
    }
}

/// Earlier by a duration; saturates at boot.
impl Sub<Duration> for Moment {
    type Output = Moment;
    fn sub(self, earlier: Duration) -> Moment {
        Moment(self.0.saturating_sub(earlier))
    }
}

impl fmt::Debug for Moment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "boot+{:?}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_move_forward_and_saturate() {
        let a = Moment::now();
        let b = Moment::now();
        assert!(b >= a);
        assert!(a.since_boot() > Duration::ZERO);
        let t = Moment::from_boot(Duration::from_secs(10));
        assert_eq!(
            (t + Duration::from_secs(5)).saturating_since(t),
            Duration::from_secs(5)
        );
        assert_eq!(
            t.saturating_since(t + Duration::from_secs(5)),
            Duration::ZERO
        );
        assert_eq!(
            t - Duration::from_secs(60),
            Moment::from_boot(Duration::ZERO)
        );
        assert_eq!(
            Moment::from_boot(Duration::MAX) + Duration::from_secs(1),
            Moment::from_boot(Duration::MAX)
        );
        assert!(Moment::now().until() == Duration::ZERO);
    }

    #[test]
    fn boottime_counts_at_least_as_much_as_monotonic() {
        // Equal on a machine that never slept; ahead by the time suspended on one that did.
        let boot = Moment::now().since_boot();
        let mono = Duration::from(clock_gettime(ClockId::CLOCK_MONOTONIC).unwrap());
        assert!(
            boot + Duration::from_millis(50) >= mono,
            "{boot:?} vs {mono:?}"
        );
    }
}
