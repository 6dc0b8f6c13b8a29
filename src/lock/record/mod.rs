//! The record of a lock's runs, kept in the lock's own Redis by the scripts redlock already
//! sends, in the same call as the lock's own step: `ring.lua` writes it (the take's
//! `start.lua`, the give-back's `ended.lua`, the renewal's `lost.lua`, and the feature scripts
//! through the same functions), `read.lua` reads it. This module says what the scripts are
//! told of it (how long it is kept, how many runs, how a run ended) and reads back what the
//! admin commands show.
//!
//! The record is a ring of the last [`RUNS_KEPT`] runs in the lock's `:counts` hash, beside the
//! counters by outcome: the take records a run as started (its token, host, pid, the server's
//! time, its fencing token) and answers its place N; the release writes how it ended (the
//! client sends the run's JSON, so the release reads nothing of the record); a renewal that
//! finds the lock lost records that. A run with no end whose holder no longer holds the lock
//! vanished (SIGKILLed, its machine gone): the next acquire, or the first reader, marks and
//! counts it. Every write is best-effort: a record that is not redlock's never stops the lock.
//! Builds before 0.2 kept a list (`:runs`), still read beside the ring.

use std::time::Duration;

use redis::Value;

use crate::exit::{self, Outcome};
use crate::lock::Holder;
use crate::lock::reply::{Fields, FromReply};
use crate::lock::scripts::args;
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

args! {
    /// How the scripts that write the record keep it: how many runs, how long.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Kept {
        /// How many runs the list keeps.
        pub runs_kept: u32,
        /// How long each key of the record lives after the last write to it.
        pub record_ttl: Duration,
    }
}

impl Kept {
    /// The record as redlock keeps it: [`RUNS_KEPT`] runs, for [`RECORD_TTL`].
    pub const DEFAULT: Kept = Kept {
        runs_kept: RUNS_KEPT,
        record_ttl: RECORD_TTL,
    };
}

args! {
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
}

impl Lost {
    pub const LOCK_LOST: Lost = Lost {
        lost_outcome: "lock_lost",
        lost_status: exit::LOCK_LOST,
        lost_by: 0,
    };
}

