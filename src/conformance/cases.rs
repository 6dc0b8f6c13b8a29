//! The cases: each rule of the contract and each fault every backend must survive, written
//! once, as a newcomer would check them by hand with two or three runs of one lock. A case
//! answers Err with what it found where the rule says otherwise.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::Subject;
use crate::exit::Outcome;
use crate::lease::schedule::Renewals;
use crate::lock::record::{RUNS_KEPT, RunEnd, VANISHED};
use crate::lock::{Acquire, Forced, Held, Inspected, Kind, Locker, Renewal, RunEnding, Until};

type Case = fn(&Subject) -> Result<(), String>;

/// Every case, by name.
pub(super) const ALL: &[(&str, Case)] = &[
    ("exclusion", exclusion),
    ("limit", limit),
    ("shared_beside_exclusive", shared_beside_exclusive),
    ("fair_order", fair_order),
    ("min_interval", min_interval),
    ("tokens_rise", tokens_rise),
    ("renew_extends_and_a_lapse_lets_the_next_in", renewal),
    ("stale_release_finds_gone_or_theirs", stale_release),
    ("a_waiter_renews_nothing", a_waiter_renews_nothing),
    ("release_wakes_a_waiter", release_wakes_a_waiter),
    ("record_of_runs", record_of_runs),
    ("record_keeps_the_newest", record_keeps_the_newest),
    ("forced_release", forced_release),
    ("holder_gone_vanishes_once", holder_gone_vanishes_once),
    ("frozen_past_the_lease", frozen_past_the_lease),
    ("killed_server_fails_in_bound", killed_server_fails_in_bound),
    ("hundred_concurrent_counted_exactly", hundred_concurrent),
];

fn ensure(holds: bool, said: impl FnOnce() -> String) -> Result<(), String> {
    holds.then_some(()).ok_or_else(said)
}

fn success() -> RunEnding {
    RunEnding::of(Outcome::Exited(0), 75)
}

/// One client of a lock: its locker and its token.
struct Client {
    locker: Box<dyn Locker>,
    token: String,
    timeout: Duration,
    ttl: Duration,
}

impl Client {
    fn new(s: &Subject, key: &str, kind: Kind) -> Client {
        Client::of(s, s.spec(key, kind))
    }

    fn of(s: &Subject, spec: crate::lock::RunSpec) -> Client {
        Client {
            locker: s.backend.locker(&spec),
            token: spec.token,
            timeout: s.timeout,
            ttl: s.lease,
        }
    }

    /// One attempt; a take settles as a run does beside its command's start.
    fn acquire(&mut self) -> Result<Acquire, String> {
        let got = self.locker.acquire(self.ttl, self.timeout);
        if let Ok(Acquire::Acquired { .. }) = got {
            self.locker.settle(self.timeout);
        }
        got.map_err(|e| format!("acquire failed: {e}"))
    }

    /// Take it, or say what came instead; the fencing token.
    fn take(&mut self) -> Result<i64, String> {
        match self.acquire()? {
            Acquire::Acquired { fence } => Ok(fence),
            other => Err(format!("expected to take the lock, got {other:?}")),
        }
    }

    fn busy(&mut self) -> Result<(), String> {
        match self.acquire()? {
            Acquire::Busy { .. } => Ok(()),
            other => Err(format!("expected Busy, got {other:?}")),
        }
    }

    fn extend(&mut self) -> Result<Renewal, String> {
        let got = self.locker.extend(self.ttl, self.timeout);
        got.map_err(|e| format!("extend failed: {e}"))
    }

    fn release_as(&mut self, ended: RunEnding) -> Result<Held, String> {
        let got = self.locker.release(ended, self.timeout);
        got.map_err(|e| format!("release failed: {e}"))
    }

    fn release(&mut self) -> Result<Held, String> {
        self.release_as(success())
    }

    fn leave(&mut self, busy: bool) -> Result<(), String> {
        let left = self.locker.leave(busy, self.timeout);
        left.map_err(|e| format!("leave failed: {e}"))
    }
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    ensure(got == want, || {
        format!("{what}: got {got:?}, want {want:?}")
    })
}

