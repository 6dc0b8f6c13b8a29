//! What the phases expect beyond the checker's general rules: tokens in order, a fenced store
//! that refused only robbed holders, a semaphore full, exclusive holders not starved, a
//! restart that happened.

use super::check::Report;
use super::faults::Kind;

/// Tokens never repeat and follow the order of acquisitions, with Redis keeping its data or not
/// (the server's clock carries the order across a restart that lost the counter), and a holder
/// frozen past its lease had its stale write refused and its redlock said so.
pub fn expect_tokens_in_order(r: &mut Report) {
    if r.tokens_repeated > 0 {
        let t0 = r.state.workers.first().map_or(0, |w| w.start);
        let ms = |t: u64| (t.saturating_sub(t0)) as f64 / 1e6;
        let who: Vec<String> = r
            .state
            .workers
            .iter()
            .filter(|w| r.repeated.contains(&w.fence))
            .map(|w| {
                let run = r.run_of(w);
                format!(
                    "token {} client {} ran {:.0}..{:.0} ms, redlock exited {:?}",
                    w.fence,
                    w.client,
                    ms(w.start),
                    ms(w.last),
                    run.map(|run| run.code)
                )
            })
            .collect();
        let faults: Vec<String> = r
            .faults
            .iter()
            .map(|f| format!("{} {:.0}..{:.0} ms", f.kind.name(), ms(f.at), ms(f.healed)))
            .collect();
        r.problems.push(format!(
            "{} fencing tokens repeated: {}; faults: {}",
            r.tokens_repeated,
            who.join("; "),
            faults.join(", ")
        ));
    }
    if r.out_of_order > 0 {
        let detail = r.order_detail.clone();
        r.problems.push(detail);
    }
    let frozen: Vec<i64> = r
        .faults
        .iter()
        .filter(|f| f.kind == Kind::StopJob)
        .filter_map(|f| f.fence)
        .collect();
    if !frozen.is_empty() && r.rejected_stale == 0 {
        r.problems
            .push("a frozen holder resumed but no stale write was refused".into());
    }
    // A holder frozen past its lease ran its command without the lock: redlock must say so.
    // Its run is the one with its pid whose life spans the worker's start: a long run reuses
    // pids (32768 of them, three a run: redlock, its watchdog, its command).
    let mut wrong = Vec::new();
    for w in r.state.workers.iter().filter(|w| frozen.contains(&w.fence)) {
        let code = r.run_of(w).map(|run| run.code);
        if code != Some(76) {
            wrong.push(format!(
                "the redlock frozen past its lease with token {} exited {code:?}, not 76",
                w.fence
            ));
        }
    }
    r.problems.extend(wrong);
}

/// One holder at a time: the fenced store refuses only robbed holders' writes.
pub fn expect_fenced_store(r: &mut Report) {
    if r.rejected != r.rejected_stale {
        r.problems.push(format!(
            "{} writes refused from holders no fault had robbed",
            r.rejected - r.rejected_stale
        ));
    }
}

/// A semaphore of N: N workers did run at once (so the sweep can see more than one), and it
/// kept making progress: on average more than one worker per fault.
pub fn expect_semaphore(r: &mut Report, n: usize) {
    if r.max_outside < n {
        r.problems.push(format!(
            "never {n} workers at once outside fault windows (at most {}): the semaphore ran \
             below its limit",
            r.max_outside
        ));
    }
    if r.state.workers.len() <= r.faults.len() {
        r.problems.push(format!(
            "only {} workers ran across {} faults",
            r.state.workers.len(),
            r.faults.len()
        ));
    }
}

/// Shared and exclusive: shared workers did run together (so the sweep could catch an
/// exclusive one among them), and exclusive workers got in despite the stream of shared ones:
/// at least a tenth of all workers (a third of the clients are exclusive; with new shared
/// holders queued behind a waiting exclusive one they get about 45%, without that queue 2%).
pub fn expect_mix(r: &mut Report) {
    if r.max_shared < 2 {
        r.problems
            .push("shared workers never ran together outside fault windows".into());
    }
    if r.exclusive_runs * 10 < r.state.workers.len() {
        r.problems.push(format!(
            "exclusive workers starved: {} ran beside {} shared ones",
            r.exclusive_runs, r.shared_runs
        ));
    }
}

/// Without persistence the counter is lost with the restart; the server's clock carries the
/// tokens' order across it, so none is handed out twice (the general check says so).
pub fn expect_restart_survived(r: &mut Report) {
    if r.faults.is_empty() {
        r.problems
            .push("no restart happened: the phase showed nothing".into());
    }
}
