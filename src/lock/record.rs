//! The record of a lock's runs as every backend keeps it and the admin commands show it: what
//! a run is (its holder, when it took the lock, its fencing token, how it ended), the counters by
//! outcome, and how a run's end is told to the backend. How each backend stores and updates it
//! (atomically with the lock's own step where it can) is the backend's; the rules a reader
//! applies (a run with no end whose holder is gone vanished, counted once; the last run to end
//! kept visible) are the same everywhere.

use std::time::Duration;

use crate::exit::{self, Outcome};
use crate::lock::Holder;
use crate::report::json;

/// How many runs of a lock its record keeps, newest first: a few kilobytes (a run is about
/// 170 bytes of JSON; docs/operating.md has the measured size).
pub const RUNS_KEPT: u32 = 20;

/// How long the record (and its counters) outlives the last run: longer than a month, so that a
/// monthly job's record is there when the next run comes.
pub const RECORD_TTL: Duration = Duration::from_secs(40 * 24 * 3600);

/// The outcome label of a run whose holder vanished: its lease ended without a release.
pub const VANISHED: &str = "vanished";

/// The outcome label of a run that is still going.
pub const RUNNING: &str = "running";

pub use crate::exit::CUT_SHORT;

/// How a run ends when its lock turns out to be lost (its renewal or release found the key
/// gone or someone else's): `lock_lost`, exit 76.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    pub lost_outcome: &'static str,
    pub lost_status: i32,
    /// When the run held the lock to at the latest (unix ms, server clock: the end of the
    /// lease its last counted renewal gave, or its command's end if sooner); 0 when not
    /// known. The record keeps the earlier of this and the server's time as its end.
    pub lost_by: u64,
}

impl Lost {
    pub const LOCK_LOST: Lost = Lost {
        lost_outcome: "lock_lost",
        lost_status: exit::LOCK_LOST,
        lost_by: 0,
    };
}

/// How a run ended, as its release records it: the outcome if the lock is still ours, and
/// the one it comes to if it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnding {
    /// The metrics file's outcome label ([`Outcome::label`]).
    pub outcome: &'static str,
    /// redlock's exit status.
    pub status: i32,
    pub lost: Lost,
}

impl RunEnding {
    /// A run that ended with `outcome`; busy and skipped runs exit `conflict`.
    pub fn of(outcome: Outcome, conflict: u8) -> Self {
        RunEnding {
            outcome: outcome.label(),
            status: outcome.status(conflict),
            lost: Lost::LOCK_LOST,
        }
    }

    /// Whether the run succeeded (for `--min-interval`).
    pub fn succeeded(&self) -> bool {
        self.outcome == Outcome::Exited(0).label()
    }

    /// The same ending for a command that a signal redlock forwarded cut short: a run that
    /// ran is [`CUT_SHORT`], whatever its status; redlock's own endings stay.
    pub fn cut_short(mut self) -> Self {
        if matches!(self.outcome, "success" | "failed") {
            self.outcome = CUT_SHORT;
        }
        self
    }

    /// The run as the record keeps it once ended: `started` is when the lock
    /// was taken by the server's clock, `took` how long it was held by this host's.
    pub fn json(&self, run: &Started, token: &str, holder: &Holder, took: Duration) -> String {
        let ms = |v: u64| v.to_string();
        json::Object::new()
            .str("token", token)
            .str("host", &holder.host)
            .str("pid", &holder.pid.to_string())
            .str("started", &ms(run.at_ms))
            .str("fence", &run.fence.to_string())
            .str("n", &run.slot)
            .str("ended", &ms(run.at_ms + took.as_millis() as u64))
            .str("outcome", self.outcome)
            .str("status", &self.status.to_string())
            .finish()
    }
}

/// The run of `token` as the record keeps it from its start, as far as its client knows it:
/// a JSON object of its token, host and pid, without its closing brace; the take adds when it
/// started, its fencing token and its N on the server, so that the server's side encodes no
/// JSON.
pub fn started_json(token: &str, holder: &Holder) -> String {
    let mut json = json::Object::new()
        .str("token", token)
        .str("host", &holder.host)
        .str("pid", &holder.pid.to_string())
        .finish();
    json.pop();
    json
}

/// A run this client took: when (the server's clock, unix ms), its fencing token and its N in
/// the record ('' when not recorded), as the acquire answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub at_ms: u64,
    pub fence: i64,
    pub slot: String,
}

/// How long a run has held the lock, as its client counts it: from the take's answer to now,
/// or to the end of its lease if that came first. A run found lost later (its holder frozen past
/// its lease, its lease revoked) held it no longer than that: the watchdog stopped its command
/// at the lease's end. Every backend records a run's end with it.
#[derive(Debug, Clone, Copy)]
pub struct Tenure {
    /// When the take's answer came.
    at: std::time::Instant,
    /// The lease: `ttl` from this long after `at`, when the last renewal that counted was sent
    /// (zero: the take's own).
    lease_from: Duration,
    ttl: Duration,
}

