//! The checker over the recorded history (exclusion outside fault windows, fencing, liveness)
//! and the summary table it prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::faults::{Fault, Kind};
use super::store::{State, Worker};

/// What may run at once outside fault windows.
#[derive(Debug, Clone)]
pub enum Rules {
    /// At most N workers at once: 1 for the plain lock, N for `--limit N`.
    Limit(usize),
    /// Shared and exclusive clients of one lock (`shared[client]`: it runs `--shared`): an
    /// exclusive worker beside nobody, shared workers beside each other.
    Mix(Vec<bool>),
}

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
    pub rules: Rules,
    pub wall: Duration,
    pub faults: Vec<Fault>,
    pub state: State,
    pub runs: Vec<Run>,
    pub bound: Duration,
    /// Most workers at once at any moment outside the fault windows.
    pub max_outside: usize,
    /// Most workers at once inside a fault window (a paused or robbed holder and its successor).
    pub max_inside: usize,
    /// Mix: most shared workers at once outside fault windows, and the workers run of each kind.
    pub max_shared: usize,
    pub shared_runs: usize,
    pub exclusive_runs: usize,
    /// Workers whose token was not above that of every worker that had started before their
    /// redlock was spawned (so whose acquisition came before theirs).
    pub out_of_order: usize,
    /// The first few of them, for the failure message of a phase that expects none.
    pub order_detail: String,
    /// Write attempts refused because a higher token had been accepted.
    pub rejected: usize,
    /// ... of which came from a worker whose lock a fault had taken away (stale writes).
    pub rejected_stale: usize,
    /// Acquisitions that got a fencing token an earlier one had already had.
    pub tokens_repeated: usize,
    /// The first few tokens repeated.
    pub repeated: Vec<i64>,
    /// Rows of the table that one phase adds: what it measures of its own.
    pub notes: Vec<(String, String)>,
    /// Problems: the suite fails if any.
    pub problems: Vec<String>,
}

impl Report {
    pub fn check(
        title: String,
        rules: Rules,
        wall: Duration,
        faults: Vec<Fault>,
        state: State,
        runs: Vec<Run>,
        bound: Duration,
    ) -> Report {
        let mut r = Report {
            title,
            rules,
            wall,
            faults,
            state,
            runs,
            bound,
            max_outside: 0,
            max_inside: 0,
            max_shared: 0,
            shared_runs: 0,
            exclusive_runs: 0,
            out_of_order: 0,
            order_detail: String::new(),
            rejected: 0,
            rejected_stale: 0,
            tokens_repeated: 0,
            repeated: Vec::new(),
            notes: Vec::new(),
            problems: Vec::new(),
        };
        r.exclusion();
        r.fencing();
        r.order();
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

    /// Whether a worker ran `--shared` (never, outside a mix).
    fn is_shared(&self, w: &Worker) -> bool {
        match &self.rules {
            Rules::Limit(_) => false,
            Rules::Mix(shared) => shared.get(w.client).copied().unwrap_or(false),
        }
    }

    /// Sweep the workers' [start, last action] intervals on CLOCK_MONOTONIC. Outside the fault
    /// windows: at most N at once (`Limit`), or an exclusive worker alone (`Mix`).
    fn exclusion(&mut self) {
        let windows = self.windows();
        let mut edges: Vec<(u64, i32, i32)> = Vec::new();
        for w in &self.state.workers {
            let excl = i32::from(!self.is_shared(w));
            edges.push((w.start, 1, excl));
            edges.push((w.last, -1, -excl));
        }
        self.exclusive_runs = self
            .state
            .workers
            .iter()
            .filter(|w| !self.is_shared(w))
            .count();
        self.shared_runs = self.state.workers.len() - self.exclusive_runs;
        // Ends before starts at the same instant: touching intervals do not overlap.
        edges.sort();
        let (mut active, mut exclusive) = (0i32, 0i32);
        for (i, &(t, delta, excl)) in edges.iter().enumerate() {
            active += delta;
            exclusive += excl;
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
            if !inside && exclusive == 0 {
                self.max_shared = self.max_shared.max(active as usize);
            }
            let allowed = match self.rules {
                Rules::Limit(n) => active as usize <= n,
                Rules::Mix(_) => exclusive == 0,
            };
            if !inside && !allowed {
                let who: Vec<String> = self
                    .state
                    .workers
                    .iter()
                    .filter(|w| w.start <= t && next <= w.last)
                    .map(|w| {
                        let how = if self.is_shared(w) { " (shared)" } else { "" };
                        format!("client {}{how} token {}", w.client, w.fence)
                    })
                    .collect();
                self.problems.push(format!(
                    "{active} workers at once outside any fault window, for {:.1} ms: {}{}",
                    (next - t) as f64 / 1e6,
                    who.join(", "),
                    self.overlap_detail(t, next)
                ));
            }
        }
        self.max_outside = self.max_outside.max(1);
        self.max_inside = self.max_inside.max(self.max_outside);
    }

    /// What a reader needs to tell why workers overlapped in [from, to]: each worker's life and
    /// its redlock's exit and words, and the faults, on the history's clock (ms from the first
    /// worker's start).
    fn overlap_detail(&self, from: u64, to: u64) -> String {
        let t0 = self.state.workers.first().map_or(0, |w| w.start);
        let ms = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
        let workers: Vec<String> = self
            .state
            .workers
            .iter()
            .filter(|w| w.start <= from && to <= w.last)
            .map(|w| {
                let run = self.run_of(w).map_or_else(String::new, |run| {
                    format!(
                        ", exit {} at {:.0} ms, said: {}",
                        run.code,
                        ms(run.reaped),
                        run.stderr.trim().replace('\n', " | ")
                    )
                });
                format!(
                    "\n  token {}: ran {:.0}-{:.0} ms{run}",
                    w.fence,
                    ms(w.start),
                    ms(w.last)
                )
            })
            .collect();
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|f| format!("{} {:.0}-{:.0} ms", f.kind.name(), ms(f.at), ms(f.healed)))
            .collect();
        format!(
            " at {:.0} ms{}\n  faults: {}",
            ms(from),
            workers.concat(),
            faults.join("; ")
        )
    }

