//! The waiting schedule's decisions, as tables: what follows each answer an attempt or a block
//! gets, at unit speed on a fake clock.

use super::*;

fn at(ms: u64) -> Moment {
    Moment::from_boot(Duration::from_millis(ms))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const TTL: Duration = Duration::from_secs(3);

fn busy(remaining: Option<Duration>) -> Result<Acquire, Failure> {
    Ok(Acquire::Busy {
        remaining,
        queued: false,
    })
}

fn unreachable() -> Result<Acquire, Failure> {
    Err(Failure::Unreachable("no answer".into()))
}

fn refused() -> Result<Acquire, Failure> {
    Err(Failure::Refused("WRONGPASS".into()))
}

fn unacknowledged() -> Result<Acquire, Failure> {
    Err(Failure::Unacknowledged(
        "only 0 of 1 replica(s) acknowledged the lock".into(),
    ))
}

/// What a [`Next`] comes to, failures aside (they are not comparable).
#[derive(Debug, PartialEq)]
enum Step {
    Acquired,
    Over { ending: &'static str, leave: bool },
    WaitForRelease(Until),
    Retry { pause: Duration, first: bool },
}

fn step(next: Next) -> Step {
    match next {
        Next::Acquired { .. } => Step::Acquired,
        Next::Over { ending, leave } => Step::Over {
            ending: match ending {
                Ending::Busy { .. } => "busy",
                Ending::Skipped { .. } => "skipped",
                Ending::Mismatch { .. } => "mismatch",
                Ending::Misconfigured(_) => "misconfigured",
                Ending::Failed(Failure::Refused(_)) => "refused",
                Ending::Failed(Failure::Unreachable(_)) => "unreachable",
                Ending::Failed(Failure::Unacknowledged(_)) => "unacknowledged",
            },
            leave,
        },
        Next::WaitForRelease(d) => Step::WaitForRelease(d),
        Next::Retry { pause, first, .. } => Step::Retry { pause, first },
    }
}

fn over(ending: &'static str, leave: bool) -> Step {
    Step::Over { ending, leave }
}

/// A wait for a release until `pause`, within a wait for the lock that ends at `wait_ends`.
fn blocks(pause: u64, wait_ends: Option<u64>) -> Step {
    Step::WaitForRelease(Until {
        pause: at(pause),
        wait_ends: wait_ends.map(at),
    })
}

/// (the wait, the result, when it ended, what follows)
type Row = (Wait, Result<Acquire, Failure>, u64, Step);

/// Each row's result, the first of a fresh wait begun at 0, gives the row's next step.
fn check(rows: Vec<Row>) {
    for (i, (wait, result, now, want)) in rows.into_iter().enumerate() {
        let mut waiting = Waiting::new(at(0), wait, TTL);
        assert_eq!(step(waiting.after(result, at(now), 0.0)), want, "row {i}");
    }
}

fn retry(pause: u64) -> Step {
    Step::Retry {
        pause: ms(pause),
        first: true,
    }
}

#[test]
fn without_a_wait_every_answer_ends_it() {
    let acquired = Ok(Acquire::Acquired { fence: 1 });
    let skipped = Ok(Acquire::Skipped { ago: ms(1) });
    let mismatch = Ok(Acquire::Mismatch {
        found: HeldAs::Kind(crate::lock::Kind::Limit(3)),
    });
    let no_wait = Wait::Up(ms(0));
    check(vec![
        (no_wait, acquired, 5, Step::Acquired),
        (no_wait, busy(Some(ms(500))), 5, over("busy", true)),
        (no_wait, skipped, 5, over("skipped", false)),
        (no_wait, mismatch, 5, over("mismatch", false)),
        (no_wait, unreachable(), 5, over("unreachable", false)),
        // Too few replicas had the lock taken (given back): as an unreachable server.
        (no_wait, unacknowledged(), 5, over("unacknowledged", false)),
    ]);
}

#[test]
fn within_a_wait_a_refusal_still_ends_it() {
    let misconfigured = Ok(Acquire::Misconfigured(
        "127.0.0.1:6379 and localhost:6379 are one server".into(),
    ));
    check(vec![
        // No wait makes two names of one server two nodes.
        (
            Wait::Up(ms(5000)),
            misconfigured,
            5,
            over("misconfigured", false),
        ),
        (Wait::Up(ms(5000)), refused(), 5, over("refused", false)),
    ]);
}

#[test]
fn within_a_wait_a_server_not_answering_is_retried_while_the_wait_lasts() {
    check(vec![
        (Wait::Up(ms(5000)), unacknowledged(), 5, retry(50)),
        (
            Wait::Up(ms(30)),
            unacknowledged(),
            40,
            over("unacknowledged", false),
        ),
        (Wait::Up(ms(5000)), unreachable(), 5, retry(50)),
        (Wait::Up(ms(30)), unreachable(), 5, retry(25)),
        (
            Wait::Up(ms(30)),
            unreachable(),
            40,
            over("unreachable", false),
        ),
    ]);
}

/// Busy within a wait: until the holder's lease ends, plus a little jitter (none at random 0),
/// but never past the wait.
#[test]
fn within_a_wait_busy_blocks_until_the_lease_ends_or_the_wait_does() {
    check(vec![
        (
            Wait::Up(ms(5000)),
            busy(Some(ms(500))),
            5,
            blocks(505, Some(5000)),
        ),
        (
            Wait::Up(ms(300)),
            busy(Some(ms(500))),
            5,
            blocks(300, Some(300)),
        ),
        (
            Wait::Up(ms(1200)),
            busy(Some(ms(500))),
            5,
            blocks(505, Some(1200)),
        ),
        (Wait::Forever, busy(None), 5, blocks(3005, None)),
    ]);
}

#[test]
fn a_waiter_that_was_busy_leaves_the_queue_whatever_ends_its_wait() {
    let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), TTL);
    assert!(!waiting.registered());
    waiting.after(busy(None), at(10), 0.0);
    assert!(waiting.registered());
    assert_eq!(
        step(waiting.after(Ok(Acquire::Skipped { ago: ms(1) }), at(20), 0.0)),
        over("skipped", true)
    );
    assert_eq!(
        step(waiting.after(busy(None), at(1000), 0.0)),
        over("busy", true)
    );
    // A server whose replicas lag answers: its waiters leave too.
    let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), TTL);
    waiting.after(busy(None), at(10), 0.0);
    assert_eq!(
        step(waiting.after(unacknowledged(), at(1000), 0.0)),
        over("unacknowledged", true)
    );
}

