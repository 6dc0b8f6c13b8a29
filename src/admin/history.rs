//! `redlock history` and `redlock check`: the record of a lock's runs, read from each node
//! ([`crate::lock::Node::runs`], which writes nothing), shown as it is or judged as a monitoring
//! plugin judges.

use std::time::Duration;

use anyhow::Context;

use crate::admin::runs::{self, history_line, how, merged, merged_summary, runs_json, when, who};
use crate::admin::{TIMEOUT, need_majority, on_nodes, render::field, unavailable};
use crate::exit::check::{CRITICAL, OK, UNKNOWN, WARNING};
use crate::lock::record::{Run, Summary};
use crate::lock::{Backend, Runs};
use crate::report;
use crate::report::json::Object;

/// `redlock history`: the runs, newest first; exit 0 (none is fine).
pub(crate) fn history(backend: &dyn Backend, key: &str, json: bool) -> anyhow::Result<i32> {
    report::set_key(key);
    let Runs { runs, .. } = read_runs(backend, key)?;
    let text = if json {
        format!("{}\n", runs_json(&runs))
    } else {
        runs.iter().map(history_line).collect()
    };
    report::stdout(text.as_bytes())?;
    report!(
        1,
        "lock '{key}': {} recorded ({})",
        runs.len(),
        runs::kept()
    );
    Ok(0)
}

/// The record of the lock's runs: from its one server, or merged from every node of a quorum
/// (a node that does not answer is a `redlock:` line; fewer than a majority is exit 69).
fn read_runs(backend: &dyn Backend, key: &str) -> anyhow::Result<Runs> {
    let context = || format!("cannot read the runs of lock '{key}'");
    let total = backend.nodes().len();
    if !backend.capabilities().quorum {
        return backend
            .node(0)
            .runs(key, TIMEOUT)
            .map_err(unavailable)
            .with_context(context);
    }
    let runs = |node: &mut dyn crate::lock::Node| node.runs(key, TIMEOUT);
    let results = on_nodes(backend, runs, |failure| failure);
    let mut answered = Vec::new();
    for (node, result) in &results {
        match result {
            Ok(runs) => answered.push(runs),
            Err(failure) => report::error(format!("{node}: {}: {failure}", context())),
        }
    }
    need_majority(answered.len(), total, &context())?;
    let lists: Vec<&[Run]> = answered.iter().map(|r| r.runs.as_slice()).collect();
    let runs = merged(&lists);
    let summaries: Vec<&Summary> = answered.iter().map(|r| &r.summary).collect();
    Ok(Runs {
        summary: merged_summary(&summaries, &runs),
        runs,
    })
}

/// What `check` found: its status and the line that says why.
struct Judged {
    code: i32,
    line: String,
}

/// The status word of a plugin status.
fn word(code: i32) -> &'static str {
    match code {
        OK => "OK",
        WARNING => "WARNING",
        CRITICAL => "CRITICAL",
        _ => "UNKNOWN",
    }
}

/// The success `check` judges by: the record's last success, or (that field lost or
/// unreadable) the newest kept.
fn last_success(record: &Runs) -> Option<&Run> {
    let newest_success = || record.runs.iter().find(|r| r.succeeded());
    record.summary.last_success.as_ref().or_else(newest_success)
}

/// `check`'s verdict on the record: OK with a success within `max_age` and no failure since,
/// WARNING with one and a failure since, CRITICAL without one. `read_at`: where the record was
/// read (the servers and the prefix), which a lock with no recorded run names.
fn judge(key: &str, record: &Runs, max_age: Duration, read_at: &str) -> Judged {
    let key = field(key);
    let Runs { summary, runs } = record;
    let now = summary.now_ms;
    let judged = |code, text: String| Judged {
        code,
        line: format!("{}: lock '{key}' {text}", word(code)),
    };
    let Some(success) = last_success(record) else {
        return match runs.first() {
            // Most often the runs lock it elsewhere: another --url or --prefix.
            None => judged(
                CRITICAL,
                format!(
                    "has no recorded run at {read_at} (runs with another --url or --prefix are \
                     not seen there)"
                ),
            ),
            Some(_) => judged(
                CRITICAL,
                format!("has no recorded success; {}", last_run(record)),
            ),
        };
    };
    let age = Duration::from_millis(now.saturating_sub(success.ended_ms().unwrap_or(0)));
    let ago = if age > max_age {
        past(age, max_age)
    } else {
        report::duration(Duration::from_secs(age.as_secs()))
    };
    let said = format!(
        "last succeeded {ago} ago on {} (took {}, fence {})",
        who(success),
        runs::duration(success),
        success.fence
    );
    if age > max_age {
        return judged(
            CRITICAL,
            format!(
                "{said}, longer ago than --max-age {}; {}",
                report::duration(max_age),
                last_run(record)
            ),
        );
    }
    match failed_since(record, success) {
        Some(failed) => judged(
            WARNING,
            format!(
                "{said}, but a later run did not: started {} on {}: {}",
                when(failed.started_ms, now),
                who(failed),
                how(failed)
            ),
        ),
        None => judged(OK, said),
    }
}