fn runs(s: &Subject, key: &str) -> Result<crate::lock::Runs, String> {
    let name = format!("{}-{key}", s.name);
    let read = s.backend.node(0).runs(&name, s.timeout);
    read.map_err(|e| format!("reading the record failed: {e}"))
}

/// One holder at a time; the next one in after a release gets a larger token.
fn exclusion(s: &Subject) -> Result<(), String> {
    let (mut a, mut b) = (
        Client::new(s, "x", Kind::Exclusive),
        Client::new(s, "x", Kind::Exclusive),
    );
    let first = a.take()?;
    b.busy()?;
    same("a's release", a.release()?, Held::Ours)?;
    let second = b.take()?;
    ensure(second > first, || format!("token {second} after {first}"))?;
    same("b's release", b.release()?, Held::Ours)
}

/// At most N holders; a client asking for another limit, or to hold it alone, is refused.
fn limit(s: &Subject) -> Result<(), String> {
    let mut held: Vec<Client> = (0..2)
        .map(|_| Client::new(s, "l", Kind::Limit(2)))
        .collect();
    for c in &mut held {
        c.take()?;
    }
    let mut third = Client::new(s, "l", Kind::Limit(2));
    third.busy()?;
    for other in [Kind::Limit(3), Kind::Exclusive] {
        match Client::new(s, "l", other).acquire()? {
            Acquire::Mismatch { .. } => {}
            got => return Err(format!("{other:?} beside Limit(2) holders: got {got:?}")),
        }
    }
    same("a holder's release", held[0].release()?, Held::Ours)?;
    third.take()?;
    third.release()?;
    held[1].release().map(drop)
}

/// Shared holders meet each other, never an exclusive holder.
fn shared_beside_exclusive(s: &Subject) -> Result<(), String> {
    let (mut r1, mut r2) = (
        Client::new(s, "s", Kind::Shared),
        Client::new(s, "s", Kind::Shared),
    );
    r1.take()?;
    r2.take()?;
    let mut w = Client::new(s, "s", Kind::Exclusive);
    w.busy()?;
    r1.release()?;
    r2.release()?;
    w.take()?;
    Client::new(s, "s", Kind::Shared).busy()?;
    w.release().map(drop)
}

/// With `--fair`, the lock goes to the waiter that came first.
fn fair_order(s: &Subject) -> Result<(), String> {
    let fair = || {
        let mut spec = s.spec("f", Kind::Exclusive);
        spec.fair = true;
        Client::of(s, spec)
    };
    let (mut a, mut first, mut second) = (fair(), fair(), fair());
    a.take()?;
    first.busy()?;
    second.busy()?;
    a.release()?;
    match second.acquire()? {
        Acquire::Busy { queued: true, .. } => {}
        got => {
            return Err(format!(
                "the second waiter, first in line free: got {got:?}"
            ));
        }
    }
    first.take()?;
    first.release()?;
    second.take()?;
    second.release().map(drop)
}

/// A run that succeeded within the min-interval skips the next one, which is counted.
fn min_interval(s: &Subject) -> Result<(), String> {
    let spaced = || {
        let mut spec = s.spec("m", Kind::Exclusive);
        spec.min_interval = Some(Duration::from_secs(3600));
        Client::of(s, spec)
    };
    let mut a = spaced();
    a.take()?;
    a.release()?;
    match spaced().acquire()? {
        Acquire::Skipped { ago } if ago < Duration::from_secs(60) => {}
        got => return Err(format!("a run right after a success: got {got:?}")),
    }
    same("skips counted", runs(s, "m")?.summary.counts.skipped(), 1)
}