    /// The run (redlock process) that ran worker `w`: its pid, its client, and a life that
    /// spans the worker's start (pids are reused over a long run).
    pub fn run_of(&self, w: &Worker) -> Option<&Run> {
        self.runs.iter().find(|run| {
            run.pid == w.redlock
                && run.client == w.client
                && run.spawned <= w.start
                && w.start <= run.reaped
        })
    }

    /// Fencing tokens follow the order of acquisitions: a worker that started before another's
    /// redlock was even spawned acquired first, so its token must be lower. Holds for one
    /// holder and for several (a semaphore's slots, shared holders) alike, as long as Redis
    /// keeps the counter.
    fn order(&mut self) {
        let mut by_start: Vec<(u64, i64)> = self
            .state
            .workers
            .iter()
            .map(|w| (w.start, w.fence))
            .collect();
        by_start.sort();
        // highest[i]: the highest token among the first i workers to start.
        let mut highest = vec![i64::MIN];
        for &(_, fence) in &by_start {
            highest.push((*highest.last().unwrap()).max(fence));
        }
        let mut first = Vec::new();
        for w in &self.state.workers {
            let Some(run) = self.run_of(w) else {
                self.problems.push(format!(
                    "client {} token {}: no redlock run found for its worker",
                    w.client, w.fence
                ));
                continue;
            };
            let before = by_start.partition_point(|&(start, _)| start < run.spawned);
            if highest[before] >= w.fence {
                self.out_of_order += 1;
                if first.len() < 3 {
                    first.push(format!(
                        "client {} got token {} after a worker with token {} had started",
                        w.client, w.fence, highest[before]
                    ));
                }
            }
        }
        if !first.is_empty() {
            first.insert(0, format!("{} tokens out of order:", self.out_of_order));
            self.order_detail = first.join("; ");
        }
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
                if self.repeated.len() < 5 {
                    self.repeated.push(w.fence);
                }
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
            if matches!(run.code, 0 | 69 | 75 | 76) || self.refused_intruder(run) {
                continue;
            }
            self.problems.push(format!(
                "client {}: redlock exited {}: {}",
                run.client,
                run.code,
                run.stderr.trim()
            ));
        }
    }

    /// 64 from a semaphore's client that met the intruder's key (a string, as an exclusive
    /// holder's would be) and said so: by design it refuses to run beside an exclusive lock
    /// rather than wait. Only after an overwrite, within the bound of its healing.
    fn refused_intruder(&self, run: &Run) -> bool {
        let bound = self.bound.as_nanos() as u64;
        matches!(self.rules, Rules::Limit(n) if n > 1)
            && run.code == 64
            && run.stderr.contains("is held as an exclusive lock")
            && self.faults.iter().any(|f| {
                f.kind == Kind::KeyOverwrite
                    && f.at <= run.reaped
                    && run.spawned <= f.healed + bound
            })
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
                "tokens out of acquisition order",
                self.out_of_order.to_string(),
            ),
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
        if let Rules::Mix(_) = self.rules {
            let _ = writeln!(
                t,
                "| workers run shared / exclusive | {} / {} |",
                self.shared_runs, self.exclusive_runs
            );
            let _ = writeln!(
                t,
                "| most shared workers at once outside fault windows | {} |",
                self.max_shared
            );
        }
        for (what, value) in &self.notes {
            let _ = writeln!(t, "| {what} | {value} |");
        }
        t
    }
}
