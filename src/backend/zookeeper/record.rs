//! The record of a lock's runs as ZooKeeper keeps it: one node, the lock's child `record`, whose
//! data is one JSON object, rewritten whole and guarded by its version (a write that finds
//! another's first reads it again):
//!
//! ```json
//! {"runs": [RUN, ...], "counts": {"success": 3, "busy": 1}, "last_success": RUN, "last_ended": RUN}
//! ```
//!
//! `runs` holds the newest [`RUNS_KEPT`] runs, newest first, each as `run_record` writes it.
//! The rules are the record's everywhere: a run with no end whose entry is gone vanished, and is
//! counted once, by the next run that takes the lock; readers show what is kept. A few KiB: far
//! below ZooKeeper's 1 MiB a node may hold.
//!
//! No I/O here: the locker and the admin commands read and write the node.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::backend::run_record;
use crate::lock::record::{Counts, RUNS_KEPT, RunEnd, Runs, Summary, VANISHED};

/// The record, as read from its node (empty when there is none, or when it is not JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Record {
    runs: Vec<Value>,
    counts: BTreeMap<String, u64>,
    last_success: Option<Value>,
    last_ended: Option<Value>,
}

impl Record {
    /// The record in a node's data: what cannot be read is left out (and overwritten by the
    /// next write).
    pub(crate) fn parse(data: &[u8]) -> Record {
        let Ok(Value::Object(mut doc)) = serde_json::from_slice::<Value>(data) else {
            return Record::default();
        };
        let runs = match doc.remove("runs") {
            Some(Value::Array(runs)) => runs.into_iter().filter(Value::is_object).collect(),
            _ => Vec::new(),
        };
        let counts = match doc.remove("counts") {
            Some(Value::Object(counts)) => counts
                .into_iter()
                .filter_map(|(label, n)| Some((label, n.as_u64()?)))
                .collect(),
            _ => BTreeMap::new(),
        };
        let run = |v: Option<Value>| v.filter(Value::is_object);
        Record {
            runs,
            counts,
            last_success: run(doc.remove("last_success")),
            last_ended: run(doc.remove("last_ended")),
        }
    }