/// Tokens rise across a release, an expiry and a forced release.
fn tokens_rise(s: &Subject) -> Result<(), String> {
    let client = || Client::new(s, "t", Kind::Exclusive);
    let mut tokens = vec![];
    let mut a = client();
    tokens.push(a.take()?);
    a.release()?;
    let mut b = client();
    tokens.push(b.take()?);
    s.service.advance(s.lease + s.lease / 2);
    let mut c = client();
    tokens.push(c.take()?);
    let name = format!("{}-t", s.name);
    match s.backend.node(0).force_release(&name, None, s.timeout) {
        Ok(Forced::Removed { fence, .. }) => tokens.push(fence),
        got => return Err(format!("forced release: got {got:?}")),
    }
    let mut d = client();
    tokens.push(d.take()?);
    d.release()?;
    ensure(tokens.windows(2).all(|w| w[0] < w[1]), || {
        format!("tokens across release, expiry, forced release: {tokens:?}")
    })
}

/// A renewal extends the lease; a lease that lapsed lets the next holder in.
fn renewal(s: &Subject) -> Result<(), String> {
    let (mut a, mut b) = (
        Client::new(s, "r", Kind::Exclusive),
        Client::new(s, "r", Kind::Exclusive),
    );
    a.take()?;
    s.service.advance(s.lease / 2);
    same("a's renewal", a.extend()?, Renewal::Extended)?;
    s.service.advance(s.lease * 3 / 4);
    b.busy()?;
    s.service.advance(s.lease / 2);
    b.take()?;
    same(
        "a's renewal after its lapse",
        a.extend()?,
        Renewal::Lost(Held::Theirs),
    )?;
    b.release().map(drop)
}

/// A release by a token that no longer holds the lock changes nothing, and says why.
fn stale_release(s: &Subject) -> Result<(), String> {
    let (mut a, mut b) = (
        Client::new(s, "g", Kind::Exclusive),
        Client::new(s, "g", Kind::Exclusive),
    );
    a.take()?;
    s.service.advance(s.lease + s.lease / 2);
    b.take()?;
    same("a's release, b holding", a.release()?, Held::Theirs)?;
    same("b's release", b.release()?, Held::Ours)?;
    same("a's release, the lock free", a.release()?, Held::Gone)
}

/// A client turned away holds nothing: its renewal and its release find another's lock, and
/// the holder's lease is untouched. (A property test found etcd extending a waiter's place.)
fn a_waiter_renews_nothing(s: &Subject) -> Result<(), String> {
    let (mut a, mut b) = (
        Client::new(s, "n", Kind::Exclusive),
        Client::new(s, "n", Kind::Exclusive),
    );
    a.take()?;
    b.busy()?;
    same(
        "the waiter's renewal",
        b.extend()?,
        Renewal::Lost(Held::Theirs),
    )?;
    same("the holder's renewal", a.extend()?, Renewal::Extended)?;
    same("the waiter's release", b.release()?, Held::Theirs)?;
    same("the holder's release", a.release()?, Held::Ours)?;
    same(
        "the waiter's renewal, the lock free",
        b.extend()?,
        Renewal::Lost(Held::Gone),
    )
}

/// A waiter blocked on a busy lock is woken by its release, long before its block ends.
fn release_wakes_a_waiter(s: &Subject) -> Result<(), String> {
    let (mut a, mut b) = (
        Client::new(s, "w", Kind::Exclusive),
        Client::new(s, "w", Kind::Exclusive),
    );
    a.take()?;
    b.busy()?;
    let hold = Duration::from_secs(10);
    let until = Until {
        pause: crate::clock::Moment::now() + hold,
        wait_ends: None,
    };
    let started = Instant::now();
    let waiter = std::thread::spawn(move || {
        let woken = b.locker.wait(until);
        (woken.map_err(|e| e.to_string()), b)
    });
    std::thread::sleep(Duration::from_millis(100));
    a.release()?;
    let (woken, mut b) = waiter.join().map_err(|_| "the waiter panicked")?;
    same("the wait", woken, Ok(true))?;
    let took = started.elapsed();
    ensure(took < hold / 2, || {
        format!("woken {took:?} after the release")
    })?;
    b.take()?;
    b.release().map(drop)
}

