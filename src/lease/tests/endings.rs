//! How a wait ends without the lock: a waiter told to stop leaves the queue, a skipped or
//! mismatched run is reported as such, and after an attempt whose reply was lost, what that
//! attempt may have taken is given back (not when the server answered the failure); a take too few
//! replicas acknowledged is given back unused while the wait tries again, and as the run's end
//! (unavailable) when it is over.

use super::*;

#[test]
fn a_waiter_told_to_stop_leaves_the_queue() {
    let (reported, calls) = run(Run {
        wait: Wait::Forever,
        acquires: vec![Ok(Acquire::Busy {
            remaining: Some(ms(3000)),
            queued: false,
        })],
        stopping: true,
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Stopped")]);
    assert_eq!(calls.last(), Some(&Call::Leave { at: 0 }));
}

#[test]
fn a_skipped_or_mismatched_run_is_reported_as_such() {
    let (reported, _) = run(Run {
        acquires: vec![Ok(Acquire::Skipped { ago: ms(5000) })],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Skipped")]);
    let (reported, _) = run(Run {
        acquires: vec![Ok(Acquire::Mismatch {
            found: crate::lock::HeldAs::Kind(crate::lock::Kind::Limit(3)),
        })],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Mismatch")]);
}

fn releases(calls: &[Call]) -> usize {
    calls
        .iter()
        .filter(|c| matches!(c, Call::Release { .. }))
        .count()
}

#[test]
fn a_lost_reply_to_the_last_attempt_is_given_back_before_the_failure_is_reported() {
    let (reported, calls) = run(Run {
        acquires: vec![Err(unreachable())],
        lost_replies: true,
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "GaveBack"), (0, "Failed")]);
    assert_eq!(
        calls.last(),
        Some(&Call::Release {
            at: 0,
            outcome: "unavailable"
        })
    );
}

#[test]
fn a_failure_the_server_answered_gives_nothing_back() {
    let (reported, calls) = run(Run {
        acquires: vec![Err(Failure::Refused("NOPERM".into()))],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Failed")]);
    assert_eq!(releases(&calls), 0);
}

#[test]
fn a_waiter_stopped_after_a_lost_reply_gives_it_back_too() {
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        acquires: vec![Err(unreachable())],
        lost_replies: true,
        messages: vec![stop_at(50)],
        ..Run::default()
    });
    assert_eq!(
        names(&reported),
        [(0, "Retrying"), (50, "GaveBack"), (50, "Stopped")]
    );
    assert_eq!(releases(&calls), 1);
}

/// A stop that came while the last attempt hung (TERM to a run whose acquire waits on a frozen
/// server) says how the run ended when what that attempt may have taken is given back: it was
/// interrupted, not refused by the server.
#[test]
fn a_stop_during_a_lost_attempt_gives_it_back_as_interrupted() {
    let (_, calls) = run(Run {
        acquires: vec![Err(unreachable())],
        lost_replies: true,
        latency: ms(100),
        messages: vec![(
            50,
            Stop::Stop {
                ended: RunEnding::of(Outcome::Interrupted(15), 75),
            },
        )],
        ..Run::default()
    });
    assert_eq!(
        calls.last(),
        Some(&Call::Release {
            at: 100,
            outcome: "interrupted"
        })
    );
}

#[test]
fn a_take_too_few_replicas_acknowledged_is_given_back_unused_until_the_wait_ends() {
    let unacknowledged = || Err(Failure::Unacknowledged("only 0 of 1 replica(s)".into()));
    let given_back = |calls: &[Call]| -> Vec<Option<&'static str>> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::GiveBackUnacknowledged { ended, .. } => Some(*ended),
                _ => None,
            })
            .collect()
    };
    // Within a wait: unused, then tried again, and taken.
    let (reported, calls) = run(Run {
        wait: Wait::Up(ms(10_000)),
        acquires: vec![unacknowledged(), unacknowledged()],
        messages: vec![(
            5000,
            Stop::Stop {
                ended: RunEnding::of(Outcome::Exited(0), 75),
            },
        )],
        ..Run::default()
    });
    assert_eq!(given_back(&calls), [None, None]);
    assert!(
        reported.iter().any(|(_, r)| r.contains("Acquired")),
        "{reported:?}"
    );
    assert!(
        reported
            .iter()
            .all(|(_, r)| !r.contains("Retrying") || r.contains("; released it")),
        "{reported:?}"
    );
    // No wait: the one take is the run's end, recorded so, and nothing else is released.
    let (reported, calls) = run(Run {
        acquires: vec![unacknowledged()],
        ..Run::default()
    });
    assert_eq!(given_back(&calls), [Some("unavailable")]);
    assert_eq!(releases(&calls), 0);
    assert_eq!(names(&reported), [(0, "Failed")]);
    assert!(reported[0].1.contains("; released it"), "{reported:?}");
}