/// The last run, as a verdict that is not OK ends: when it started, where, and how it ended;
/// nothing when the record has none.
fn last_run(record: &Runs) -> String {
    let Runs { summary, runs } = record;
    match runs.first().or(summary.last_run.as_ref()) {
        Some(run) => format!(
            "the last run started {} on {}: {}",
            when(run.started_ms, summary.now_ms),
            who(run),
            how(run)
        ),
        None => String::new(),
    }
}

/// A run that failed after `success`: one that started after it, or (with several holders
/// at once) one that started before it and ended after it; the last run to end is looked at
/// too, for one that fell out of the runs kept.
fn failed_since<'a>(record: &'a Runs, success: &Run) -> Option<&'a Run> {
    // The run that ended last, when it is not the success: after it if its end says so (a
    // host of 0.1 writes successes but no last run to end), or if nobody saw its end (it
    // vanished).
    let success_end = success.ended_ms().unwrap_or(success.started_ms);
    let ended_since = record
        .summary
        .last_ended
        .iter()
        .filter(|r| r.token != success.token)
        .filter(|r| r.over_by().is_none_or(|e| e >= success_end));
    record
        .runs
        .iter()
        .filter(|r| r.token != success.token)
        .filter(|r| {
            r.started_ms >= success.started_ms || r.over_by().is_some_and(|e| e >= success_end)
        })
        .chain(ended_since)
        .find(|r| r.failed())
}

/// The age of a last success older than `max_age`, as the CRITICAL line says it: whole seconds,
/// unless those are not past `max_age` (1.2 s against `--max-age 1s` is not "1s ago, longer
/// ago than --max-age 1s"), then as finely as [`report::duration`] goes, and "more than" when
/// even that rounds to `max_age`.
fn past(age: Duration, max_age: Duration) -> String {
    let whole = Duration::from_secs(age.as_secs());
    if whole > max_age {
        return report::duration(whole);
    }
    let shown = report::duration(age);
    if shown == report::duration(max_age) {
        format!("more than {shown}")
    } else {
        shown
    }
}

/// `redlock check`: the plugin line (or JSON object) on stdout, and its status. An error is
/// UNKNOWN, said by the caller.
pub(crate) fn check(
    backend: &dyn Backend,
    key: &str,
    max_age: Duration,
    json: bool,
) -> anyhow::Result<i32> {
    report::set_key(key);
    let read_at = backend.described();
    let record = read_runs(backend, key)?;
    let Judged { code, line } = judge(key, &record, max_age, &read_at);
    let text = if json {
        let summary = &record.summary;
        // The success the line names, so that the two never disagree.
        let success = last_success(&record);
        let age =
            success.map(|r| i128::from(summary.now_ms.saturating_sub(r.ended_ms().unwrap_or(0))));
        let obj = verdict_json(code, Some(key), &line)
            .int("max_age_ms", max_age.as_millis() as i128)
            .opt_int("last_success_age_ms", age);
        let record = Summary {
            last_run: record.runs.first().cloned().or(summary.last_run.clone()),
            last_success: success.cloned(),
            ..summary.clone()
        };
        format!("{}\n", runs::summary_fields(obj, &record).finish())
    } else {
        format!("{line}\n")
    };
    report::stdout(text.as_bytes())?;
    Ok(code)
}

/// The start of `check --json`'s object: `status`, `code`, `key`, `message`.
fn verdict_json(code: i32, key: Option<&str>, line: &str) -> Object {
    let obj = Object::new().str("status", word(code)).int("code", code);
    let obj = match key {
        Some(key) => obj.str("key", key),
        None => obj.raw("key", "null"),
    };
    obj.str("message", line)
}