/// Each run is recorded with its outcome, newest first, and counted; so is a busy one.
fn record_of_runs(s: &Subject) -> Result<(), String> {
    let mut a = Client::new(s, "rec", Kind::Exclusive);
    a.take()?;
    let mut busy = Client::new(s, "rec", Kind::Exclusive);
    busy.busy()?;
    busy.leave(true)?;
    a.release()?;
    let mut b = Client::new(s, "rec", Kind::Exclusive);
    b.take()?;
    b.release_as(RunEnding::of(Outcome::Exited(3), 75))?;
    let read = runs(s, "rec")?;
    let outcomes: Vec<(&str, &str)> = read
        .runs
        .iter()
        .map(|r| (r.token.as_str(), r.outcome()))
        .collect();
    let want = vec![(b.token.as_str(), "failed"), (a.token.as_str(), "success")];
    same("the runs, newest first", outcomes, want)?;
    let counts = &read.summary.counts;
    let got = [counts.get("success"), counts.get("failed"), counts.busy()];
    same("success, failed, busy counted", got, [1, 1, 1])?;
    let last = read.summary.last_success.map(|r| r.token);
    same("the last success", last, Some(a.token.clone()))
}

/// The record keeps the newest [`RUNS_KEPT`] runs and counts every one.
fn record_keeps_the_newest(s: &Subject) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..RUNS_KEPT + 2 {
        let mut a = Client::new(s, "keep", Kind::Exclusive);
        a.take()?;
        a.release()?;
        last = a.token;
    }
    let read = runs(s, "keep")?;
    same("runs kept", read.runs.len(), RUNS_KEPT as usize)?;
    same("the newest first", read.runs[0].token.clone(), last)?;
    same(
        "successes counted",
        read.summary.counts.get("success"),
        u64::from(RUNS_KEPT) + 2,
    )
}

/// A forced release removes the holder named (or the only one) and fences it off.
fn forced_release(s: &Subject) -> Result<(), String> {
    let mut a = Client::new(s, "force", Kind::Exclusive);
    let fence = a.take()?;
    let name = format!("{}-force", s.name);
    let mut node = s.backend.node(0);
    match node.force_release(&name, Some("someone-else"), s.timeout) {
        Ok(Forced::Other { token, .. }) if token == a.token => {}
        got => return Err(format!("forced release of another token: got {got:?}")),
    }
    match node.force_release(&name, Some(&a.token), s.timeout) {
        Ok(Forced::Removed {
            token, fence: f, ..
        }) if token == a.token && f > fence => {}
        got => return Err(format!("forced release of a's token: got {got:?}")),
    }
    match node.inspect(&name, s.timeout) {
        Ok(Inspected::Lock(info)) if !info.is_held() => {}
        got => return Err(format!("the lock after a forced release: {got:?}")),
    }
    same("a's renewal", a.extend()?, Renewal::Lost(Held::Gone))?;
    match node.force_release(&name, None, s.timeout) {
        Ok(Forced::Free { .. }) => Ok(()),
        got => Err(format!("forced release of a free lock: got {got:?}")),
    }
}

/// A holder that went without a release (its lease lapsed) is `vanished` in the record,
/// counted once however often the record is read or the lock taken after.
fn holder_gone_vanishes_once(s: &Subject) -> Result<(), String> {
    let mut a = Client::new(s, "v", Kind::Exclusive);
    a.take()?;
    drop(a.locker);
    s.service.advance(s.lease + s.lease / 2);
    let mut b = Client::new(s, "v", Kind::Exclusive);
    b.take()?;
    b.release()?;
    for _ in 0..2 {
        let read = runs(s, "v")?;
        let found = read.runs.iter().find(|r| r.token == a.token);
        let vanished = found.is_some_and(|r| matches!(r.end, RunEnd::Vanished { .. }));
        ensure(vanished, || format!("the gone holder's run: {found:?}"))?;
        same("vanished counted", read.summary.counts.get(VANISHED), 1)?;
    }
    Ok(())
}

