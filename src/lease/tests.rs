//! The lease thread's work against a fake clock and a fake lock: no server, no waiting. Each test
//! scripts what the lock answers, and when the supervisor asks to stop or to renew, and checks
//! what the thread reported and when, and what it asked of the lock.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::lock::{Acquire, Interrupt, Until};

/// A fake clock: waiting jumps to the deadline, or to the moment a scripted message arrives.
#[derive(Clone)]
struct FakeClock {
    now: Arc<Mutex<Moment>>,
    /// Messages the supervisor sends, at their moments.
    messages: Arc<Mutex<VecDeque<(Moment, Stop)>>>,
}

impl FakeClock {
    fn at(&self) -> u64 {
        let now = *self.now.lock().unwrap();
        (now.since_boot() - BASE).as_millis() as u64
    }

    fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap();
        *now = *now + by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Moment {
        *self.now.lock().unwrap()
    }

    fn wait(&self, inbox: &Receiver<Stop>, until: Moment) -> Option<Stop> {
        match inbox.try_recv() {
            Ok(stop) => return Some(stop),
            Err(TryRecvError::Disconnected) => {
                return Some(Stop::Stop {
                    ended: unaccounted(),
                });
            }
            Err(TryRecvError::Empty) => {}
        }
        let mut messages = self.messages.lock().unwrap();
        let mut now = self.now.lock().unwrap();
        match messages.front() {
            Some(&(at, stop)) if at <= until => {
                messages.pop_front();
                *now = (*now).max(at);
                Some(stop)
            }
            _ => {
                *now = (*now).max(until);
                None
            }
        }
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

const BASE: Duration = Duration::from_secs(1000);

fn at(ms: u64) -> Moment {
    Moment::from_boot(BASE + Duration::from_millis(ms))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What the thread asked of the lock, and when (ms), with the time limit it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Acquire {
        at: u64,
        timeout: Duration,
    },
    Wait {
        at: u64,
    },
    Leave {
        at: u64,
    },
    Extend {
        at: u64,
        timeout: Duration,
    },
    Release {
        at: u64,
        outcome: &'static str,
    },
    /// A take too few replicas acknowledged, given back: as a run's end (its outcome), or
    /// unused (None).
    GiveBackUnacknowledged {
        at: u64,
        ended: Option<&'static str>,
    },
}

/// A fake lock that answers as scripted; each answer takes `latency` of the fake clock.
struct FakeLocker {
    clock: FakeClock,
    latency: Duration,
    acquires: VecDeque<Result<Acquire, Failure>>,
    /// How blocks end: an error takes the block's whole limit (a frozen connection).
    waits: VecDeque<Result<bool, Failure>>,
    extends: VecDeque<Result<Renewal, Failure>>,
    releases: VecDeque<Result<Held, Failure>>,
    calls: Arc<Mutex<Vec<Call>>>,
    /// A failed acquire lost its reply (it may have taken the lock); the last one failed.
    lost_replies: bool,
    last_failed: bool,
    /// The answers of attempts sent behind blocks ([`Locker::wait_then_acquire`]; none: no
    /// attempt rides behind a block), how long a block that is woken takes, and the state a
    /// stop during a block sets (to stop while blocked, when `stop_in_block`).
    behind: VecDeque<Option<Acquire>>,
    block_takes: Duration,
    stop_in_block: Option<Arc<Mutex<Blocked>>>,
}

impl FakeLocker {
    fn call(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
        self.clock.advance(self.latency);
    }
}

struct NoInterrupt;

impl Interrupt for NoInterrupt {
    fn interrupt(&self, _timeout: Duration) -> Result<(), Failure> {
        Ok(())
    }
}

impl Locker for FakeLocker {
    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        self.call(Call::Wait {
            at: self.clock.at(),
        });
        // Unless scripted, a release wakes the waiter at once.
        let woken = self.waits.pop_front().unwrap_or(Ok(true));
        if woken.is_err() {
            // A frozen server: given up a second after the pause, or as the wait ends.
            let now = *self.clock.now.lock().unwrap();
            let given_up = until.wait_ends.map_or(until.pause + ms(1000), |end| {
                end.min(until.pause + ms(1000))
            });
            self.clock.advance(given_up.saturating_since(now));
        }
        woken
    }

    fn wait_then_acquire(
        &mut self,
        until: Until,
        _ttl: Duration,
    ) -> (Result<bool, Failure>, Option<Acquire>) {
        let woken = self.wait(until);
        if woken.is_ok() {
            self.clock.advance(self.block_takes);
        }
        if let Some(waiting) = &self.stop_in_block {
            waiting.lock().unwrap().stopping = true;
        }
        (woken, self.behind.pop_front().flatten())
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        Box::new(NoInterrupt)
    }

    fn leave(&mut self, _busy: bool, _timeout: Duration) -> Result<(), Failure> {
        self.call(Call::Leave {
            at: self.clock.at(),
        });
        Ok(())
    }

    fn acquire(&mut self, _: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        self.call(Call::Acquire {
            at: self.clock.at(),
            timeout,
        });
        let answer = self.acquires.pop_front();
        self.last_failed = matches!(answer, Some(Err(_)));
        answer.unwrap_or(Ok(Acquire::Acquired { fence: 1 }))
    }

    fn unanswered(&self) -> bool {
        self.lost_replies && self.last_failed
    }

    fn extend(&mut self, _: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        self.call(Call::Extend {
            at: self.clock.at(),
            timeout,
        });
        self.extends.pop_front().unwrap_or(Ok(Renewal::Extended))
    }

    fn give_back_unacknowledged(
        &mut self,
        ended: Option<RunEnding>,
        _: Duration,
    ) -> Result<(), Failure> {
        self.call(Call::GiveBackUnacknowledged {
            at: self.clock.at(),
            ended: ended.map(|e| e.outcome),
        });
        Ok(())
    }

    fn release(&mut self, ended: RunEnding, _: Duration) -> Result<Held, Failure> {
        self.call(Call::Release {
            at: self.clock.at(),
            outcome: ended.outcome,
        });
        self.releases.pop_front().unwrap_or(Ok(Held::Ours))
    }
}

/// One run of the lease thread: its script, and what came of it.
struct Run {
    ttl: Duration,
    wait: Wait,
    latency: Duration,
    acquires: Vec<Result<Acquire, Failure>>,
    waits: Vec<Result<bool, Failure>>,
    extends: Vec<Result<Renewal, Failure>>,
    releases: Vec<Result<Held, Failure>>,
    messages: Vec<(u64, Stop)>,
    /// The supervisor asked to stop before the thread blocked in a wait (as `Lease::finish`
    /// records it for a blocked waiter).
    stopping: bool,
    /// `--splay`: how long the thread waits before its first attempt.
    splay: Duration,
    /// The failed acquires lost their replies ([`Locker::unanswered`]).
    lost_replies: bool,
    /// See [`FakeLocker`]'s fields of the same names.
    behind: Vec<Option<Acquire>>,
    block_takes: Duration,
    stop_in_block: bool,
}

impl Default for Run {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(3),
            wait: Wait::Up(Duration::ZERO),
            latency: Duration::ZERO,
            acquires: Vec::new(),
            waits: Vec::new(),
            extends: Vec::new(),
            releases: Vec::new(),
            messages: Vec::new(),
            stopping: false,
            splay: Duration::ZERO,
            lost_replies: false,
            behind: Vec::new(),
            block_takes: Duration::ZERO,
            stop_in_block: false,
        }
    }
}