    /// The node's data.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        json!({
            "runs": self.runs,
            "counts": self.counts,
            "last_success": self.last_success,
            "last_ended": self.last_ended,
        })
        .to_string()
        .into_bytes()
    }

    fn token_of(run: &Value) -> Option<&str> {
        run.get("token").and_then(Value::as_str)
    }

    fn position(&self, token: &str) -> Option<usize> {
        self.runs
            .iter()
            .position(|r| Self::token_of(r) == Some(token))
    }

    /// A run that took the lock, as `run_record::started` wrote it: first in the list (once).
    pub(crate) fn start(&mut self, run: &str) {
        let Ok(run) = serde_json::from_str::<Value>(run) else {
            return;
        };
        if let Some(token) = Self::token_of(&run)
            && self.position(token).is_some()
        {
            return;
        }
        self.runs.insert(0, run);
        self.runs.truncate(RUNS_KEPT as usize);
    }

    /// The runs with no end whose entries are gone (not among `live`, the tokens queued now)
    /// marked as vanished, each counted once; whether any was.
    pub(crate) fn vanish(&mut self, live: &[&str]) -> bool {
        let mut marked = 0;
        for run in &mut self.runs {
            let running = run.get("outcome").is_none();
            let token = Self::token_of(run).unwrap_or_default();
            if running && !live.contains(&token) {
                run["outcome"] = json!(VANISHED);
                marked += 1;
            }
        }
        if marked > 0 {
            *self.counts.entry(VANISHED.to_owned()).or_default() += marked;
        }
        marked > 0
    }

    /// A run's end, as `run_record::ended` wrote it: in the list in its place (or first, when it
    /// was never listed or has been pruned), counted by its outcome, and copied as the last run
    /// to end (and the last success).
    pub(crate) fn end(&mut self, run: &str) {
        let Ok(run) = serde_json::from_str::<Value>(run) else {
            return;
        };
        let outcome = run
            .get("outcome")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        match Self::token_of(&run).and_then(|t| self.position(t)) {
            Some(at) => self.runs[at] = run.clone(),
            None => {
                self.runs.insert(0, run.clone());
                self.runs.truncate(RUNS_KEPT as usize);
            }
        }
        self.count(&outcome);
        if outcome == crate::exit::Outcome::Exited(0).label() {
            self.last_success = Some(run.clone());
        }
        self.last_ended = Some(run);
    }

    /// How the run of `token` ended, as listed (None: not listed, or running).
    pub(crate) fn outcome_of(&self, token: &str) -> Option<&str> {
        let run = &self.runs[self.position(token)?];
        run.get("outcome").and_then(Value::as_str)
    }

    /// One more of `label` (a busy run, a skipped one).
    pub(crate) fn count(&mut self, label: &str) {
        *self.counts.entry(label.to_owned()).or_default() += 1;
    }

    /// The last success's record, for `--min-interval`.
    pub(crate) fn last_success(&self) -> Option<Vec<u8>> {
        self.last_success
            .as_ref()
            .map(|r| r.to_string().into_bytes())
    }

    /// The record as `history` and `check` read it: a run with no end is running while its
    /// token is among `live`, else it vanished.
    pub(crate) fn runs(&self, live: &[&str], now_ms: u64) -> Runs {
        let read = |run: &Value, running: bool| {
            let token = Self::token_of(run).unwrap_or_default();
            run_record::run(
                run.to_string().as_bytes(),
                0,
                running && live.contains(&token),
                now_ms,
            )
        };
        let runs: Vec<_> = self.runs.iter().filter_map(|r| read(r, true)).collect();
        let copy = |run: &Option<Value>| {
            run.as_ref()
                .and_then(|r| read(r, false))
                .filter(|r| !matches!(r.end, RunEnd::Running { .. }))
        };
        Runs {
            summary: Summary {
                now_ms,
                last_run: runs.first().cloned(),
                last_success: copy(&self.last_success),
                last_ended: copy(&self.last_ended),
                counts: Counts(self.counts.iter().map(|(l, n)| (l.clone(), *n)).collect()),
            },
            runs,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::exit::Outcome;
    use crate::lock::Holder;
    use crate::lock::record::RunEnding;

    fn holder() -> Holder {
        Holder {
            host: "h".into(),
            pid: 7,
            command: "true".into(),
            started: 1,
        }
    }

    fn ended(token: &str, at: u64, outcome: Outcome) -> String {
        run_record::ended(
            token,
            &holder(),
            (at, 41, None),
            Duration::from_millis(5),
            &RunEnding::of(outcome, 75),
        )
    }

    #[test]
    fn runs_are_kept_newest_first_counted_and_vanish_once() {
        let mut record = Record::parse(b"");
        record.start(&run_record::started("a", &holder(), 1000, Some(10)));
        record.start(&run_record::started("a", &holder(), 1000, Some(10)));
        assert_eq!(record.runs.len(), 1, "a run is listed once");
        record.end(&ended("a", 1000, Outcome::Exited(0)));
        record.count("busy");
        record.start(&run_record::started("b", &holder(), 2000, Some(11)));
        // b's entry is gone and it never ended: it vanished, counted once however often seen.
        assert!(record.vanish(&["c"]));
        assert!(!record.vanish(&["c"]));
        let record = Record::parse(&record.to_bytes());
        let read = record.runs(&[], 3000);
        let outcomes: Vec<_> = read
            .runs
            .iter()
            .map(|r| (r.token.clone(), r.outcome().to_owned()))
            .collect();
        assert_eq!(
            outcomes,
            [
                ("b".into(), "vanished".into()),
                ("a".into(), "success".into())
            ]
        );
        let counts = &read.summary.counts;
        assert_eq!(
            (counts.get("success"), counts.busy(), counts.get(VANISHED)),
            (1, 1, 1)
        );
        assert_eq!(
            read.summary.last_success.map(|r| r.token).as_deref(),
            Some("a")
        );
        assert!(record.last_success().is_some());
    }

    #[test]
    fn a_running_run_is_running_while_its_entry_is_there_and_the_list_is_cut() {
        let mut record = Record::default();
        for i in 0..RUNS_KEPT + 3 {
            let token = format!("t{i}");
            record.start(&run_record::started(
                &token,
                &holder(),
                1000 + u64::from(i),
                Some(i.into()),
            ));
            record.end(&ended(&token, 1000 + u64::from(i), Outcome::Exited(1)));
        }
        record.start(&run_record::started("now", &holder(), 5000, Some(99)));
        let read = record.runs(&["now"], 5100);
        assert_eq!(read.runs.len(), RUNS_KEPT as usize);
        assert_eq!(read.runs[0].outcome(), "running");
        assert_eq!(read.summary.counts.get("failed"), u64::from(RUNS_KEPT) + 3);
        // Not JSON, or not redlock's: read as empty.
        assert_eq!(Record::parse(b"[1]"), Record::default());
        assert_eq!(Record::parse(b"\xff"), Record::default());
    }
}