args! {
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

    /// The run as the record keeps it once ended (see read.lua): `started` is when the lock
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
/// started, its fencing token and its N (ring.lua), so that no script encodes JSON.
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

    /// A run from the next field, a nested array (see `shown` in runs.lua); Some(None) for
    /// `false` (no run).
    fn read(f: &mut Fields, now: u64) -> Option<Option<Run>> {
        let value = f.value()?;
        if matches!(value, Value::Nil) {
            return Some(None);
        }
        let mut r = Fields::of(value)?;
        let (token, host, pid) = (r.text()?, r.text()?, r.int()?);
        let (started_ms, fence, ended) = (u64::try_from(r.int()?).ok()?, r.int()?, r.int()?);
        let (outcome, status) = (r.text()?, r.int()?);
        if !r.end() {
            return None;
        }
        let end = match outcome.as_str() {
            RUNNING => RunEnd::Running {
                so_far: Duration::from_millis(now.saturating_sub(started_ms)),
            },
            VANISHED => RunEnd::Vanished {
                by: u64::try_from(ended).ok().filter(|&by| by > 0),
            },
            _ => RunEnd::Ended {
                outcome,
                status: i32::try_from(status).ok()?,
                took: Duration::from_millis(
                    u64::try_from(ended).map_or(0, |e| e.saturating_sub(started_ms)),
                ),
            },
        };
        Some(Some(Run {
            token,
            host,
            pid: u32::try_from(pid).unwrap_or(0),
            started_ms,
            fence,
            end,
        }))
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

    fn read(f: &mut Fields) -> Option<Counts> {
        let mut c = Fields::of(f.value()?)?;
        let mut counts = Vec::new();
        while !c.end() {
            let name = c.text()?;
            // A counter moved back below zero (a correction) reads as 0; a field that is not
            // a number is not one of redlock's counters (something else wrote it): skipped.
            if let Some(n) = c.int() {
                counts.push((name, n.max(0) as u64));
            }
        }
        counts.sort();
        Some(Counts(counts))
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

impl Summary {
    /// From the next field (see `summary` in runs.lua).
    pub(crate) fn read(f: &mut Fields) -> Option<Summary> {
        let mut s = Fields::of(f.value()?)?;
        let now_ms = u64::try_from(s.int()?).ok()?;
        let last_run = Run::read(&mut s, now_ms)?;
        let last_success = Run::read(&mut s, now_ms)?;
        let last_ended = Run::read(&mut s, now_ms)?;
        let counts = Counts::read(&mut s)?;
        s.end().then_some(Summary {
            now_ms,
            last_run,
            last_success,
            last_ended,
            counts,
        })
    }
}

/// What `history` and `check` read: the summary and every run the list keeps, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Runs {
    pub summary: Summary,
    pub runs: Vec<Run>,
}

impl FromReply for Runs {
    fn from_reply(value: &Value) -> Option<Self> {
        let mut f = Fields::of(value)?;
        let summary = Summary::read(&mut f)?;
        let mut runs = Vec::new();
        while !f.end() {
            runs.push(Run::read(&mut f, summary.now_ms)??);
        }
        Some(Runs { summary, runs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn run(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| text(s)).collect())
    }

    #[test]
    fn runs_read_back_in_each_state() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                text("5000"),
                run(&["t3", "h", "7", "4000", "3", "-1", "running", "-1"]),
                Value::Nil,
                Value::Nil,
                Value::Array(vec![
                    text("busy"),
                    Value::Int(4),
                    text("vanished"),
                    text("1"),
                ]),
            ]),
            run(&["t3", "h", "7", "4000", "3", "-1", "running", "-1"]),
            run(&["t2", "h", "8", "3000", "2", "-1", "vanished", "-1"]),
            run(&["t1", "g", "9", "1000", "1", "1500", "failed", "3"]),
        ]);
        let runs = Runs::from_reply(&reply).unwrap();
        assert_eq!(runs.summary.now_ms, 5000);
        assert_eq!(runs.summary.last_success, None);
        assert_eq!(
            runs.summary.last_run.as_ref().map(|r| &r.end),
            Some(&RunEnd::Running {
                so_far: Duration::from_secs(1)
            })
        );
        let counts = &runs.summary.counts;
        assert_eq!((counts.busy(), counts.lost(), counts.skipped()), (4, 1, 0));
        assert_eq!(runs.runs.len(), 3);
        assert_eq!(runs.runs[1].outcome(), "vanished");
        assert!(runs.runs[1].failed() && !runs.runs[0].failed());
        let failed = &runs.runs[2];
        assert_eq!(failed.ended_ms(), Some(1500));
        assert_eq!(
            failed.end,
            RunEnd::Ended {
                outcome: "failed".into(),
                status: 3,
                took: Duration::from_millis(500)
            }
        );
        // A run cut short is not a reply.
        let short = Value::Array(vec![
            Value::Array(vec![
                text("1"),
                Value::Nil,
                Value::Nil,
                Value::Nil,
                Value::Array(vec![]),
            ]),
            run(&["t1", "g"]),
        ]);
        assert_eq!(Runs::from_reply(&short), None);
    }

    /// read.lua's summary reads these counters by name: every label a run can end with.
    #[test]
    fn the_summary_reads_every_outcome_label() {
        use crate::exit::Outcome::*;
        let lua = include_str!("read.lua");
        let list = lua.split("local COUNTERS = {").nth(1).unwrap();
        let list = list.split('}').next().unwrap();
        let outcomes = [
            Exited(0),
            Exited(1),
            Busy,
            Skipped,
            Interrupted(0),
            NotRun { found: true },
            LockLost,
            MaxRuntime,
            Usage,
            Unavailable,
            Internal,
        ];
        let labels = outcomes
            .iter()
            .map(|o| o.label())
            .chain([CUT_SHORT, VANISHED]);
        for label in labels {
            assert!(
                list.contains(&format!("'{label}'")),
                "{label} missing from read.lua"
            );
        }
    }

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
