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

use crate::backend::redis::reply::{Fields, FromReply};
use crate::backend::redis::scripts::{Args, args};
use crate::lock::record::{Counts, Lost, RUNNING, Run, RunEnd, RunEnding, Runs, Summary, VANISHED};

pub use crate::lock::record::{RECORD_TTL, RUNS_KEPT};

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

/// [`Lost`] as the scripts take it: `lost_outcome`, `lost_status`, `lost_by`.
impl Args for Lost {
    fn push(&self, argv: &mut Vec<String>) {
        self.lost_outcome.push(argv);
        self.lost_status.push(argv);
        self.lost_by.push(argv);
    }
    fn names(_field: &'static str, names: &mut Vec<&'static str>) {
        names.extend(["lost_outcome", "lost_status", "lost_by"]);
    }
}

/// [`RunEnding`] as the scripts take it: `outcome`, `status`, then its [`Lost`].
impl Args for RunEnding {
    fn push(&self, argv: &mut Vec<String>) {
        self.outcome.push(argv);
        self.status.push(argv);
        self.lost.push(argv);
    }
    fn names(field: &'static str, names: &mut Vec<&'static str>) {
        names.extend(["outcome", "status"]);
        Lost::names(field, names);
    }
}

/// A run from the next field, a nested array (see `shown` in runs.lua); Some(None) for
/// `false` (no run).
fn read_run(f: &mut Fields, now: u64) -> Option<Option<Run>> {
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

/// The counters from the next field: name, value, ... (a field that is not a number is not one of
/// redlock's counters: skipped).
fn read_counts(f: &mut Fields) -> Option<Counts> {
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

/// The summary from the next field (see `summary` in runs.lua).
pub(crate) fn read_summary(f: &mut Fields) -> Option<Summary> {
    let mut s = Fields::of(f.value()?)?;
    let now_ms = u64::try_from(s.int()?).ok()?;
    let last_run = read_run(&mut s, now_ms)?;
    let last_success = read_run(&mut s, now_ms)?;
    let last_ended = read_run(&mut s, now_ms)?;
    let counts = read_counts(&mut s)?;
    s.end().then_some(Summary {
        now_ms,
        last_run,
        last_success,
        last_ended,
        counts,
    })
}

impl FromReply for Runs {
    fn from_reply(value: &Value) -> Option<Self> {
        let mut f = Fields::of(value)?;
        let summary = read_summary(&mut f)?;
        let mut runs = Vec::new();
        while !f.end() {
            runs.push(read_run(&mut f, summary.now_ms)??);
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
        use crate::exit::CUT_SHORT;
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
}
