//! An attempt sent behind a block ([`Locker::wait_then_acquire`]): judged without another
//! request, a busy answer waited on as any other, a lease that would count from too long ago
//! taken again, and a stop during the block giving back what the attempt took.

use super::*;

fn busy_for(remaining: u64) -> Result<Acquire, Failure> {
    Ok(Acquire::Busy {
        remaining: Some(ms(remaining)),
        queued: false,
    })
}

#[test]
fn an_attempt_sent_behind_a_block_is_judged_without_another_request() {
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        latency: ms(2),
        acquires: vec![busy_for(800)],
        behind: vec![Some(Acquire::Acquired { fence: 7 })],
        block_takes: ms(300),
        messages: vec![stop_at(500)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(304, "Acquired"), (502, "Released")]);
    assert!(reported[0].1.contains("fence: 7"), "{reported:?}");
    assert_eq!(
        calls,
        [
            Call::Acquire {
                at: 0,
                timeout: ms(1000)
            },
            Call::Wait { at: 2 },
            Call::Release {
                at: 500,
                outcome: "success"
            },
        ]
    );
    // The lease counts from when the block (and the attempt behind it) was sent: the first
    // renewal would be due at 2 + 1000, which the stop at 500 comes before.
}

#[test]
fn a_busy_answer_behind_a_block_is_waited_on_as_any_other() {
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        latency: ms(2),
        acquires: vec![busy_for(800)],
        behind: vec![
            Some(busy_for(500).unwrap()),
            Some(Acquire::Acquired { fence: 3 }),
        ],
        messages: vec![stop_at(100)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(6, "Acquired"), (102, "Released")]);
    assert_eq!(
        calls[..3],
        [
            Call::Acquire {
                at: 0,
                timeout: ms(1000)
            },
            Call::Wait { at: 2 },
            Call::Wait { at: 4 },
        ]
    );
}

#[test]
fn a_lease_taken_behind_a_long_block_is_taken_again_to_count_from_now() {
    // A block of 1.5 s, half the ttl: the lease it took would count from 1.5 s ago.
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        latency: ms(2),
        acquires: vec![busy_for(2000), Ok(Acquire::Acquired { fence: 9 })],
        behind: vec![Some(Acquire::Acquired { fence: 9 })],
        block_takes: ms(1500),
        messages: vec![stop_at(1600)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(1506, "Acquired"), (1602, "Released")]);
    assert_eq!(
        calls[2],
        Call::Acquire {
            at: 1504,
            timeout: ms(1000)
        }
    );
}

#[test]
fn a_stop_during_a_block_whose_attempt_took_the_lock_gives_it_back() {
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        latency: ms(2),
        acquires: vec![busy_for(800)],
        behind: vec![Some(Acquire::Acquired { fence: 5 })],
        stop_in_block: true,
        messages: vec![stop_at(1)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(8, "GaveBack"), (8, "Stopped")]);
    // It leaves the waiters, then gives back what the attempt took: a run interrupted
    // before its command ran, not a success.
    assert_eq!(
        calls[2..],
        [
            Call::Leave { at: 4 },
            Call::Release {
                at: 6,
                outcome: "interrupted"
            },
        ]
    );
}
