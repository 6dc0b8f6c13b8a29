//! How the record of runs reads: one run as a line or a JSON object, what `status` adds (the last
//! run, the last success, the counters), and a quorum's runs merged into one list.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use crate::admin::render::field;
use crate::lock::record::{Counts, Run, RunEnd, VANISHED};
use crate::lock::record::{RECORD_TTL, RUNS_KEPT, Summary};
use crate::report::json::{self, Object};

/// Whole seconds, for people.
fn secs(d: Duration) -> String {
    crate::report::duration(Duration::from_secs(d.as_secs()))
}

/// A run's length, as people read it (`167ms`, `1.5s`, `2m 30s`).
fn took(d: Duration) -> String {
    crate::report::duration(d)
}

/// When (RFC 3339, by the server's clock) and how long before `now_ms`.
pub(crate) fn when(at_ms: u64, now_ms: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(at_ms);
    let ago = Duration::from_millis(now_ms.saturating_sub(at_ms));
    format!(
        "{} ({} ago)",
        humantime::format_rfc3339_seconds(at),
        secs(ago)
    )
}

/// How a run stands: `success`, `failed (exit 3) after 12s`, `running for 5s`, `vanished ...`.
pub(crate) fn how(run: &Run) -> String {
    match &run.end {
        RunEnd::Running { so_far } => format!("running for {}", took(*so_far)),
        RunEnd::Vanished { .. } => "vanished (its lease ended without a release)".to_owned(),
        RunEnd::Ended {
            outcome,
            status,
            took: t,
        } => format!("{} (exit {status}) after {}", field(outcome), took(*t)),
    }
}

/// How long it took (`12s`), ran so far (`5s so far`), or `unknown` (vanished).
pub(crate) fn duration(run: &Run) -> String {
    match &run.end {
        RunEnd::Ended { took: t, .. } => took(*t),
        RunEnd::Running { so_far } => format!("{} so far", took(*so_far)),
        RunEnd::Vanished { .. } => "unknown".to_owned(),
    }
}

/// Who ran it: `web1 pid 4711`.
pub(crate) fn who(run: &Run) -> String {
    format!("{} pid {}", field(&run.host), run.pid)
}

/// One line of `history`, tab-separated: start, host and pid, duration, how it ended, fencing
/// token.
pub(crate) fn history_line(run: &Run) -> String {
    let started = UNIX_EPOCH + Duration::from_millis(run.started_ms);
    let ended = match &run.end {
        RunEnd::Ended {
            outcome, status, ..
        } => format!("{} (exit {status})", field(outcome)),
        RunEnd::Running { .. } => "running".to_owned(),
        RunEnd::Vanished { .. } => format!("{VANISHED} (lease ended without a release)"),
    };
    format!(
        "{}\t{}\t{}\t{ended}\tfence {}\n",
        humantime::format_rfc3339_seconds(started),
        who(run),
        duration(run),
        run.fence
    )
}

/// One run as JSON: `host`, `pid`, `started` (unix seconds, server clock), `started_ms`,
/// `duration_ms` (null unless ended), `outcome`, `exit_status` (null unless ended), `fence`,
/// `token`.
pub(crate) fn run_json(run: &Run) -> String {
    let (duration, status) = match &run.end {
        RunEnd::Ended { took, status, .. } => (Some(took.as_millis() as i128), Some(*status)),
        _ => (None, None),
    };
    Object::new()
        .str("host", &run.host)
        .int("pid", run.pid)
        .int("started", run.started_ms / 1000)
        .int("started_ms", run.started_ms)
        .opt_int("duration_ms", duration)
        .str("outcome", run.outcome())
        .opt_int("exit_status", status)
        .int("fence", run.fence)
        .str("token", &run.token)
        .finish()
}

fn opt_run_json(run: Option<&Run>) -> String {
    run.map_or_else(|| "null".to_owned(), run_json)
}

