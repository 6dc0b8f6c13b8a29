//! A held lease: renewed every third of the ttl, counted from each renewal's send; a failed
//! renewal retried soon without moving the deadline; the last renewals given only what is left;
//! a lost lock reported with nothing released; a renewal asked for at once.

use super::*;

#[test]
fn a_held_lease_is_renewed_every_third_of_the_ttl_from_the_last_send() {
    let (reported, calls) = run(Run {
        latency: ms(5),
        messages: vec![stop_at(3500)],
        ..Run::default()
    });
    assert_eq!(
        names(&reported),
        [
            (5, "Acquired"),
            (1005, "Renewed"),
            (2005, "Renewed"),
            (3005, "Renewed"),
            (3505, "Released"),
        ]
    );
    // Due ttl/3 after each request was sent, not after its answer (5 ms later).
    let extends: Vec<u64> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Extend { at, .. } => Some(*at),
            _ => None,
        })
        .collect();
    assert_eq!(extends, [1000, 2000, 3000]);
    assert_eq!(
        calls.last(),
        Some(&Call::Release {
            at: 3500,
            outcome: "success"
        })
    );
    assert!(reported[0].1.contains("waited: 5ms"), "{reported:?}");
}

#[test]
fn a_failed_renewal_is_retried_soon_and_the_deadline_does_not_move() {
    let (reported, calls) = run(Run {
        extends: vec![
            Err(unreachable()),
            Ok(Renewal::Unacknowledged("0 of 1".into())),
        ],
        messages: vec![stop_at(1400)],
        ..Run::default()
    });
    assert_eq!(
        names(&reported),
        [
            (0, "Acquired"),
            (1000, "RenewFailed"),
            (1150, "Unacknowledged"),
            (1300, "Renewed"),
            (1400, "Released"),
        ]
    );
    // Each retry's time limit is what is left of the lease that counted (the acquire's, ending
    // at 2968 ms), at most ttl/6.
    let timeouts: Vec<Duration> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Extend { timeout, .. } => Some(*timeout),
            _ => None,
        })
        .collect();
    assert_eq!(timeouts, [ms(500), ms(500), ms(500)]);
}

#[test]
fn renewals_near_the_end_of_the_lease_get_only_what_is_left() {
    let (_, calls) = run(Run {
        extends: (0..12).map(|_| Err(unreachable())).collect(),
        messages: vec![stop_at(2900)],
        ..Run::default()
    });
    let last = calls
        .iter()
        .filter_map(|c| match c {
            Call::Extend { at, timeout } => Some((*at, *timeout)),
            _ => None,
        })
        .next_back()
        .unwrap();
    // Retries every 150 ms from 1000: the last before the stop is at 2800, with 168 ms left.
    assert_eq!(last, (2800, ms(168)));
}

#[test]
fn a_lost_lock_is_reported_and_nothing_is_released() {
    let (reported, calls) = run(Run {
        extends: vec![Ok(Renewal::Lost(Held::Gone))],
        messages: vec![stop_at(1500)],
        ..Run::default()
    });
    assert_eq!(
        names(&reported),
        [(0, "Acquired"), (1000, "Lost"), (1500, "Released")]
    );
    assert!(reported[2].1.contains("Released(None)"), "{reported:?}");
    assert!(!calls.iter().any(|c| matches!(c, Call::Release { .. })));
}

#[test]
fn renew_now_renews_at_once() {
    let (reported, calls) = run(Run {
        messages: vec![(400, Stop::RenewNow), stop_at(1000)],
        ..Run::default()
    });
    assert_eq!(
        names(&reported),
        [(0, "Acquired"), (400, "Renewed"), (1000, "Released")]
    );
    assert!(calls.contains(&Call::Extend {
        at: 400,
        timeout: ms(500)
    }));
}