#[test]
fn an_unreachable_server_is_retried_backing_off_and_an_answer_resets_it() {
    let mut waiting = Waiting::new(at(0), Wait::Forever, TTL);
    let pauses: Vec<Step> = (0..4)
        .map(|i| step(waiting.after(unreachable(), at(i * 100), 0.0)))
        .collect();
    assert_eq!(
        pauses,
        [50, 100, 200, 400]
            .iter()
            .enumerate()
            .map(|(i, &p)| Step::Retry {
                pause: ms(p),
                first: i == 0
            })
            .collect::<Vec<_>>()
    );
    // The server answered (busy): the next failure is a first one again.
    waiting.after(busy(Some(ms(10))), at(1000), 0.0);
    assert_eq!(
        step(waiting.after(unreachable(), at(1100), 0.0)),
        Step::Retry {
            pause: ms(50),
            first: true
        }
    );
}

#[test]
fn too_few_replicas_is_retried_at_an_unreachable_servers_pace_said_first_once_a_row() {
    let mut waiting = Waiting::new(at(0), Wait::Up(ms(10_000)), TTL);
    let retry = |pause, first| Step::Retry {
        pause: ms(pause),
        first,
    };
    let pauses: Vec<Step> = (0..4)
        .map(|i| step(waiting.after(unacknowledged(), at(i * 100), 0.0)))
        .collect();
    assert_eq!(
        pauses,
        [
            retry(50, true),
            retry(100, false),
            retry(200, false),
            retry(400, false)
        ]
    );
    // The server then did not answer: another row, from the first pause. And the replicas
    // lagging after that answer: another row again.
    assert_eq!(
        step(waiting.after(unreachable(), at(1000), 0.0)),
        retry(50, true)
    );
    assert_eq!(
        step(waiting.after(unreachable(), at(1100), 0.0)),
        retry(100, false)
    );
    assert_eq!(
        step(waiting.after(unacknowledged(), at(1200), 0.0)),
        retry(50, true)
    );
    // The wait over: the failure that a run without a wait ends with.
    assert_eq!(
        step(waiting.after(unacknowledged(), at(10_000), 0.0)),
        over("unacknowledged", false)
    );
}