/// The counters every `counts` object has, beside any other the record holds.
const COUNTED: &[&str] = &[
    "busy",
    "skipped",
    "lost",
    "success",
    "failed",
    "lock_lost",
    "vanished",
    "max_runtime",
    "not_run",
    "interrupted",
    "unavailable",
    "error",
];

/// `counts` as one JSON object: `lost` is `lock_lost` and `vanished` together.
pub(crate) fn counts_json(counts: &Counts) -> String {
    let mut all: BTreeMap<&str, u64> = counts.0.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    all.insert("lost", counts.lost());
    let mut obj = Object::new();
    for name in COUNTED {
        obj = obj.int(name, all.remove(name).unwrap_or(0));
    }
    for (name, value) in all {
        obj = obj.int(name, value);
    }
    obj.finish()
}

/// `status --json`'s fields of the record: `last_run`, `last_success`, `counts`.
pub(crate) fn summary_fields(obj: Object, summary: &Summary) -> Object {
    obj.raw("last_run", &opt_run_json(summary.last_run.as_ref()))
        .raw("last_success", &opt_run_json(summary.last_success.as_ref()))
        .raw("counts", &counts_json(&summary.counts))
}

/// `status`'s lines of the record: the last run, the last success (with, from `done`, how long
/// `--min-interval` runs still skip), the counters.
pub(crate) fn summary_text(
    summary: &Summary,
    done: Option<(Duration, Option<Duration>)>,
) -> String {
    let mut out = String::new();
    let now = summary.now_ms;
    if let Some(run) = &summary.last_run {
        out.push_str(&format!(
            "  last run: {}, {}, {}, fence {}\n",
            when(run.started_ms, now),
            who(run),
            how(run),
            run.fence
        ));
    }
    let skip = done
        .and_then(|(_, left)| left)
        .map_or_else(String::new, |l| {
            format!("; --min-interval runs skip for another {}", secs(l))
        });
    match (&summary.last_success, done) {
        (Some(run), _) => {
            let ended = run.ended_ms().unwrap_or(run.started_ms);
            let started = UNIX_EPOCH + Duration::from_millis(run.started_ms);
            out.push_str(&format!(
                "  last success: {} ago, {}, started {}, took {}, fence {}{skip}\n",
                secs(Duration::from_millis(now.saturating_sub(ended))),
                who(run),
                humantime::format_rfc3339_seconds(started),
                duration(run),
                run.fence
            ));
        }
        // Recorded for --min-interval by a redlock that kept no record of runs.
        (None, Some((ago, _))) => {
            out.push_str(&format!("  last success: {} ago{skip}\n", secs(ago)))
        }
        (None, None) => {}
    }
    let counts = &summary.counts;
    if !counts.0.is_empty() {
        let ended: Vec<String> = counts
            .0
            .iter()
            .filter(|(name, v)| *v > 0 && !["busy", "skipped"].contains(&name.as_str()))
            .map(|(name, v)| format!("{v} {}", field(name)))
            .collect();
        let ended = if ended.is_empty() {
            String::new()
        } else {
            format!("; runs ended: {}", ended.join(", "))
        };
        out.push_str(&format!(
            "  counts:   {} busy, {} skipped, {} lost{ended}\n",
            counts.busy(),
            counts.skipped(),
            counts.lost()
        ));
    }
    out
}

/// The runs of a quorum's nodes as one list, newest first: a run (a token) recorded on several
/// nodes once, as the node that saw it end says (the most common ending among the nodes that
/// saw one, a success on a tie; a node that missed its release shows it vanished), at most
/// [`RUNS_KEPT`].
pub(crate) fn merged(per_node: &[&[Run]]) -> Vec<Run> {
    let mut by_token: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for runs in per_node {
        for run in *runs {
            by_token.entry(&run.token).or_default().push(run);
        }
    }
    let mut runs: Vec<Run> = by_token
        .into_values()
        .map(|seen| {
            let ended = |r: &&Run| matches!(r.end, RunEnd::Ended { .. });
            let running = |r: &&Run| matches!(r.end, RunEnd::Running { .. });
            let votes = |r: &Run| seen.iter().filter(|o| o.outcome() == r.outcome()).count();
            seen.iter()
                .copied()
                .filter(ended)
                .max_by_key(|r| (votes(r), r.succeeded()))
                .or_else(|| seen.iter().copied().find(running))
                .unwrap_or(seen[0])
                .clone()
        })
        .collect();
    runs.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then(b.fence.cmp(&a.fence)));
    runs.truncate(RUNS_KEPT as usize);
    runs
}

