//! `--metrics-file`: a Prometheus textfile-collector file about the run, written atomically
//! (a temporary file in the same directory, then rename) when redlock exits.

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::exit::Outcome;

/// What the metrics file reports about one run; filled in as the run goes.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// From start-up until the lock was taken or given up.
    pub waited: Option<Duration>,
    /// From taking the lock until releasing it.
    pub held: Option<Duration>,
    pub renewals: u64,
    pub renewal_failures: u64,
    /// A `--min-interval` skip learnt that the lock's last success was this long ago.
    pub success_ago: Option<Duration>,
}

/// Check before running that the metrics file can be written where asked.
pub fn check_path(path: &Path) -> Result<(), String> {
    let dir = parent(path);
    if path.file_name().is_none() || path.is_dir() {
        return Err(format!(
            "--metrics-file {} is not a file name",
            path.display()
        ));
    }
    if !dir.is_dir() {
        return Err(format!(
            "--metrics-file {}: directory {} does not exist",
            path.display(),
            dir.display()
        ));
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Write the file for a run of lock `key` that ended with `outcome` and exits `code`. The
/// last-success time is carried over from the previous file when this run did not succeed.
pub fn write(path: &Path, key: &str, code: i32, outcome: Outcome, stats: &Stats) -> io::Result<()> {
    let now = SystemTime::now();
    let previous = fs::read_to_string(path).ok();
    let last_success = if outcome.succeeded() {
        Some(seconds(now))
    } else {
        let known = stats
            .success_ago
            .and_then(|ago| now.checked_sub(ago))
            .map(seconds);
        let before = previous.as_deref().and_then(|p| last_success_in(p, key));
        match (known, before) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    };
    let text = render(
        key,
        code,
        outcome.label(),
        stats,
        seconds(now),
        last_success,
    );
    let dir = parent(path);
    let name = path
        .file_name()
        .map_or_else(|| "metrics".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A label value as the exposition format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

const LAST_SUCCESS: &str = "redlock_last_success_timestamp_seconds";

/// The last-success time recorded for `key` in a previous file.
fn last_success_in(text: &str, key: &str) -> Option<f64> {
    let head = format!("{LAST_SUCCESS}{{key=\"{}\"}} ", escape(key));
    text.lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite())
}

fn render(
    key: &str,
    code: i32,
    outcome: &str,
    stats: &Stats,
    now: f64,
    last_success: Option<f64>,
) -> String {
    let key = escape(key);
    let mut out = String::new();
    let mut metric = |name: &str, help: &str, labels: &str, value: String| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{key=\"{key}\"{labels}}} {value}\n"
        ));
    };
    metric(
        "redlock_last_run_timestamp_seconds",
        "When redlock last finished a run of this lock (unix seconds).",
        "",
        format!("{now:.3}"),
    );
    if let Some(t) = last_success {
        metric(
            LAST_SUCCESS,
            "When a run of this lock last succeeded, here or (seen by a --min-interval skip) elsewhere.",
            "",
            format!("{t:.3}"),
        );
    }
    metric(
        "redlock_exit_status",
        "redlock's exit status for the last run.",
        "",
        code.to_string(),
    );
    metric(
        "redlock_outcome",
        "How the last run ended (1 for the outcome label that applies).",
        &format!(",outcome=\"{outcome}\""),
        "1".into(),
    );
    let secs = |d: Option<Duration>| format!("{:.3}", d.unwrap_or_default().as_secs_f64());
    metric(
        "redlock_wait_seconds",
        "Time spent taking (or waiting for) the lock in the last run.",
        "",
        secs(stats.waited),
    );
    metric(
        "redlock_held_seconds",
        "Time the lock was held in the last run.",
        "",
        secs(stats.held),
    );
    metric(
        "redlock_renewals",
        "Successful lease renewals in the last run.",
        "",
        stats.renewals.to_string(),
    );
    metric(
        "redlock_renewal_failures",
        "Failed lease renewal attempts in the last run.",
        "",
        stats.renewal_failures.to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_last_success_read_back() {
        let stats = Stats::default();
        let key = "a\"b\\c\nd";
        let text = render(key, 0, "success", &stats, 10.0, Some(7.5));
        assert!(
            text.contains(r#"redlock_exit_status{key="a\"b\\c\nd"} 0"#),
            "{text}"
        );
        assert!(text.contains(r#",outcome="success"} 1"#), "{text}");
        assert_eq!(last_success_in(&text, key), Some(7.5));
        assert_eq!(last_success_in(&text, "other"), None);
        assert!(!render("k", 1, "failed", &stats, 1.0, None).contains(LAST_SUCCESS));
    }
}
