//! A run's record as JSON, as the consensus backends (etcd, ZooKeeper) keep it: one object per
//! run (`token`, `host`, `pid`, `started`, `fence`; and once it ended `ended`, `outcome`,
//! `status`, and `min_interval_ms` when it ran with one), written when the run takes the lock
//! and again when it ends, and read back as the admin commands show a run. The rules are the
//! record's everywhere: a run with no end whose entry is gone vanished.
//!
//! Times are the holders' clocks (unix ms): neither server keeps a clock for a client to read.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::lock::Holder;
use crate::lock::record::{Run, RunEnd, RunEnding};

/// A run's record as written when it takes the lock. `fence`: its fencing token, when the
/// record is written after the entry (a waiter's, let in); None where the record's own place
/// gives it (on etcd, written with the entry, the record key's create revision is the token).
pub(crate) fn started(token: &str, holder: &Holder, at_ms: u64, fence: Option<i64>) -> String {
    let mut run = json!({
        "token": token,
        "host": holder.host,
        "pid": holder.pid,
        "started": at_ms,
    });
    if let Some(fence) = fence {
        run["fence"] = json!(fence);
    }
    run.to_string()
}

/// The record of a run that ended as `ended`, `took` after it took the lock, its fencing token
/// `fence`, its `--min-interval` (kept so that `status` can say how long runs still skip): the
/// run's key and the summary's copies hold it.
pub(crate) fn ended(
    token: &str,
    holder: &Holder,
    (at_ms, fence, min_interval): (u64, i64, Option<Duration>),
    took: Duration,
    ended: &RunEnding,
) -> String {
    let mut run = json!({
        "token": token,
        "host": holder.host,
        "pid": holder.pid,
        "started": at_ms,
        "fence": fence,
        "ended": at_ms + took.as_millis() as u64,
        "outcome": ended.outcome,
        "status": ended.status,
    });
    if let Some(interval) = min_interval {
        run["min_interval_ms"] = json!(interval.as_millis() as u64);
    }
    run.to_string()
}

/// From the last success's record: how long ago it ended, and how long the `--min-interval` it
/// ran with still holds off runs with the same interval; None when it ran without one, or that
/// time is over (as on Redis, where the mark expires).
pub(crate) fn done(last_success: &[u8], now_ms: u64) -> Option<(Duration, Option<Duration>)> {
    let run: Map<String, Value> = serde_json::from_slice(last_success).ok()?;
    let interval = run.get("min_interval_ms").and_then(Value::as_u64)?;
    let ended = run.get("ended").and_then(Value::as_u64)?;
    let ago = now_ms.saturating_sub(ended);
    let left = interval.checked_sub(ago).filter(|left| *left > 0)?;
    Some((
        Duration::from_millis(ago),
        Some(Duration::from_millis(left)),
    ))
}

/// A run's record marked as vanished (its lease ended without a release). `fence`: its key's
/// create revision, the token unless the record names one (a waiter's, written after its entry).
pub(crate) fn vanished(value: &[u8], fence: i64) -> Option<String> {
    let mut run: Map<String, Value> = serde_json::from_slice(value).ok()?;
    run.insert("outcome".into(), json!("vanished"));
    run.entry("fence").or_insert(json!(fence));
    Some(Value::Object(run).to_string())
}

/// Whether a run's record says it ended.
pub(crate) fn has_ended(value: &[u8]) -> bool {
    outcome_of(value).is_some()
}

/// How a run's record says it ended: None while it has no end; a record that is not JSON
/// counts as ended (it is not redlock's to rewrite).
pub(crate) fn outcome_of(value: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Map<String, Value>>(value) {
        Ok(run) => run
            .get("outcome")
            .map(|o| o.as_str().unwrap_or("?").to_owned()),
        Err(_) => Some("?".to_owned()),
    }
}