#[test]
fn attempts_within_a_wait_are_cut_to_the_wait() {
    let waiting = Waiting::new(at(0), Wait::Up(ms(2000)), Duration::from_secs(30));
    // The first attempt gets its whole limit (ttl/3, at most 5 s).
    assert_eq!(waiting.timeout(at(0)), ms(5000));
    let mut waiting = waiting;
    waiting.after(unreachable(), at(10), 0.0);
    assert_eq!(waiting.timeout(at(500)), ms(1500));
    assert_eq!(waiting.timeout(at(1950)), MIN_ATTEMPT);
    // Past the wait: the last attempt gets MIN_ATTEMPT, so that it ends the wait soon.
    assert_eq!(waiting.timeout(at(2000)), MIN_ATTEMPT);
    assert_eq!(waiting.timeout(at(90_000)), MIN_ATTEMPT);
    // Without a wait, the one attempt has its whole limit, and leaving after it MIN_ATTEMPT.
    let mut waiting = Waiting::new(at(0), Wait::Up(ms(0)), Duration::from_secs(30));
    assert_eq!(waiting.timeout(at(0)), ms(5000));
    waiting.after(busy(None), at(3), 0.0);
    assert_eq!(waiting.timeout(at(3)), MIN_ATTEMPT);
    assert_eq!(waiting.waited(at(1234)), ms(1234));
    assert_eq!(
        Waiting::new(at(0), Wait::Forever, TTL).left(at(5)),
        Duration::MAX
    );
}

/// What an [`AfterBlock`] comes to, failures aside.
#[derive(Debug, PartialEq)]
enum Then {
    Attempt,
    Sleep(Duration),
    Retry { pause: Duration, first: bool },
}

fn then(after: AfterBlock) -> Then {
    match after {
        AfterBlock::Attempt => Then::Attempt,
        AfterBlock::Sleep(d) => Then::Sleep(d),
        AfterBlock::Retry { pause, first, .. } => Then::Retry { pause, first },
    }
}

#[test]
fn every_end_of_a_block_has_its_next_step() {
    // A waiter found it busy at 0 (a holder with 60 s left) within a 2 s wait, so blocked
    // until 2000; (how the block ended, when, what follows).
    let silent = || unreachable().map(|_| true);
    let retry = |pause| Then::Retry {
        pause: ms(pause),
        first: true,
    };
    let rows: Vec<(Result<bool, Failure>, u64, Then)> = vec![
        (Ok(true), 700, Then::Attempt),
        (Ok(false), 1900, Then::Attempt),
        // No answer (frozen, reset): retried as an attempt is, and when the wait is over,
        // still followed by the last attempt.
        (silent(), 300, retry(50)),
        (silent(), 1990, retry(10)),
        (silent(), 2000, retry(0)),
        // An error answered: sit out the rest of the block.
        (refused().map(|_| true), 50, Then::Sleep(ms(1950))),
        (refused().map(|_| true), 1900, Then::Sleep(ms(100))),
        (refused().map(|_| true), 2000, Then::Sleep(Duration::ZERO)),
    ];
    for (i, (woken, now, want)) in rows.into_iter().enumerate() {
        let mut waiting = Waiting::new(at(0), Wait::Up(ms(2000)), TTL);
        assert_eq!(
            step(waiting.after(busy(Some(ms(60_000))), at(0), 0.0)),
            blocks(2000, Some(2000))
        );
        assert_eq!(
            then(waiting.after_block(woken, at(now), 0.0)),
            want,
            "row {i}"
        );
    }
}