/// A frozen server extends nothing: each renewal gives up within its bound, so the lease
/// ends on the client (where a run stops its command, 76) before it could on the server.
fn frozen_past_the_lease(s: &Subject) -> Result<(), String> {
    let mut a = Client::new(s, "frozen", Kind::Exclusive);
    let sent = s.now();
    a.take()?;
    let mut renewals = Renewals::new(sent, s.lease);
    s.service.freeze();
    let lost = (|| loop {
        s.until(renewals.due().min(renewals.deadline()));
        let at = s.now();
        if at >= renewals.deadline() {
            return Ok(at);
        }
        let timeout = renewals.timeout(at);
        let answered = Instant::now();
        let got = a.locker.extend(s.lease, timeout);
        let took = answered.elapsed();
        ensure(took < timeout + Duration::from_millis(300), || {
            format!("a renewal bounded by {timeout:?} took {took:?}")
        })?;
        match got {
            Ok(renewal) => return Err(format!("a frozen server's renewal: {renewal:?}")),
            Err(_) => renewals.not_counted(s.now()),
        }
    })();
    s.service.thaw();
    let thawed = s.now();
    let lost = lost?;
    let server_end = sent + s.lease;
    ensure(lost < server_end, || {
        format!("lost at {lost:?}, the server's lease ended at {server_end:?}")
    })?;
    // Thawed, the lease ends on the server too: at once, or a lease after the thaw where a
    // renewal the client gave up on reached the server only then (Redis reads it from the
    // socket when it runs again).
    s.until(thawed + s.lease + s.lease / 4);
    let mut b = Client::new(s, "frozen", Kind::Exclusive);
    b.take()?;
    match a.extend()? {
        Renewal::Lost(_) => {}
        got => {
            return Err(format!(
                "the frozen holder's renewal after the thaw: {got:?}"
            ));
        }
    }
    b.release().map(drop)
}

/// A killed server is reported as a failure within the request's bound (69), and a restarted
/// one serves again.
fn killed_server_fails_in_bound(s: &Subject) -> Result<(), String> {
    let mut a = Client::new(s, "killed", Kind::Exclusive);
    a.take()?;
    a.release()?;
    s.service.kill();
    let started = Instant::now();
    let got = a.locker.acquire(s.lease, s.timeout);
    let took = started.elapsed();
    s.service.restart();
    ensure(got.is_err(), || {
        format!("an acquire from a killed server: {got:?}")
    })?;
    ensure(took < s.timeout + Duration::from_millis(500), || {
        format!("a failure bounded by {:?} took {took:?}", s.timeout)
    })?;
    let back = Instant::now();
    loop {
        match a.locker.acquire(s.lease, s.timeout) {
            Ok(Acquire::Acquired { .. }) => break,
            got if back.elapsed() > Duration::from_secs(15) => {
                return Err(format!("15 s after the restart: {got:?}"));
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    a.release().map(drop)
}

/// 100 clients at once, each one attempt on a semaphore of 10: every run is counted once, by
/// how it ended, and every busy one, exactly. A run is a success when its release found its
/// lease still running; one whose lease lapsed first (a hundred clients at once may slow a real
/// server past a short lease) ended lost or vanished, and is counted so, whether or not the
/// record still lists it (it keeps the newest [`RUNS_KEPT`]).
fn hundred_concurrent(s: &Subject) -> Result<(), String> {
    const CLIENTS: usize = 100;
    let barrier = Arc::new(Barrier::new(CLIENTS));
    // Per client: how its release found the lock, or None when it was turned away.
    let answers: Vec<Result<Option<Held>, String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let mut c = Client::new(s, "hundred", Kind::Limit(10));
                let barrier = Arc::clone(&barrier);
                scope.spawn(move || {
                    barrier.wait();
                    match c.acquire()? {
                        Acquire::Acquired { .. } => c.release().map(Some),
                        Acquire::Busy { .. } => c.leave(true).map(|_| None),
                        got => Err(format!("got {got:?}")),
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    });
    let (mut ran, mut released) = (0, 0);
    for answer in answers {
        if let Some(held) = answer? {
            ran += 1;
            released += u64::from(held == Held::Ours);
        }
    }
    let counts = runs(s, "hundred")?.summary.counts;
    let success = counts.get("success");
    same(
        "successes, runs by how they ended, busy ones counted",
        (success, success + counts.lost(), counts.busy()),
        (released, ran, CLIENTS as u64 - ran),
    )
}
