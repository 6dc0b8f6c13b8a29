//! The checker over the recorded history (exclusion outside fault windows, fencing, liveness)
//! and the summary table it prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::faults::{Fault, Kind};
use super::store::State;

/// One finished redlock run.
#[derive(Debug, Clone)]
pub struct Run {
    pub client: usize,
    pub pid: i32,
    /// CLOCK_MONOTONIC when redlock was spawned and when it was reaped: while it lives, and
    /// until it is reaped, no other process has its pid (pids are reused over a long run).
    pub spawned: u64,
    pub reaped: u64,
    /// Exit code, or 128+N if redlock itself died from signal N (never expected).
    pub code: i32,
    pub stderr: String,
}

/// What a phase of the suite recorded, and what the checker made of it.
pub struct Report {
    pub title: String,
    pub wall: Duration,
    pub faults: Vec<Fault>,
    pub state: State,
    pub runs: Vec<Run>,
    pub bound: Duration,
    /// Most workers at once at any moment outside the fault windows.
    pub max_outside: usize,
    /// Most workers at once inside a fault window (a paused or robbed holder and its successor).
    pub max_inside: usize,
    /// Write attempts refused because a higher token had been accepted.
    pub rejected: usize,
    /// ... of which came from a worker whose lock a fault had taken away (stale writes).
    pub rejected_stale: usize,
    /// Acquisitions that got a fencing token an earlier one had already had.
    pub tokens_repeated: usize,
    /// Problems: the suite fails if any.
    pub problems: Vec<String>,
}

impl Report {
    pub fn check(
        title: String,
        wall: Duration,
        faults: Vec<Fault>,
        state: State,
        runs: Vec<Run>,
        bound: Duration,
    ) -> Report {
        let mut r = Report {
            title,
            wall,
            faults,
            state,
            runs,
            bound,
            max_outside: 0,
            max_inside: 0,
            rejected: 0,
            rejected_stale: 0,
            tokens_repeated: 0,
            problems: Vec::new(),
        };
        r.exclusion();
        r.fencing();
        r.liveness();
        r.exits();
        r
    }

    /// The workers a fault robbed of their lock: those up to its token still running after it
    /// (for a restart without persistence: every worker that had started before Redis came back).
    fn robbed(&self, f: &Fault) -> Vec<usize> {
        if !f.kind.excuses_overlap() {
            return Vec::new();
        }
        (0..self.state.workers.len())
            .filter(|&i| {
                let w = &self.state.workers[i];
                w.last >= f.at
                    && match f.kind {
                        Kind::RestartEmpty => w.seen < f.healed,
                        _ => f.fence.is_some_and(|top| w.fence <= top),
                    }
            })
            .collect()
    }

    /// Fault windows: from the fault to the end of the last worker it robbed (or its healing).
    fn windows(&self) -> Vec<(u64, u64)> {
        self.faults
            .iter()
            .filter(|f| f.kind.excuses_overlap())
            .map(|f| {
                let end = self
                    .robbed(f)
                    .iter()
                    .map(|&w| self.state.workers[w].last)
                    .max();
                (f.at, end.unwrap_or(0).max(f.healed))
            })
            .collect()
    }

    fn victims(&self) -> Vec<usize> {
        self.faults.iter().flat_map(|f| self.robbed(f)).collect()
    }

    /// Sweep the workers' [start, last action] intervals on CLOCK_MONOTONIC.
    fn exclusion(&mut self) {
        let windows = self.windows();
        let mut edges: Vec<(u64, i32)> = Vec::new();
        for w in &self.state.workers {
            edges.push((w.start, 1));
            edges.push((w.last, -1));
        }
        // Ends before starts at the same instant: touching intervals do not overlap.
        edges.sort();
        let mut active = 0i32;
        for (i, &(t, delta)) in edges.iter().enumerate() {
            active += delta;
            let next = edges.get(i + 1).map_or(t, |e| e.0);
            if next <= t || active <= 1 {
                continue;
            }
            let inside = windows.iter().any(|&(a, b)| a <= t && next <= b);
            let slot = if inside {
                &mut self.max_inside
            } else {
                &mut self.max_outside
            };
            *slot = (*slot).max(active as usize);
            if !inside {
                let who: Vec<String> = self
                    .state
                    .workers
                    .iter()
                    .filter(|w| w.start <= t && next <= w.last)
                    .map(|w| format!("client {} token {}", w.client, w.fence))
                    .collect();
                self.problems.push(format!(
                    "{active} workers at once outside any fault window, for {:.1} ms: {}",
                    (next - t) as f64 / 1e6,
                    who.join(", ")
                ));
            }
        }
        self.max_outside = self.max_outside.max(1);
        self.max_inside = self.max_inside.max(self.max_outside);
    }

