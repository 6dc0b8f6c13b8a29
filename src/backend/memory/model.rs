//! The lock as a plain struct: every rule of the contract, in the order a run meets them. The
//! trait impls in `mod.rs` only call these methods; nothing here knows of a connection, a
//! timeout or a thread, and time is the [`Clock`] the caller steps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::lock::record::{
    Counts, RECORD_TTL, RUNS_KEPT, Run, RunEnd, RunEnding, Runs, Summary, VANISHED,
};
use crate::lock::{Acquire, Fence, Forced, Held, HeldAs, Holder, Kind, LockInfo, Place, Several};

/// The model's time: unix milliseconds that move only when [`Clock::advance`] is called, so that
/// a lease ends exactly when a test says and never because a machine was slow.
#[derive(Debug)]
pub(crate) struct Clock(AtomicU64);

impl Clock {
    /// A clock at `unix_ms`.
    pub(crate) fn at(unix_ms: u64) -> Self {
        Self(AtomicU64::new(unix_ms))
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    pub(crate) fn advance(&self, by: Duration) {
        self.0.fetch_add(ms(by), Ordering::SeqCst);
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What one run asks of a lock (the model's part of a `RunSpec`).
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub kind: Kind,
    pub fair: bool,
    pub min_interval: Option<Duration>,
    pub holder: Holder,
}

/// One holder of a lock: its token, until when its lease runs, its run's fencing token.
#[derive(Debug, Clone)]
struct Hold {
    token: String,
    holder: Holder,
    until_ms: u64,
    started_ms: u64,
}

/// Everything one lock name has: its holders, its waiters, its fencing counter and its record.
#[derive(Debug, Default)]
struct Lock {
    /// The last fencing token given out (0: never taken).
    fence: i64,
    /// How the holders hold it (meaningful while `holders` is not empty).
    kind: Kind,
    holders: Vec<Hold>,
    /// `--fair` waiters in the order they came, and exclusive waiters behind shared holders.
    queue: Vec<String>,
    /// Waiters turned away and not gone (`status`'s waiters), by token: the releases they
    /// have seen, so that a release between their attempt and their wait still wakes them.
    waiters: BTreeMap<String, u64>,
    /// Waits cut short from another thread, not yet seen by the waiter.
    interrupted: BTreeSet<String>,
    /// Releases so far: a waiter that has seen fewer is woken.
    releases: u64,
    /// When a run last succeeded (for `--min-interval`).
    last_success_ms: Option<u64>,
    /// The record: runs newest first, at most [`RUNS_KEPT`]; the last success and the last run to
    /// end kept apart, so that the list's bound never hides them; the counters.
    runs: Vec<Run>,
    last_success: Option<Run>,
    last_ended: Option<Run>,
    counts: BTreeMap<String, u64>,
    /// The last time anyone used the lock: everything it has goes [`RECORD_TTL`] after.
    used_ms: u64,
}

/// Every lock of one service, by name.
#[derive(Debug, Default)]
pub(crate) struct Locks {
    locks: BTreeMap<String, Lock>,
}

impl Locks {
    /// Take lock `name` for `token`, for `ttl`, as `ask` says; `now_ms` by the model's clock.
    pub(crate) fn acquire(
        &mut self,
        name: &str,
        ask: &Ask,
        token: &str,
        ttl: Duration,
        now_ms: u64,
    ) -> Acquire {
        let lock = self.tidy(name, now_ms, true);
        // A run that succeeded within the min-interval wins over everything else, as on every
        // backend: the run is skipped, and counted.
        if let (Some(interval), Some(at)) = (ask.min_interval, lock.last_success_ms) {
            let ago = Duration::from_millis(now_ms - at);
            if ago < interval {
                count(lock, "skipped");
                return Acquire::Skipped { ago };
            }
        }
        // A retry of our own take whose answer was lost finds our token: the same run, its
        // lease restarted, its fencing token the same (every backend answers so). Safe:
        // a token is one run's alone, so nobody else is let in, and no new run is counted.
        if let Some(hold) = lock.holders.iter_mut().find(|h| h.token == token) {
            hold.until_ms = now_ms + ms(ttl);
            let fence = run_of(lock, token).map_or(lock.fence, |r| r.fence);
            return Acquire::Acquired { fence };
        }
        if let Some(found) = mismatch(lock.kind, ask.kind).filter(|_| !lock.holders.is_empty()) {
            return Acquire::Mismatch { found };
        }
        let room = match (lock.holders.is_empty(), ask.kind) {
            (true, _) => true,
            (false, Kind::Exclusive) => false,
            (false, Kind::Limit(n)) => lock.holders.len() < n as usize,
            // Shared holders meet each other, never an exclusive holder, and no new one gets in
            // ahead of an exclusive waiter queued behind them.
            (false, Kind::Shared) => lock.kind == Kind::Shared && lock.queue.is_empty(),
        };
        // With `--fair` (and for an exclusive waiter behind shared holders) the lock goes to
        // the head of the queue, or to anyone when nobody waits.
        let queues = ask.fair || (ask.kind == Kind::Exclusive && lock.kind == Kind::Shared);
        let first = lock.queue.first().is_none_or(|head| head == token);
        if room && (!queues || first) {
            return Acquire::Acquired {
                fence: take(lock, ask, token, ttl, now_ms),
            };
        }
        if queues && !lock.queue.iter().any(|t| t == token) {
            lock.queue.push(token.to_owned());
        }
        let seen = lock.releases;
        lock.waiters.entry(token.to_owned()).or_insert(seen);
        let remaining = lock
            .holders
            .iter()
            .map(|h| h.until_ms.saturating_sub(now_ms))
            .min()
            .map(Duration::from_millis);
        Acquire::Busy {
            remaining,
            queued: room && ask.fair,
        }
    }

    /// Extend `token`'s lease to `ttl` from now, if it still holds lock `name`.
    pub(crate) fn extend(&mut self, name: &str, token: &str, ttl: Duration, now_ms: u64) -> Held {
        let lock = self.tidy(name, now_ms, true);
        match lock.holders.iter_mut().find(|h| h.token == token) {
            Some(hold) => {
                hold.until_ms = now_ms + ms(ttl);
                Held::Ours
            }
            None => gone_or_theirs(lock),
        }
    }

    /// Give lock `name` back if `token` holds it, recording how the run ended and waking the
    /// waiters. A run that lost the lock before is recorded as `ended.lost` says, once.
    pub(crate) fn release(
        &mut self,
        name: &str,
        token: &str,
        ended: RunEnding,
        now_ms: u64,
    ) -> Held {
        let lock = self.tidy(name, now_ms, true);
        let Some(at) = lock.holders.iter().position(|h| h.token == token) else {
            let found = gone_or_theirs(lock);
            // The run ends as lost, unless its lapse was recorded already (vanished).
            if run_of(lock, token).is_some_and(|r| matches!(r.end, RunEnd::Running { .. })) {
                let lost = ended.lost;
                end_run(lock, token, lost.lost_outcome, lost.lost_status, now_ms);
            }
            return found;
        };
        lock.holders.remove(at);
        end_run(lock, token, ended.outcome, ended.status, now_ms);
        if ended.succeeded() {
            lock.last_success_ms = Some(now_ms);
        }
        lock.releases += 1;
        Held::Ours
    }

    /// Whether a waiter on lock `name` should stop blocking: a release it has not seen came
    /// (true, and now seen), or its wait was cut short (Some(false)); None: keep waiting.
    pub(crate) fn woken(&mut self, name: &str, token: &str, now_ms: u64) -> Option<bool> {
        let lock = self.tidy(name, now_ms, false);
        if lock.interrupted.remove(token) {
            return Some(false);
        }
        let releases = lock.releases;
        let seen = lock.waiters.entry(token.to_owned()).or_insert(releases);
        if *seen < releases {
            *seen = releases;
            return Some(true);
        }
        // A free lock this waiter may take wakes it at once (a lapsed lease lets the next one in
        // as a release does).
        let first = lock.queue.first().is_none_or(|head| head == token);
        (lock.holders.is_empty() && first).then_some(true)
    }

    /// Cut `token`'s wait on lock `name` short.
    pub(crate) fn interrupt(&mut self, name: &str, token: &str) {
        self.locks
            .entry(name.to_owned())
            .or_default()
            .interrupted
            .insert(token.to_owned());
    }

    /// `token` stops waiting for lock `name`; `busy`: its run gave up on a busy lock.
    pub(crate) fn leave(&mut self, name: &str, token: &str, busy: bool, now_ms: u64) {
        let lock = self.tidy(name, now_ms, true);
        lock.queue.retain(|t| t != token);
        lock.waiters.remove(token);
        lock.interrupted.remove(token);
        if busy {
            count(lock, "busy");
        }
        // Leaving may make another waiter the head of a free lock's queue.
        lock.releases += 1;
    }

    /// Break lock `name`: remove its holder (the one of `token`, when given) and advance its
    /// fencing counter past theirs. The record is left alone: the holder's own renewal or
    /// release finds the lock lost and records it.
    pub(crate) fn force_release(&mut self, name: &str, token: Option<&str>, now_ms: u64) -> Forced {
        let lock = self.tidy(name, now_ms, true);
        let fence = lock.fence;
        let held_as = HeldAs::Kind(lock.kind);
        let holders = lock.holders.len() as u64;
        let at = match (token, lock.holders.len()) {
            (_, 0) => {
                let cleared = lock.queue.len() as u64;
                lock.queue.clear();
                return Forced::Free { fence, cleared };
            }
            (None, 1) => 0,
            (None, _) => {
                return Forced::Several {
                    held_as,
                    holders,
                    fence,
                };
            }
            (Some(token), _) => match lock.holders.iter().position(|h| h.token == token) {
                Some(at) => at,
                None if lock.kind == Kind::Exclusive => {
                    let token = lock.holders[0].token.clone();
                    return Forced::Other { token, fence };
                }
                None => {
                    return Forced::NotAHolder {
                        held_as,
                        holders,
                        fence,
                    };
                }
            },
        };
        let removed = lock.holders.remove(at);
        let fence = next_fence(lock, now_ms);
        lock.releases += 1;
        Forced::Removed {
            token: removed.token,
            fence,
            holder: Some(removed.holder),
            held_as: if lock.kind == Kind::Exclusive {
                HeldAs::Kind(Kind::Exclusive)
            } else {
                held_as
            },
            left: lock.holders.len() as u64,
        }
    }

    /// The names of the locks kept at `now_ms`.
    pub(crate) fn names(&self, now_ms: u64) -> BTreeSet<String> {
        self.locks
            .iter()
            .filter(|(_, lock)| !forgotten(lock, now_ms))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Lock `name` as `status` shows it.
    pub(crate) fn inspect(&mut self, name: &str, now_ms: u64) -> LockInfo {
        let lock = self.tidy(name, now_ms, false);
        let left = |h: &Hold| Duration::from_millis(h.until_ms.saturating_sub(now_ms));
        let exclusive = lock.kind == Kind::Exclusive && !lock.holders.is_empty();
        let several = (!exclusive && !lock.holders.is_empty()).then(|| {
            let mut places: Vec<Place> = lock
                .holders
                .iter()
                .map(|h| Place {
                    token: h.token.clone(),
                    lease: left(h),
                    holder: Some(h.holder.clone()),
                    age: Some(Duration::from_millis(now_ms - h.started_ms)),
                })
                .collect();
            places.sort_by_key(|p| p.lease);
            Several {
                held_as: HeldAs::Kind(lock.kind),
                ttl: places.last().map(|p| p.lease),
                places,
            }
        });
        let first = lock.holders.first().filter(|_| exclusive);
        LockInfo {
            stored_key: name.to_owned(),
            fence: Fence::Counter(lock.fence),
            held: first.map(|h| (h.token.clone(), Some(left(h)))),
            holder: first.map(|h| h.holder.clone()),
            several,
            done: lock
                .last_success_ms
                .map(|at| (Duration::from_millis(now_ms - at), None)),
            queue: (!lock.queue.is_empty()).then_some((lock.queue.len() as u64, Duration::ZERO)),
            waiting: lock.waiters.len() as u64,
            runs: summary(lock, now_ms),
        }
    }

    /// The record of lock `name`'s runs.
    pub(crate) fn runs(&mut self, name: &str, now_ms: u64) -> Runs {
        let lock = self.tidy(name, now_ms, false);
        Runs {
            summary: summary(lock, now_ms),
            runs: lock.runs.clone(),
        }
    }

    /// Lock `name`, with what time has done to it by `now_ms`: holders whose lease ended are
    /// gone (their runs vanished, counted once), and every lock unused for [`RECORD_TTL`] is
    /// forgotten whole, its fencing counter with it (the next token still rises: see
    /// [`next_fence`]). `used`: this request is a use of the lock (a take, renewal, release,
    /// leave or forced release), which starts its [`RECORD_TTL`] again; reading it is not.
    fn tidy(&mut self, name: &str, now_ms: u64, used: bool) -> &mut Lock {
        self.locks.retain(|_, lock| !forgotten(lock, now_ms));
        let lock = self.locks.entry(name.to_owned()).or_default();
        let lapsed: Vec<Hold> = lock
            .holders
            .iter()
            .filter(|h| h.until_ms <= now_ms)
            .cloned()
            .collect();
        lock.holders.retain(|h| h.until_ms > now_ms);
        for hold in lapsed {
            // Counted by its hold, once: the record may no longer list a run that many others
            // came after, but every run that took the lock is counted by how it ended.
            count(lock, VANISHED);
            let run = lock.runs.iter_mut().find(|r| r.token == hold.token);
            if let Some(run) = run.filter(|r| matches!(r.end, RunEnd::Running { .. })) {
                run.end = RunEnd::Vanished {
                    by: Some(hold.until_ms),
                };
            }
            lock.releases += 1;
        }
        if used {
            lock.used_ms = now_ms;
        }
        lock
    }
}

/// Whether `lock` is gone by `now_ms`: never used (only read), or idle (nobody holds it or
/// queues for it) for [`RECORD_TTL`] since its last use.
fn forgotten(lock: &Lock, now_ms: u64) -> bool {
    let idle = lock.holders.is_empty() && lock.queue.is_empty();
    lock.used_ms == 0 || (idle && now_ms.saturating_sub(lock.used_ms) >= ms(RECORD_TTL))
}

/// Why a run asking for `asked` may not join holders of kind `held`: all clients of a lock give
/// the same `--limit`, and shared holders meet only exclusive ones.
fn mismatch(held: Kind, asked: Kind) -> Option<HeldAs> {
    let meet = match (held, asked) {
        (Kind::Exclusive | Kind::Shared, Kind::Exclusive | Kind::Shared) => true,
        (Kind::Limit(a), Kind::Limit(b)) => a == b,
        _ => false,
    };
    (!meet).then_some(HeldAs::Kind(held))
}

/// `token` takes a place in `lock`: a new fencing token, a lease, a run in the record.
fn take(lock: &mut Lock, ask: &Ask, token: &str, ttl: Duration, now_ms: u64) -> i64 {
    let fence = next_fence(lock, now_ms);
    lock.queue.retain(|t| t != token);
    lock.waiters.remove(token);
    lock.kind = ask.kind;
    lock.holders.push(Hold {
        token: token.to_owned(),
        holder: ask.holder.clone(),
        until_ms: now_ms + ms(ttl),
        started_ms: now_ms,
    });
    lock.runs.insert(
        0,
        Run {
            token: token.to_owned(),
            host: ask.holder.host.clone(),
            pid: ask.holder.pid,
            started_ms: now_ms,
            fence,
            end: RunEnd::Running {
                so_far: Duration::ZERO,
            },
        },
    );
    lock.runs.truncate(RUNS_KEPT as usize);
    fence
}

/// The next fencing token: larger than every one given before, and than the clock in
/// microseconds, so that a lock forgotten after [`RECORD_TTL`] still gives a larger one (Redis
/// takes its clock as the same floor; the model's clock never steps back).
fn next_fence(lock: &mut Lock, now_ms: u64) -> i64 {
    let floor = i64::try_from(now_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
    lock.fence = (lock.fence + 1).max(floor);
    lock.fence
}

/// What a renewal or release that did not find its token found: another's token where one
/// holder holds the lock alone; else its place is gone (a free lock, or several holders, none of
/// them this one), as every backend answers. The run makes the same of both (the lock is lost,
/// 76); only its message differs.
fn gone_or_theirs(lock: &Lock) -> Held {
    match (lock.holders.len(), lock.kind) {
        (1, Kind::Exclusive) => Held::Theirs,
        _ => Held::Gone,
    }
}

fn run_of<'a>(lock: &'a Lock, token: &str) -> Option<&'a Run> {
    lock.runs.iter().find(|r| r.token == token)
}

fn count(lock: &mut Lock, label: &str) {
    *lock.counts.entry(label.to_owned()).or_default() += 1;
}

/// `token`'s run ended with `outcome` and `status` at `now_ms`: counted once, and recorded
/// where the list still keeps it.
fn end_run(lock: &mut Lock, token: &str, outcome: &str, status: i32, now_ms: u64) {
    count(lock, outcome);
    let Some(run) = lock.runs.iter_mut().find(|r| r.token == token) else {
        return;
    };
    run.end = RunEnd::Ended {
        outcome: outcome.to_owned(),
        status,
        took: Duration::from_millis(now_ms.saturating_sub(run.started_ms)),
    };
    let run = run.clone();
    if run.succeeded() {
        lock.last_success = Some(run.clone());
    }
    lock.last_ended = Some(run);
}

fn summary(lock: &Lock, now_ms: u64) -> Summary {
    let mut last_run = lock.runs.first().cloned();
    if let Some(Run {
        end: RunEnd::Running { so_far },
        started_ms,
        ..
    }) = &mut last_run
    {
        *so_far = Duration::from_millis(now_ms.saturating_sub(*started_ms));
    }
    Summary {
        now_ms,
        last_run,
        last_success: lock.last_success.clone(),
        last_ended: lock.last_ended.clone(),
        counts: Counts(
            lock.counts
                .iter()
                .map(|(label, n)| (label.clone(), *n))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Outcome;

    const MINUTE: u64 = 60_000;

    fn ask() -> Ask {
        Ask {
            kind: Kind::Exclusive,
            fair: false,
            min_interval: None,
            holder: Holder {
                host: "h".to_owned(),
                pid: 1,
                command: "true".to_owned(),
                started: 0,
            },
        }
    }

    fn run_once(locks: &mut Locks, name: &str, token: &str, now: u64) -> i64 {
        let ttl = Duration::from_secs(30);
        let Acquire::Acquired { fence } = locks.acquire(name, &ask(), token, ttl, now) else {
            panic!("not taken");
        };
        let ended = RunEnding::of(Outcome::Exited(0), 75);
        assert_eq!(locks.release(name, token, ended, now + 1), Held::Ours);
        fence
    }

    /// The contract's "nothing kept for ever": a name used once is gone, record and all,
    /// [`RECORD_TTL`] after its last use, and its next token is still larger.
    #[test]
    fn a_name_used_once_leaves_nothing_after_the_record_ttl_and_its_next_token_rises() {
        let mut locks = Locks::default();
        let start = 1_800_000_000_000;
        let first = run_once(&mut locks, "once-123", "a", start);
        let names = |locks: &Locks, at| locks.names(at).into_iter().collect::<Vec<_>>();
        assert_eq!(names(&locks, start + MINUTE), ["once-123"]);
        // Reading it is not a use: it still goes on time.
        let read = locks.runs("once-123", start + 2 * MINUTE);
        assert_eq!(read.runs.len(), 1);
        let gone = start + 1 + ms(RECORD_TTL);
        assert!(
            names(&locks, gone - 1).len() == 1,
            "kept until the record's time"
        );
        assert!(
            names(&locks, gone).is_empty(),
            "kept past the record's time"
        );
        let read = locks.runs("once-123", gone);
        assert!(read.runs.is_empty() && read.summary.counts.0.is_empty());
        let next = run_once(&mut locks, "once-123", "b", gone + MINUTE);
        assert!(next > first, "{next} after {first}");
    }

    /// A lock held or queued for is never forgotten, however long since its last use.
    #[test]
    fn a_held_lock_is_kept_past_the_record_ttl() {
        let mut locks = Locks::default();
        let start = 1_800_000_000_000;
        let long = RECORD_TTL + Duration::from_secs(3600);
        let taken = locks.acquire("held", &ask(), "a", long, start);
        assert!(matches!(taken, Acquire::Acquired { .. }));
        let later = start + ms(RECORD_TTL) + MINUTE;
        assert_eq!(locks.names(later).len(), 1);
        assert!(matches!(
            locks.acquire("held", &ask(), "b", long, later),
            Acquire::Busy { .. }
        ));
    }
}
