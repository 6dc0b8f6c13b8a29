//! `--metrics-file`: a Prometheus textfile-collector file about the run, written atomically
//! (a temporary file in the same directory, then rename) when redlock exits. The path is
//! checked at start and no open of it can block, so the end of a run never hangs on it.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::exit::Outcome;
use crate::file::{self, Unusable};

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

/// The largest metrics file read back (to carry its counters over): this file is a few KiB.
const PREVIOUS_CAP: u64 = 1 << 20;

/// Check before running that the metrics file can be written where asked, and read back: a
/// file there must be a regular file within [`PREVIOUS_CAP`] (a FIFO would block the run's
/// end, a device fill its memory), and its directory must exist.
pub fn check_path(path: &Path) -> Result<(), String> {
    let bad = |why: String| format!("--metrics-file {}: {why}", path.display());
    if path.file_name().is_none() {
        return Err(bad("not a file name".into()));
    }
    match file::check(path, PREVIOUS_CAP) {
        Ok(()) => {}
        Err(Unusable::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
        Err(why @ Unusable::TooLarge(_)) => {
            return Err(bad(format!("{why}: not a metrics file redlock wrote")));
        }
        Err(why) => return Err(bad(why.to_string())),
    }
    let dir = parent(path);
    if !dir.is_dir() {
        return Err(bad(format!("directory {} does not exist", dir.display())));
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
    // Read as any file a user names is (never blocking, within a cap): a FIFO put there during
    // the run must not hang its end. One that cannot be read is not carried over.
    let previous = file::read_if_there(path, PREVIOUS_CAP)
        .map_err(|why| io::Error::other(format!("the file there: {why}")))?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
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
        outcome,
        stats,
        seconds(now),
        last_success,
        previous.as_deref().unwrap_or_default(),
    );
    replace(path, text.as_bytes())
}

/// Put `bytes` at `path` atomically: a new temporary file in the same directory (created, never
/// opened if something is there: a FIFO at its name would block), synced, renamed over `path`.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent(path);
    let name = path
        .file_name()
        .map_or_else(|| "metrics".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let create = || {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&tmp)
    };
    let file = match create() {
        // Left by an earlier redlock of the same pid: not ours to keep.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            create()
        }
        other => other,
    };
    let result = file.and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    });
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

/// The buckets (seconds) of the histogram of the time waited for the lock: from an uncontended
/// acquire (milliseconds) to an hour's `--wait`.
const WAIT_BUCKETS: &[f64] = &[
    0.005, 0.05, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
];
/// The buckets (seconds) of the histogram of the time the lock was held: a job's run time.
const HELD_BUCKETS: &[f64] = &[
    1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
];

/// Every outcome label, so that each `redlock_runs_total` series exists from the first file
/// on (a counter that appears only when it first counts hides its first increase from
/// `rate()`).
const OUTCOMES: &[Outcome] = &[
    Outcome::Exited(0),
    Outcome::Exited(1),
    Outcome::Busy,
    Outcome::Skipped,
    Outcome::Interrupted(0),
    Outcome::NotRun { found: true },
    Outcome::LockLost,
    Outcome::MaxRuntime,
    Outcome::Unavailable,
    Outcome::Usage,
    Outcome::Internal,
];

/// The file's text, the metrics written one by one; the counters carried over from `previous`.
struct Text<'a> {
    out: String,
    key: String,
    previous: &'a str,
}

impl Text<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        self.out
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }

    /// One sample: `name{key="K"<labels>} value`.
    fn sample(&mut self, name: &str, labels: &str, value: &str) {
        let key = &self.key;
        self.out
            .push_str(&format!("{name}{{key=\"{key}\"{labels}}} {value}\n"));
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &str, value: String) {
        self.head(name, "gauge", help);
        self.sample(name, labels, &value);
    }

    /// What the previous file said of the series `name{key="K"<labels>}` (0 when nothing).
    fn before(&self, name: &str, labels: &str) -> f64 {
        let head = format!("{name}{{key=\"{}\"{labels}}} ", self.key);
        self.previous
            .lines()
            .find_map(|l| l.strip_prefix(&head))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .unwrap_or(0.0)
    }

    /// A counter's series: the previous file's value plus `by`.
    fn count(&mut self, name: &str, labels: &str, by: f64) {
        let value = self.before(name, labels) + by;
        self.sample(name, labels, &number(value));
    }

    /// A histogram carried over, with `observed` (seconds) added when this run observed one.
    fn histogram(&mut self, name: &str, help: &str, buckets: &[f64], observed: Option<f64>) {
        self.head(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        for le in buckets
            .iter()
            .map(|b| b.to_string())
            .chain(["+Inf".to_owned()])
        {
            let within = observed.is_some_and(|o| le == "+Inf" || o <= le.parse().unwrap_or(0.0));
            self.count(
                &bucket,
                &format!(",le=\"{le}\""),
                f64::from(u8::from(within)),
            );
        }
        self.count(&format!("{name}_sum"), "", observed.unwrap_or(0.0));
        self.count(
            &format!("{name}_count"),
            "",
            f64::from(u8::from(observed.is_some())),
        );
    }
}

/// A sample's value: whole numbers without a fraction, the rest to the millisecond.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