impl Tenure {
    /// A lease of `ttl` taken now.
    pub fn new(ttl: Duration) -> Self {
        Self {
            at: std::time::Instant::now(),
            lease_from: Duration::ZERO,
            ttl,
        }
    }

    /// A renewal sent at `sent` counted: the lease is `ttl` from then.
    pub fn renewed(&mut self, sent: std::time::Instant, ttl: Duration) {
        self.lease_from = sent.saturating_duration_since(self.at);
        self.ttl = ttl;
    }

    /// How long the run has held the lock by now.
    pub fn held(&self) -> Duration {
        self.at.elapsed().min(self.lease_from + self.ttl)
    }
}

/// How a recorded run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// Still held by its holder, this long after it started (by the server's clock).
    Running { so_far: Duration },
    /// Never released, and its holder no longer holds the lock; `by`: when its lease had ended
    /// at the latest (unix ms, server clock), where the record knows it (a place of several
    /// holders), to order it against the runs after it.
    Vanished { by: Option<u64> },
    /// Released (or found lost): the outcome label and redlock's exit status.
    Ended {
        outcome: String,
        status: i32,
        took: Duration,
    },
}

/// One run of a lock, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The holder's owner token.
    pub token: String,
    pub host: String,
    pub pid: u32,
    /// When it took the lock, by the server's clock (unix ms).
    pub started_ms: u64,
    /// Its fencing token.
    pub fence: i64,
    pub end: RunEnd,
}

impl Run {
    /// Its outcome label: the recorded one, `running` or `vanished`.
    pub fn outcome(&self) -> &str {
        match &self.end {
            RunEnd::Running { .. } => RUNNING,
            RunEnd::Vanished { .. } => VANISHED,
            RunEnd::Ended { outcome, .. } => outcome,
        }
    }

    pub fn succeeded(&self) -> bool {
        self.outcome() == Outcome::Exited(0).label()
    }

    /// Whether it ended and did not succeed (vanished, failed, lost its lock...).
    pub fn failed(&self) -> bool {
        !matches!(self.end, RunEnd::Running { .. }) && !self.succeeded()
    }

    /// When it was over at the latest (unix ms, server clock): its end, or when a vanished
    /// run's lease had ended where the record knows it.
    pub fn over_by(&self) -> Option<u64> {
        match &self.end {
            RunEnd::Vanished { by } => *by,
            _ => self.ended_ms(),
        }
    }

    /// When it ended (unix ms, server clock), if it did.
    pub fn ended_ms(&self) -> Option<u64> {
        match &self.end {
            RunEnd::Ended { took, .. } => Some(self.started_ms + took.as_millis() as u64),
            _ => None,
        }
    }
}

/// The counters of a lock's record: runs by outcome label, busy attempts, skips.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(pub Vec<(String, u64)>);

impl Counts {
    /// The counter `name` (0 when never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// Runs that gave up on a busy lock (at once, or when their `--wait` ran out); a run that
    /// waited and then took the lock is not one.
    pub fn busy(&self) -> u64 {
        self.get(Outcome::Busy.label())
    }

    /// Runs skipped by `--min-interval`.
    pub fn skipped(&self) -> u64 {
        self.get(Outcome::Skipped.label())
    }

    /// Runs that lost their lock: found lost, or vanished.
    pub fn lost(&self) -> u64 {
        self.get(Outcome::LockLost.label()) + self.get(VANISHED)
    }
}

/// What `status` shows of a lock's record: its newest run, its last success, its counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The server's time when read (unix ms).
    pub now_ms: u64,
    pub last_run: Option<Run>,
    pub last_success: Option<Run>,
    /// The run that ended last (by the time it ended), whatever its ending: with several
    /// holders, a failure that ends after the last success is not hidden by a later start.
    pub last_ended: Option<Run>,
    pub counts: Counts,
}

/// What `history` and `check` read: the summary and every run the list keeps, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Runs {
    pub summary: Summary,
    pub runs: Vec<Run>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endings_carry_the_label_and_the_status() {
        let ok = RunEnding::of(Outcome::Exited(0), 75);
        assert!(ok.succeeded());
        assert_eq!((ok.outcome, ok.status), ("success", 0));
        let busy = RunEnding::of(Outcome::Signaled(9), 75);
        assert_eq!((busy.outcome, busy.status), ("failed", 137));
        assert!(!busy.succeeded());
        assert_eq!(busy.lost.lost_status, 76);
        assert_eq!(busy.lost.lost_outcome, Outcome::LockLost.label());
    }
}
