//! The record of runs as etcd keeps it: a key per run (`BASE/run/LEASE`, JSON: `run_record`),
//! written when the run takes the lock and again when it ends; the last success and the last
//! run to end copied beside it; a counter per label. The rules are the record's everywhere: a
//! run with no end whose entry is gone (its lease ran out) vanished; each is counted once, by
//! the next run that takes the lock (or by the release of a run found lost); readers show what
//! is kept.
//!
//! Times are the holders' clocks (unix ms): etcd keeps no clock of its own to read.

pub(crate) use crate::backend::run_record::{
    done, ended, has_ended, outcome_of, run, started, vanished,
};
pub(crate) use crate::lock::record::VANISHED;
use crate::lock::record::{Counts, RUNS_KEPT, Run, RunEnd, Runs, Summary};

/// What a read of the lock's whole range found of its record.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// Each run's record: its value, its create revision, and whether its entry is there.
    pub runs: Vec<(Vec<u8>, i64, bool)>,
    pub last_success: Option<Vec<u8>>,
    pub last_ended: Option<Vec<u8>>,
    /// Each counter: its label and count (a key's version, or minus it for a count taken
    /// back), one label perhaps more than once.
    pub counts: Vec<(String, i64)>,
}

impl Read {
    /// The record as `history` and `check` read it, the runs newest first.
    pub(crate) fn runs(&self, now_ms: u64) -> Runs {
        let mut kept: Vec<Run> = self
            .runs
            .iter()
            .filter_map(|(value, fence, running)| run(value, *fence, *running, now_ms))
            .collect();
        kept.sort_by_key(|r| std::cmp::Reverse(r.fence));
        kept.truncate(RUNS_KEPT as usize);
        let copy = |value: &Option<Vec<u8>>| {
            value
                .as_deref()
                .and_then(|v| run(v, 0, false, now_ms))
                .filter(|r| !matches!(r.end, RunEnd::Running { .. }))
        };
        let mut summed = std::collections::BTreeMap::<&str, i64>::new();
        for (label, n) in &self.counts {
            *summed.entry(label).or_default() += n;
        }
        let counts: Vec<(String, u64)> = summed
            .into_iter()
            .map(|(label, n)| (label.to_owned(), n.max(0) as u64))
            .collect();
        let last_ended = copy(&self.last_ended);
        Runs {
            summary: Summary {
                now_ms,
                last_run: kept.first().cloned(),
                last_success: copy(&self.last_success),
                last_ended,
                counts: Counts(counts),
            },
            runs: kept,
        }
    }
}