/// Say on stdout that `check` cannot tell (`message`: why), as its line or JSON object.
/// The JSON object has every field of a known status's, null where nothing is known
/// (`max_age_ms` too, when `--max-age` was not understood).
pub fn unknown(key: Option<&str>, max_age: Option<Duration>, message: &str, json: bool) {
    // Kept on one line as every line of redlock's is: a control character (a newline or ESC
    // in the lock name) is written as an escape, as the `redlock: ` line on stderr writes it.
    let line = format!("{}: {}", word(UNKNOWN), report::one_line(message));
    let text = if json {
        let obj = verdict_json(UNKNOWN, key, &line)
            .opt_int("max_age_ms", max_age.map(|d| d.as_millis() as i128))
            .raw("last_success_age_ms", "null");
        format!(
            "{}\n",
            obj.raw("last_run", "null")
                .raw("last_success", "null")
                .raw("counts", "null")
                .finish()
        )
    } else {
        format!("{line}\n")
    };
    let _ = report::stdout(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::record::{Counts, RunEnd};

    const HOUR: u64 = 3_600_000;

    fn run(token: &str, started_ms: u64, outcome: &str) -> Run {
        let end = match outcome {
            "vanished" => RunEnd::Vanished { by: None },
            "running" => RunEnd::Running {
                so_far: Duration::ZERO,
            },
            _ => RunEnd::Ended {
                outcome: outcome.into(),
                status: i32::from(outcome != "success"),
                took: Duration::from_secs(60),
            },
        };
        Run {
            token: token.into(),
            host: format!("host-{token}"),
            pid: 7,
            started_ms,
            fence: 1,
            end,
        }
    }

    fn record(runs: Vec<Run>) -> Runs {
        let last_success = runs.iter().find(|r| r.succeeded()).cloned();
        Runs {
            summary: Summary {
                now_ms: 100 * HOUR,
                last_run: runs.first().cloned(),
                last_success,
                last_ended: None,
                counts: Counts::default(),
            },
            runs,
        }
    }

    #[test]
    fn the_four_verdicts() {
        let day = Duration::from_secs(24 * 3600);
        let verdict = |runs| {
            let judged = judge(
                "k",
                &record(runs),
                day,
                "127.0.0.1:6379 under prefix 'redlock:'",
            );
            (judged.code, judged.line)
        };
        let (code, line) = verdict(vec![]);
        assert_eq!(
            (code, line.as_str()),
            (
                CRITICAL,
                "CRITICAL: lock 'k' has no recorded run at 127.0.0.1:6379 under prefix \
                 'redlock:' (runs with another --url or --prefix are not seen there)"
            )
        );
        let (code, line) = verdict(vec![run("a", 99 * HOUR, "success")]);
        assert_eq!(code, OK, "{line}");
        assert!(
            line.starts_with("OK: lock 'k' last succeeded 59m ago on host-a pid 7"),
            "{line}"
        );
        // A run in progress since the success is no failure.
        let (code, _) = verdict(vec![
            run("b", 99 * HOUR + 1, "running"),
            run("a", 99 * HOUR, "success"),
        ]);
        assert_eq!(code, OK);
        let (code, line) = verdict(vec![
            run("c", 99 * HOUR + 2, "running"),
            run("b", 99 * HOUR + 1, "vanished"),
            run("a", 99 * HOUR, "success"),
        ]);
        assert_eq!(code, WARNING, "{line}");
        assert!(
            line.contains("but a later run did not") && line.contains("host-b"),
            "{line}"
        );
        let (code, line) = verdict(vec![
            run("b", 60 * HOUR, "failed"),
            run("a", 50 * HOUR, "success"),
        ]);
        assert_eq!(code, CRITICAL, "{line}");
        assert!(
            line.contains("longer ago than --max-age 1day") && line.contains("host-b"),
            "{line}"
        );
        // An age that rounds to --max-age is shown precisely enough to differ from it.
        let mut barely = record(vec![run("a", 0, "success")]);
        barely.summary.now_ms = 61_200;
        let line = judge("k", &barely, Duration::from_secs(1), "").line;
        assert!(
            line.starts_with("CRITICAL: lock 'k' last succeeded 1.2s ago on host-a")
                && line.contains("longer ago than --max-age 1s;"),
            "{line}"
        );
        barely.summary.now_ms = HOUR + 60_300;
        let line = judge("k", &barely, Duration::from_secs(3600), "").line;
        assert!(
            line.starts_with("CRITICAL: lock 'k' last succeeded more than 1h ago on host-a"),
            "{line}"
        );
        let (code, line) = verdict(vec![run("b", 60 * HOUR, "lock_lost")]);
        assert_eq!(code, CRITICAL, "{line}");
        assert!(
            line.contains("has no recorded success; the last run started"),
            "{line}"
        );
    }
}