fn render(
    key: &str,
    code: i32,
    outcome: Outcome,
    stats: &Stats,
    now: f64,
    last_success: Option<f64>,
    previous: &str,
) -> String {
    let mut text = Text {
        out: String::new(),
        key: escape(key),
        previous,
    };
    text.gauge(
        "redlock_last_run_timestamp_seconds",
        "When redlock last finished a run of this lock (unix seconds).",
        "",
        format!("{now:.3}"),
    );
    if let Some(t) = last_success {
        text.gauge(
            LAST_SUCCESS,
            "When a run of this lock last succeeded, here or (seen by a --min-interval skip) elsewhere.",
            "",
            format!("{t:.3}"),
        );
    }
    text.gauge(
        "redlock_exit_status",
        "redlock's exit status for the last run.",
        "",
        code.to_string(),
    );
    text.gauge(
        "redlock_outcome",
        "How the last run ended (1 for the outcome label that applies).",
        &format!(",outcome=\"{}\"", outcome.label()),
        "1".into(),
    );
    let secs = |d: Option<Duration>| format!("{:.3}", d.unwrap_or_default().as_secs_f64());
    text.gauge(
        "redlock_wait_seconds",
        "Time spent taking (or waiting for) the lock in the last run.",
        "",
        secs(stats.waited),
    );
    text.gauge(
        "redlock_held_seconds",
        "Time the lock was held in the last run.",
        "",
        secs(stats.held),
    );
    text.gauge(
        "redlock_renewals",
        "Successful lease renewals in the last run.",
        "",
        stats.renewals.to_string(),
    );
    text.gauge(
        "redlock_renewal_failures",
        "Failed lease renewal attempts in the last run.",
        "",
        stats.renewal_failures.to_string(),
    );
    counters(&mut text, outcome, stats);
    text.out
}

/// The counters and histograms, carried over from the previous file: every run that wrote it.
fn counters(text: &mut Text, outcome: Outcome, stats: &Stats) {
    text.head(
        "redlock_runs_total",
        "counter",
        "Runs of this lock that wrote this file, by how they ended.",
    );
    for label in OUTCOMES.iter().map(|o| o.label()) {
        let this = f64::from(u8::from(label == outcome.label()));
        text.count("redlock_runs_total", &format!(",outcome=\"{label}\""), this);
    }
    let counters = [
        (
            "redlock_renewals_total",
            "Successful lease renewals, over the runs that wrote this file.",
            stats.renewals as f64,
        ),
        (
            "redlock_renewal_failures_total",
            "Failed lease renewal attempts, over the runs that wrote this file.",
            stats.renewal_failures as f64,
        ),
        (
            "redlock_lost_leases_total",
            "Runs that lost their lock while the command ran (exit 76).",
            f64::from(u8::from(outcome == Outcome::LockLost)),
        ),
    ];
    for (name, help, by) in counters {
        text.head(name, "counter", help);
        text.count(name, "", by);
    }
    text.histogram(
        "redlock_lock_wait_seconds",
        "Time spent taking (or waiting for) the lock, over the runs that wrote this file.",
        WAIT_BUCKETS,
        stats.waited.map(|d| d.as_secs_f64()),
    );
    text.histogram(
        "redlock_lock_held_seconds",
        "Time the lock was held, over the runs that wrote this file.",
        HELD_BUCKETS,
        stats.held.map(|d| d.as_secs_f64()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_last_success_read_back() {
        let stats = Stats::default();
        let key = "a\"b\\c\nd";
        let text = render(key, 0, Outcome::Exited(0), &stats, 10.0, Some(7.5), "");
        assert!(
            text.contains(r#"redlock_exit_status{key="a\"b\\c\nd"} 0"#),
            "{text}"
        );
        assert!(text.contains(r#",outcome="success"} 1"#), "{text}");
        assert_eq!(last_success_in(&text, key), Some(7.5));
        assert_eq!(last_success_in(&text, "other"), None);
        assert!(!render("k", 1, Outcome::Exited(1), &stats, 1.0, None, "").contains(LAST_SUCCESS));
    }

    #[test]
    fn counters_and_histograms_carry_over() {
        let held = Stats {
            waited: Some(Duration::from_millis(20)),
            held: Some(Duration::from_secs(90)),
            renewals: 3,
            ..Stats::default()
        };
        let first = render("k", 0, Outcome::Exited(0), &held, 1.0, None, "");
        let second = render("k", 76, Outcome::LockLost, &held, 2.0, None, &first);
        let third = render(
            "k",
            75,
            Outcome::Busy,
            &Stats::default(),
            3.0,
            None,
            &second,
        );
        for line in [
            r#"redlock_runs_total{key="k",outcome="success"} 1"#,
            r#"redlock_runs_total{key="k",outcome="lock_lost"} 1"#,
            r#"redlock_runs_total{key="k",outcome="busy"} 1"#,
            r#"redlock_runs_total{key="k",outcome="failed"} 0"#,
            r#"redlock_renewals_total{key="k"} 6"#,
            r#"redlock_lost_leases_total{key="k"} 1"#,
            r#"redlock_lock_held_seconds_bucket{key="k",le="60"} 0"#,
            r#"redlock_lock_held_seconds_bucket{key="k",le="300"} 2"#,
            r#"redlock_lock_held_seconds_bucket{key="k",le="+Inf"} 2"#,
            r#"redlock_lock_held_seconds_sum{key="k"} 180"#,
            r#"redlock_lock_held_seconds_count{key="k"} 2"#,
            r#"redlock_lock_wait_seconds_bucket{key="k",le="0.05"} 2"#,
        ] {
            assert!(third.lines().any(|l| l == line), "{line} missing:\n{third}");
        }
        // Another lock's file carries nothing over.
        let other = render("other", 0, Outcome::Exited(0), &held, 4.0, None, &third);
        assert!(
            other.contains(r#"redlock_renewals_total{key="other"} 3"#),
            "{other}"
        );
    }
}