/// The record's summary over a quorum: the newest run and the latest success any node has, and
/// each counter as the node that counted most has it (each node counts what it saw).
pub(crate) fn merged_summary(summaries: &[&Summary], runs: &[Run]) -> Summary {
    let now_ms = summaries.iter().map(|s| s.now_ms).max().unwrap_or(0);
    let last_success = summaries
        .iter()
        .filter_map(|s| s.last_success.as_ref())
        .max_by_key(|r| r.ended_ms().unwrap_or(r.started_ms))
        .cloned();
    let last_ended = summaries
        .iter()
        .filter_map(|s| s.last_ended.as_ref())
        .max_by_key(|r| r.ended_ms().unwrap_or(r.started_ms))
        .cloned();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for summary in summaries {
        for (name, value) in &summary.counts.0 {
            let c = counts.entry(name.clone()).or_default();
            *c = (*c).max(*value);
        }
    }
    Summary {
        now_ms,
        last_run: runs.first().cloned(),
        last_success,
        last_ended,
        counts: Counts(counts.into_iter().collect()),
    }
}

/// What `status` over a quorum says of the record beside each node's view: the newest of the
/// nodes' last runs (each node's own, merged by token), and the rest as [`merged_summary`].
pub(crate) fn quorum_summary(summaries: &[&Summary]) -> Summary {
    let lasts: Vec<Vec<Run>> = summaries
        .iter()
        .map(|s| s.last_run.iter().cloned().collect())
        .collect();
    let lists: Vec<&[Run]> = lasts.iter().map(Vec::as_slice).collect();
    merged_summary(summaries, &merged(&lists))
}

/// The record's bound and lifetime, as `history` says them.
pub(crate) fn kept() -> String {
    format!(
        "the last {RUNS_KEPT} runs, for {} after the last one",
        crate::report::duration(RECORD_TTL)
    )
}

/// A JSON array of runs.
pub(crate) fn runs_json(runs: &[Run]) -> String {
    json::array(runs.iter().map(run_json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(token: &str, started_ms: u64, end: RunEnd) -> Run {
        Run {
            token: token.into(),
            host: "h".into(),
            pid: 1,
            started_ms,
            fence: 1,
            end,
        }
    }

    fn ended(outcome: &str) -> RunEnd {
        RunEnd::Ended {
            outcome: outcome.into(),
            status: 0,
            took: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_quorum_shows_each_run_once_as_most_nodes_saw_it_end() {
        let a = [
            run("a", 10, ended("success")),
            run("b", 5, ended("success")),
        ];
        let b = [
            run("a", 11, RunEnd::Vanished { by: None }),
            run("b", 5, ended("lock_lost")),
        ];
        let c = [
            run("a", 10, ended("success")),
            run("c", 1, RunEnd::Vanished { by: None }),
        ];
        let runs = merged(&[&a, &b, &c]);
        let shown: Vec<(&str, &str)> = runs.iter().map(|r| (&*r.token, r.outcome())).collect();
        assert_eq!(
            shown,
            [("a", "success"), ("b", "success"), ("c", "vanished")]
        );
    }

    #[test]
    fn counts_always_have_the_common_fields() {
        let counts = Counts(vec![
            ("busy".into(), 2),
            ("vanished".into(), 1),
            ("odd".into(), 4),
        ]);
        let text = counts_json(&counts);
        assert!(
            text.starts_with(r#"{"busy":2,"skipped":0,"lost":1,"success":0"#),
            "{text}"
        );
        assert!(text.ends_with(r#""error":0,"odd":4}"#), "{text}");
    }
}