/// A run from its record (`fence`: its key's create revision, unless the record names one;
/// `running`: its entry is still there), as the admin commands show it; None when the record
/// is not one redlock wrote.
pub(crate) fn run(value: &[u8], fence: i64, running: bool, now_ms: u64) -> Option<Run> {
    let run: Map<String, Value> = serde_json::from_slice(value).ok()?;
    let text = |name: &str| run.get(name).and_then(Value::as_str).map(str::to_owned);
    let int = |name: &str| run.get(name).and_then(Value::as_i64);
    let started_ms = u64::try_from(int("started")?).ok()?;
    let end = match text("outcome") {
        Some(outcome) if outcome == "vanished" => RunEnd::Vanished { by: None },
        Some(outcome) => RunEnd::Ended {
            outcome,
            status: i32::try_from(int("status").unwrap_or(0)).unwrap_or(0),
            took: Duration::from_millis(
                u64::try_from(int("ended").unwrap_or(0))
                    .unwrap_or(0)
                    .saturating_sub(started_ms),
            ),
        },
        None if running => RunEnd::Running {
            so_far: Duration::from_millis(now_ms.saturating_sub(started_ms)),
        },
        None => RunEnd::Vanished { by: None },
    };
    Some(Run {
        token: text("token")?,
        host: text("host").unwrap_or_default(),
        pid: int("pid").and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
        started_ms,
        fence: int("fence").unwrap_or(fence),
        end,
    })
}

/// This host's clock, unix ms.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long ago (this host's clock) the last success recorded ended, if it did.
pub(crate) fn success_ago(last_success: &Option<Vec<u8>>) -> Option<Duration> {
    let run = run(last_success.as_deref()?, 0, false, 0)?;
    let ended = run.ended_ms()?;
    Some(Duration::from_millis(now_ms().saturating_sub(ended)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Outcome;

    #[test]
    fn a_runs_record_reads_back_in_each_state() {
        let holder = Holder {
            host: "h".into(),
            pid: 7,
            command: "true".into(),
            started: 1,
        };
        // A waiter's record, written after its entry (the record's key created at 45), names
        // the entry's revision: its token.
        let late = started("t", &holder, 1000, Some(41));
        assert_eq!(run(late.as_bytes(), 45, true, 1500).unwrap().fence, 41);
        let start = started("t", &holder, 1000, None);
        let going = run(start.as_bytes(), 41, true, 1500).unwrap();
        assert_eq!(
            (going.fence, going.end.clone()),
            (
                41,
                RunEnd::Running {
                    so_far: Duration::from_millis(500)
                }
            )
        );
        // Its entry gone, and no end: it vanished.
        let gone = run(start.as_bytes(), 41, false, 1500).unwrap();
        assert_eq!(gone.outcome(), "vanished");
        let done = ended(
            "t",
            &holder,
            (1000, 41, None),
            Duration::from_millis(250),
            &RunEnding::of(Outcome::Exited(3), 75),
        );
        assert_eq!(super::done(done.as_bytes(), 2000), None);
        // A success with --min-interval 10s, ended at 1250: runs skip until 11250.
        let success = ended(
            "t",
            &holder,
            (1000, 41, Some(Duration::from_secs(10))),
            Duration::from_millis(250),
            &RunEnding::of(Outcome::Exited(0), 75),
        );
        assert_eq!(
            super::done(success.as_bytes(), 3250),
            Some((Duration::from_secs(2), Some(Duration::from_secs(8))))
        );
        assert_eq!(super::done(success.as_bytes(), 11250), None);
        let done = run(done.as_bytes(), 0, false, 5000).unwrap();
        assert_eq!(done.fence, 41);
        assert_eq!(done.ended_ms(), Some(1250));
        assert_eq!(done.outcome(), "failed");
        assert!(has_ended(done_json().as_bytes()) && !has_ended(start.as_bytes()));
        let marked = vanished(start.as_bytes(), 41).unwrap();
        assert_eq!(
            run(marked.as_bytes(), 0, true, 0).unwrap().outcome(),
            "vanished"
        );
        assert!(run(b"not json", 1, true, 0).is_none());
    }

    fn done_json() -> String {
        json!({"token": "t", "started": 1, "outcome": "success", "status": 0}).to_string()
    }
}