#[test]
fn a_waiter_whose_server_froze_while_it_blocked_ends_with_its_wait() {
    // Busy at 10 within a 1 s wait: blocked until 1000 at most.
    let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), Duration::from_secs(30));
    assert_eq!(waiting.timeout(at(0)), ms(5000));
    assert_eq!(
        step(waiting.after(busy(Some(ms(30_000))), at(10), 0.0)),
        blocks(1000, Some(1000))
    );
    // The block is given up at 1000: the first failure, said, and the last attempt at
    // once, with MIN_ATTEMPT; it gets no answer either: 69, at 1100.
    assert_eq!(
        then(waiting.after_block(unreachable().map(|_| true), at(1000), 0.0)),
        Then::Retry {
            pause: Duration::ZERO,
            first: true
        }
    );
    assert_eq!(waiting.timeout(at(1000)), MIN_ATTEMPT);
    assert_eq!(
        step(waiting.after(unreachable(), at(1100), 0.0)),
        over("unreachable", false)
    );
    // The same block answered (nobody woke it) at 990: the last attempt finds it busy: 75.
    let mut waiting = Waiting::new(at(0), Wait::Up(ms(1000)), Duration::from_secs(30));
    waiting.after(busy(Some(ms(30_000))), at(10), 0.0);
    assert_eq!(
        then(waiting.after_block(Ok(false), at(990), 0.0)),
        Then::Attempt
    );
    assert_eq!(waiting.timeout(at(990)), MIN_ATTEMPT);
    // Busy with 8 ms left: a wait for the rest of it.
    assert_eq!(
        step(waiting.after(busy(Some(ms(29_000))), at(992), 0.0)),
        blocks(1000, Some(1000))
    );
    waiting.after_block(Ok(false), at(1090), 0.0);
    assert_eq!(
        step(waiting.after(busy(Some(ms(28_900))), at(1092), 0.0)),
        over("busy", true)
    );
}

#[test]
fn only_renewals_that_counted_move_the_deadline() {
    // ttl 3 s: renew every 1 s, retry every 150 ms, drift 32 ms.
    let mut renewals = Renewals::new(at(0), TTL);
    assert_eq!(renewals.due(), at(1000));
    assert_eq!(renewals.deadline(), at(2968));
    renewals.extended(at(1000));
    assert_eq!((renewals.due(), renewals.deadline()), (at(2000), at(3968)));
    // Two renewals that did not count (no answer; too few replicas): the deadline stays.
    renewals.not_counted(at(2500));
    assert_eq!((renewals.due(), renewals.deadline()), (at(2650), at(3968)));
    renewals.not_counted(at(2700));
    assert_eq!((renewals.due(), renewals.deadline()), (at(2850), at(3968)));
    // The one that counted counts from when it was sent, not when it was answered.
    renewals.extended(at(2850));
    assert_eq!((renewals.due(), renewals.deadline()), (at(3850), at(5818)));
}

#[test]
fn a_renewal_never_waits_past_the_lease() {
    let renewals = Renewals::new(at(0), TTL);
    // renew_timeout(3 s) is 500 ms; 100 ms before the end only 100 ms are left.
    assert_eq!(renewals.timeout(at(1000)), ms(500));
    assert_eq!(renewals.timeout(at(2868)), ms(100));
    assert_eq!(renewals.timeout(at(9000)), ms(1));
}