/// What the thread reported (ms, the event as `{:?}`), and what it asked of the lock.
fn run(script: Run) -> (Vec<(u64, String)>, Vec<Call>) {
    let clock = FakeClock {
        now: Arc::new(Mutex::new(at(0))),
        messages: Arc::default(),
    };
    *clock.messages.lock().unwrap() = script
        .messages
        .iter()
        .map(|&(ms, stop)| (at(ms), stop))
        .collect();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let waiting = Arc::new(Mutex::new(Blocked {
        stopping: script.stopping,
        ..Blocked::default()
    }));
    let locker = FakeLocker {
        clock: clock.clone(),
        latency: script.latency,
        acquires: script.acquires.into(),
        waits: script.waits.into(),
        extends: script.extends.into(),
        releases: script.releases.into(),
        calls: Arc::clone(&calls),
        lost_replies: script.lost_replies,
        last_failed: false,
        behind: script.behind.into(),
        block_takes: script.block_takes,
        stop_in_block: script.stop_in_block.then(|| Arc::clone(&waiting)),
    };
    let reported = Arc::new(Mutex::new(Vec::new()));
    let (wait_log, hold_log) = (Arc::clone(&reported), Arc::clone(&reported));
    let (wait_clock, hold_clock) = (clock.clone(), clock.clone());
    let reports = Reports {
        wait: Box::new(move |event| {
            wait_log
                .lock()
                .unwrap()
                .push((wait_clock.at(), format!("{event:?}")))
        }),
        hold: Box::new(move |event| {
            hold_log
                .lock()
                .unwrap()
                .push((hold_clock.at(), format!("{event:?}")))
        }),
    };
    let (stop, inbox) = mpsc::channel();
    let mut worker = Worker {
        locker: Box::new(locker),
        ttl: script.ttl,
        inbox,
        waiting,
        clock,
        reports,
        stopped: None,
        behind: None,
    };
    worker.run(script.splay, script.wait);
    drop(stop);
    let reported = reported.lock().unwrap().clone();
    let calls = calls.lock().unwrap().clone();
    (reported, calls)
}

fn stop_at(ms: u64) -> (u64, Stop) {
    (
        ms,
        Stop::Stop {
            ended: RunEnding::of(Outcome::Exited(0), 75),
        },
    )
}

fn names(reported: &[(u64, String)]) -> Vec<(u64, &str)> {
    reported
        .iter()
        .map(|(at, event)| (*at, event.split([' ', '(']).next().unwrap_or("")))
        .collect()
}

