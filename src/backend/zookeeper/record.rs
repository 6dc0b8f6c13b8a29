//! The record of a lock's runs as ZooKeeper keeps it: the lock's child `record`, whose data is
//! one JSON object, rewritten whole and guarded by its version (a write that finds another's
//! first reads it again), and a counter per label beside it, whose version is the count (a
//! count is one unguarded write, exact however many runs count at once: etcd's counters are
//! the same):
//!
//! ```json
//! {"runs": [RUN, ...], "last_success": RUN, "last_ended": RUN}
//! ```
//!
//! `runs` holds the newest [`RUNS_KEPT`] runs, newest first, each as `run_record` writes it.
//! The rules are the record's everywhere: a run with no end whose entry is gone vanished, and is
//! counted once, by the next run that takes the lock; readers show what is kept. A few KiB: far
//! below ZooKeeper's 1 MiB a node may hold.
//!
//! No I/O here: each change says what it counts ([`Counted`]); the locker and the admin
//! commands read and write the nodes.

use serde_json::{Value, json};

use crate::backend::run_record;
use crate::lock::record::{Counts, RUNS_KEPT, RunEnd, Runs, Summary, VANISHED};

/// The record, as read from its node (empty when there is none, or when it is not JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Record {
    runs: Vec<Value>,
    last_success: Option<Value>,
    last_ended: Option<Value>,
}

/// What a change of the record counts: labels counted up, and counts taken back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    pub up: Vec<String>,
    pub down: Vec<String>,
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
        let run = |v: Option<Value>| v.filter(Value::is_object);
        Record {
            runs,
            last_success: run(doc.remove("last_success")),
            last_ended: run(doc.remove("last_ended")),
        }
    }

    /// The node's data.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        json!({
            "runs": self.runs,
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

    /// The runs with no end that took the lock before the run of fencing token `fence` and
    /// whose entries were gone when it read the queue (not among `live`, the tokens queued then)
    /// marked as vanished: their entries went without a release. What to count: each once.
    pub(crate) fn vanish(&mut self, fence: i64, live: &[&str]) -> Counted {
        let mut counted = Counted::default();
        for run in &mut self.runs {
            let running = run.get("outcome").is_none();
            let before = run
                .get("fence")
                .and_then(Value::as_i64)
                .is_some_and(|f| f < fence);
            let token = Self::token_of(run).unwrap_or_default();
            if running && before && !live.contains(&token) {
                run["outcome"] = json!(VANISHED);
                counted.up.push(VANISHED.to_owned());
            }
        }
        counted
    }

    /// A run's end, as `run_record::ended` wrote it: in the list in its place (or first, when it
    /// was never listed or has been pruned), counted by its outcome, and copied as the last run
    /// to end (and the last success). A run the next holder marked vanished, which turns out to
    /// have been lost (its own renewal found its entry gone), is counted as lost instead.
    pub(crate) fn end(&mut self, run: &str) -> Counted {
        let mut counted = Counted::default();
        let Ok(run) = serde_json::from_str::<Value>(run) else {
            return counted;
        };
        let outcome = run
            .get("outcome")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        match Self::token_of(&run).and_then(|t| self.position(t)) {
            Some(at) => {
                if self.runs[at].get("outcome").and_then(Value::as_str) == Some(VANISHED) {
                    counted.down.push(VANISHED.to_owned());
                }
                self.runs[at] = run.clone();
            }
            None => {
                self.runs.insert(0, run.clone());
                self.runs.truncate(RUNS_KEPT as usize);
            }
        }
        counted.up.push(outcome.clone());
        if outcome == crate::exit::Outcome::Exited(0).label() {
            self.last_success = Some(run.clone());
        }
        self.last_ended = Some(run);
        counted
    }

    /// Whether the run of `token` is listed, with no end: it took the lock and runs.
    pub(crate) fn running(&self, token: &str) -> bool {
        self.position(token)
            .is_some_and(|at| self.runs[at].get("outcome").is_none())
    }

    /// How the run of `token` ended, as listed (None: not listed, or running).
    pub(crate) fn outcome_of(&self, token: &str) -> Option<&str> {
        let run = &self.runs[self.position(token)?];
        run.get("outcome").and_then(Value::as_str)
    }

    /// The last success's record, for `--min-interval`.
    pub(crate) fn last_success(&self) -> Option<Vec<u8>> {
        self.last_success
            .as_ref()
            .map(|r| r.to_string().into_bytes())
    }

    /// The record as `history` and `check` read it, with `counts` (each label's count, less
    /// what was taken back): a run with no end is running while its token is among `live`,
    /// else it vanished.
    pub(crate) fn runs(&self, live: &[&str], counts: Counts, now_ms: u64) -> Runs {
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
                counts,
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
    fn runs_are_kept_newest_first_and_each_change_says_what_it_counts() {
        let mut record = Record::parse(b"");
        record.start(&run_record::started("a", &holder(), 1000, Some(10)));
        record.start(&run_record::started("a", &holder(), 1000, Some(10)));
        assert_eq!(record.runs.len(), 1, "a run is listed once");
        let counted = record.end(&ended("a", 1000, Outcome::Exited(0)));
        assert_eq!(counted.up, ["success"]);
        record.start(&run_record::started("b", &holder(), 2000, Some(11)));
        record.start(&run_record::started("c", &holder(), 2500, Some(13)));
        // Seen by the run of token 12: b's entry was gone and it never ended, so it vanished,
        // counted once however often seen; c took the lock after 12's look, and is left alone.
        assert_eq!(record.vanish(12, &["x"]).up, [VANISHED]);
        assert_eq!(record.vanish(12, &["x"]), Counted::default());
        let record = Record::parse(&record.to_bytes());
        let read = record.runs(&["c"], Counts(vec![("success".into(), 1)]), 3000);
        let outcomes: Vec<_> = read
            .runs
            .iter()
            .map(|r| (r.token.clone(), r.outcome().to_owned()))
            .collect();
        let want = [("c", "running"), ("b", "vanished"), ("a", "success")]
            .map(|(t, o)| (t.to_owned(), o.to_owned()));
        assert_eq!(outcomes, want);
        assert_eq!(read.summary.counts.get("success"), 1);
        assert_eq!(
            read.summary.last_success.map(|r| r.token).as_deref(),
            Some("a")
        );
        assert!(record.last_success().is_some());
        // b was lost rather than gone: its own end takes the vanished count back.
        let mut record = record;
        let lost = record.end(&ended("b", 2000, Outcome::LockLost));
        assert_eq!(
            (lost.up, lost.down),
            (vec!["lock_lost".to_owned()], vec![VANISHED.to_owned()])
        );
        assert_eq!(record.outcome_of("b"), Some("lock_lost"));
    }

    #[test]
    fn the_list_keeps_the_newest_and_what_is_not_redlocks_reads_as_empty() {
        let mut record = Record::default();
        for i in 0..RUNS_KEPT + 3 {
            let token = format!("t{i}");
            let at = 1000 + u64::from(i);
            record.start(&run_record::started(&token, &holder(), at, Some(i.into())));
            record.end(&ended(&token, at, Outcome::Exited(1)));
        }
        let read = record.runs(&[], Counts::default(), 5100);
        assert_eq!(read.runs.len(), RUNS_KEPT as usize);
        assert_eq!(read.runs[0].token, format!("t{}", RUNS_KEPT + 2));
        assert_eq!(Record::parse(b"[1]"), Record::default());
        assert_eq!(Record::parse(b"\xff"), Record::default());
    }
}