    /// Replay the store's log: every write accepted iff its token is at least the highest
    /// accepted before it.
    fn fencing(&mut self) {
        let victims = self.victims();
        let mut highest = 0i64;
        for (i, w) in self.state.writes.iter().enumerate() {
            if w.highest_before != highest {
                self.problems.push(format!(
                    "write {i}: the store's highest token {} disagrees with the log's {highest}",
                    w.highest_before
                ));
            }
            if w.accepted != (w.fence >= highest) {
                self.problems.push(format!(
                    "write {i} with token {} {} while the highest accepted was {highest}",
                    w.fence,
                    if w.accepted { "accepted" } else { "refused" }
                ));
            }
            if w.accepted {
                highest = w.fence;
            } else {
                self.rejected += 1;
                if victims.contains(&w.worker) {
                    self.rejected_stale += 1;
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for w in &self.state.workers {
            if !seen.insert(w.fence) {
                self.tokens_repeated += 1;
            }
        }
    }

    fn liveness(&mut self) {
        for f in &self.faults {
            if f.recovery.is_none() {
                self.problems.push(format!(
                    "{}: the lock was not taken again within {:?} after it healed",
                    f.kind.name(),
                    self.bound
                ));
            }
        }
    }

    fn exits(&mut self) {
        for run in &self.runs {
            // 0: the worker finished; 76: redlock stopped it for a lost lease; 75: --wait ran
            // out; 69: Redis unreachable on the first attempt (killed, cut off).
            if !matches!(run.code, 0 | 69 | 75 | 76) {
                self.problems.push(format!(
                    "client {}: redlock exited {}: {}",
                    run.client,
                    run.code,
                    run.stderr.trim()
                ));
            }
        }
    }

    pub fn longest_recovery(&self) -> Duration {
        let ns = self.faults.iter().filter_map(|f| f.recovery).max();
        Duration::from_nanos(ns.unwrap_or(0))
    }

    /// The summary table, in Markdown so it can go into the README as it is.
    pub fn table(&self) -> String {
        let mut per_kind: BTreeMap<Kind, (usize, u64)> = BTreeMap::new();
        for f in &self.faults {
            let e = per_kind.entry(f.kind).or_default();
            e.0 += 1;
            e.1 = e.1.max(f.recovery.unwrap_or(u64::MAX));
        }
        let mut exits: BTreeMap<i32, usize> = BTreeMap::new();
        for r in &self.runs {
            *exits.entry(r.code).or_default() += 1;
        }
        let secs = |ns: u64| {
            if ns == u64::MAX {
                "never".to_owned()
            } else {
                format!("{:.2} s", ns as f64 / 1e9)
            }
        };
        let mut t = String::new();
        let _ = writeln!(
            t,
            "\n### {} ({:.0} s)\n",
            self.title,
            self.wall.as_secs_f64()
        );
        let _ = writeln!(t, "| fault | injected | longest recovery |");
        let _ = writeln!(t, "|---|---:|---:|");
        for (kind, (n, worst)) in &per_kind {
            let _ = writeln!(t, "| {} | {n} | {} |", kind.name(), secs(*worst));
        }
        let accepted = self.state.writes.iter().filter(|w| w.accepted).count();
        let exits: Vec<String> = exits.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        let _ = writeln!(t);
        let _ = writeln!(t, "| measure | value |");
        let _ = writeln!(t, "|---|---:|");
        for (what, value) in [
            ("faults injected", self.faults.len().to_string()),
            (
                "acquisitions (workers run)",
                self.state.workers.len().to_string(),
            ),
            ("redlock exits by status", exits.join(", ")),
            ("writes accepted", accepted.to_string()),
            (
                "stale writes rejected (robbed holders)",
                self.rejected_stale.to_string(),
            ),
            (
                "writes rejected from holders no fault robbed",
                (self.rejected - self.rejected_stale).to_string(),
            ),
            ("fencing tokens repeated", self.tokens_repeated.to_string()),
            (
                "most workers at once outside fault windows",
                self.max_outside.to_string(),
            ),
            (
                "most workers at once inside fault windows",
                self.max_inside.to_string(),
            ),
            (
                "longest recovery (bound)",
                format!(
                    "{} ({})",
                    secs(self.longest_recovery().as_nanos() as u64),
                    secs(self.bound.as_nanos() as u64)
                ),
            ),
        ] {
            let _ = writeln!(t, "| {what} | {value} |");
        }
        t
    }
}