fn unreachable() -> Failure {
    Failure::Unreachable("no answer from 127.0.0.1:6379 in time".into())
}

#[test]
fn a_busy_lock_is_waited_for_and_a_release_wakes_the_waiter() {
    let busy = || {
        Ok(Acquire::Busy {
            remaining: Some(ms(800)),
            queued: false,
        })
    };
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        latency: ms(2),
        acquires: vec![busy(), busy()],
        messages: vec![stop_at(100)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(10, "Acquired"), (102, "Released")]);
    assert_eq!(
        calls[..5],
        [
            Call::Acquire {
                at: 0,
                timeout: ms(1000)
            },
            Call::Wait { at: 2 },
            Call::Acquire {
                at: 4,
                timeout: ms(1000)
            },
            Call::Wait { at: 6 },
            Call::Acquire {
                at: 8,
                timeout: ms(1000)
            },
        ]
    );
}

#[test]
fn a_wait_that_runs_out_reports_busy_and_leaves_the_queue() {
    let (reported, calls) = run(Run {
        wait: Wait::Up(ms(0)),
        acquires: vec![Ok(Acquire::Busy {
            remaining: None,
            queued: true,
        })],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Busy")]);
    assert!(reported[0].1.contains("queued: true"));
    assert_eq!(calls.last(), Some(&Call::Leave { at: 0 }));
}

#[test]
fn an_unreachable_server_within_a_wait_is_retried_with_back_off() {
    let (reported, calls) = run(Run {
        wait: Wait::Up(Duration::from_secs(10)),
        acquires: vec![Err(unreachable()), Err(unreachable()), Err(unreachable())],
        messages: vec![stop_at(1000)],
        ..Run::default()
    });
    let events = names(&reported);
    assert_eq!(events.len(), 5, "{reported:?}");
    assert!(reported[0].1.contains("first: true") && reported[1].1.contains("first: false"));
    assert_eq!(events[3].1, "Acquired");
    // Back-off: 50-100 ms, then 100-200, then 200-400 (a random half of each).
    let attempts: Vec<u64> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Acquire { at, .. } => Some(*at),
            _ => None,
        })
        .collect();
    let gaps: Vec<u64> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps.len(), 3);
    for (gap, (low, high)) in gaps.iter().zip([(50, 100), (100, 200), (200, 400)]) {
        assert!((low..=high).contains(gap), "{gaps:?}");
    }
}

#[test]
fn a_block_that_gets_no_answer_ends_with_the_wait_in_a_warning_and_a_last_attempt() {
    let (reported, calls) = run(Run {
        ttl: Duration::from_secs(30),
        wait: Wait::Up(ms(1000)),
        acquires: vec![
            Ok(Acquire::Busy {
                remaining: Some(ms(30_000)),
                queued: false,
            }),
            Err(unreachable()),
        ],
        waits: vec![Err(unreachable())],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(1000, "Retrying"), (1000, "Failed")]);
    assert!(reported[0].1.contains("first: true"), "{reported:?}");
    assert_eq!(
        calls,
        [
            Call::Acquire {
                at: 0,
                timeout: ms(5000)
            },
            Call::Wait { at: 0 },
            Call::Acquire {
                at: 1000,
                timeout: schedule::MIN_ATTEMPT
            },
        ]
    );
}

#[test]
fn without_a_wait_an_unreachable_server_fails_at_once() {
    let (reported, calls) = run(Run {
        acquires: vec![Err(unreachable())],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Failed")]);
    assert_eq!(calls.len(), 1);
}

#[test]
fn a_refusal_is_never_waited_out() {
    let (reported, _) = run(Run {
        wait: Wait::Forever,
        acquires: vec![Err(Failure::Refused("WRONGPASS".into()))],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Failed")]);
}

#[test]
fn a_release_that_gets_no_answer_is_retried_for_two_seconds() {
    let (reported, calls) = run(Run {
        releases: (0..100).map(|_| Err(unreachable())).collect(),
        messages: vec![stop_at(10)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(0, "Acquired"), (1960, "Released")]);
    let releases = calls
        .iter()
        .filter(|c| matches!(c, Call::Release { .. }))
        .count();
    // Every 50 ms from 10 ms until less than 50 ms of the 2 s budget is left.
    assert_eq!(releases, 40);
}

#[test]
fn a_splay_comes_before_the_first_attempt_and_a_stop_ends_it() {
    let (reported, calls) = run(Run {
        splay: ms(700),
        messages: vec![stop_at(1500)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(700, "Acquired"), (1500, "Released")]);
    assert_eq!(
        calls.first(),
        Some(&Call::Acquire {
            at: 700,
            timeout: acquire_timeout(Duration::from_secs(3))
        })
    );
    // Stopped during the splay: no attempt at all, and the wait reported stopped.
    let (reported, calls) = run(Run {
        splay: ms(700),
        messages: vec![stop_at(300)],
        ..Run::default()
    });
    assert_eq!(names(&reported), [(300, "Stopped")]);
    assert!(calls.is_empty(), "{calls:?}");
}

mod behind;
mod endings;
mod renewals;
