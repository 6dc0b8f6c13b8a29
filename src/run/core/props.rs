//! The promise, as a property of the core over random histories: renewals that work, fail, are
//! not acknowledged or find the lock gone; signals; stops and continues; the command ending; the
//! watchdog dying; and the clock jumping forward, suspends longer than the lease included.
//! After every step:
//!
//! 1. at or past the kill line, the command's group is killed (unless it is gone already);
//! 2. no action lets the command run again at or past the kill line;
//! 3. every SIGKILL is reported, with its reason;
//! 4. the watchdog was never told a later kill line than the core's;
//! 5. the core never plans to sleep past the kill line;
//!
//! and at the end, a lease that was or may have been lost (a renewal found it lost, the lease
//! thread or the watchdog died, or the kill line was reached with the command not done) ends
//! in 76.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal::{SIGHUP, SIGINT, SIGKILL, SIGSTOP, SIGTERM, SIGTSTP};
use proptest::prelude::*;

use super::tests::{at, config};
use super::*;

/// One thing that happens to a run, after `advance` ms (a suspend: many seconds).
#[derive(Debug, Clone)]
enum Happening {
    Renewed { lag: u64 },
    RenewFailed,
    Unacknowledged,
    Lost { gone: bool },
    StopRequest,
    Forward,
    JobStop,
    Continued,
    Exited { code: Option<i32> },
    Group { alive: bool },
    Paused,
    LostTrack,
    LeaseEnded,
    WatchdogDied,
    WatchdogStopped,
    Tick,
}

fn happening() -> impl Strategy<Value = Happening> {
    prop_oneof![
        6 => (0u64..300).prop_map(|lag| Happening::Renewed { lag }),
        2 => Just(Happening::RenewFailed),
        1 => Just(Happening::Unacknowledged),
        1 => any::<bool>().prop_map(|gone| Happening::Lost { gone }),
        1 => Just(Happening::StopRequest),
        1 => Just(Happening::Forward),
        1 => Just(Happening::JobStop),
        1 => Just(Happening::Continued),
        1 => proptest::option::of(0i32..3).prop_map(|code| Happening::Exited { code }),
        2 => any::<bool>().prop_map(|alive| Happening::Group { alive }),
        1 => Just(Happening::Paused),
        1 => Just(Happening::LostTrack),
        1 => Just(Happening::LeaseEnded),
        1 => Just(Happening::WatchdogDied),
        1 => Just(Happening::WatchdogStopped),
        4 => Just(Happening::Tick),
    ]
}

/// Time between two happenings: mostly short, sometimes a long pause, sometimes a suspend
/// longer than the whole lease.
fn advance() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..400,
        2 => 400u64..3000,
        1 => 5_000u64..120_000,
    ]
}

fn input(happening: &Happening, now: Moment) -> Input {
    let ms = Duration::from_millis;
    match *happening {
        Happening::Renewed { lag } => Input::Renewed {
            sent: now - ms(lag),
        },
        Happening::RenewFailed => Input::RenewFailed("no answer".into()),
        Happening::Unacknowledged => Input::Unacknowledged("0 of 1".into()),
        Happening::Lost { gone: true } => Input::Lost(Held::Gone),
        Happening::Lost { gone: false } => Input::Lost(Held::Theirs),
        Happening::StopRequest => Input::StopRequest(SIGTERM.into()),
        Happening::Forward => Input::Forward(SIGHUP.into()),
        Happening::JobStop => Input::JobStop(SIGTSTP.into()),
        Happening::Continued => Input::Continued,
        Happening::Exited { code: Some(code) } => Input::Exited(ExitStatus::from_raw(code << 8)),
        Happening::Exited { code: None } => Input::Exited(ExitStatus::from_raw(SIGINT as i32)),
        Happening::Group { alive } => Input::Group { alive },
        Happening::Paused => Input::Paused(SIGSTOP.into()),
        Happening::LostTrack => Input::LostTrack("EINVAL".into()),
        Happening::LeaseEnded => Input::LeaseEnded,
        Happening::WatchdogDied => Input::WatchdogDied("was killed by SIGKILL".into()),
        Happening::WatchdogStopped => Input::WatchdogStopped(SIGSTOP.into()),
        Happening::Tick => Input::Tick,
    }
}

/// What a run's checker remembers between steps.
struct Checker {
    last_watch: Moment,
    may_have_lost: bool,
}

impl Checker {
    /// Check one step's `actions` at `now`, and the core after it.
    fn check(&mut self, core: &Core, actions: &[Action], now: Moment) -> Result<(), TestCaseError> {
        let done = core.ended(now).is_some();
        let past = now >= core.kill_line();
        for (i, action) in actions.iter().enumerate() {
            match action {
                Action::Watch(line) => self.last_watch = *line,
                Action::Continue => {
                    prop_assert!(!past, "continued at {now:?}, past the kill line");
                }
                Action::Kill => prop_assert!(
                    i > 0
                        && matches!(&actions[i - 1], Action::Note(Note::Killed(reason))
                            if *reason != KillReason::Watchdog),
                    "an unreported SIGKILL: {actions:?}"
                ),
                Action::Note(Note::Killed(reason)) if *reason != KillReason::Watchdog => {
                    prop_assert_eq!(actions.get(i + 1), Some(&Action::Kill));
                }
                _ => {}
            }
        }
        if past && !done {
            self.may_have_lost = true;
            prop_assert_eq!(
                core.stopping(),
                Some(true),
                "the command may run at {:?}, past the kill line {:?}",
                now,
                core.kill_line()
            );
        }
        prop_assert!(
            self.last_watch <= core.kill_line(),
            "the watchdog waits for {:?}, past the kill line {:?}",
            self.last_watch,
            core.kill_line()
        );
        if core.stopping() != Some(true) && !done {
            prop_assert!(
                core.wake_at(now) <= core.kill_line(),
                "plans to sleep past the kill line"
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_command_never_runs_past_the_kill_line(
        history in proptest::collection::vec((advance(), happening()), 0..40),
        max_runtime in proptest::option::of(0u64..5000),
        kill_stop_signal in proptest::bool::weighted(0.1),
    ) {
        let config = Config {
            max_runtime: max_runtime.map(Duration::from_millis),
            stop_signal: if kill_stop_signal { SIGKILL.into() } else { SIGTERM.into() },
            ..config()
        };
        let (mut core, first) = Core::new(config, at(0), at(0));
        let mut checker = Checker { last_watch: at(0), may_have_lost: false };
        checker.check(&core, &first, at(0))?;
        let mut now = at(0);
        for (advance, happening) in &history {
            now = now + Duration::from_millis(*advance);
            let mut inputs = std::collections::VecDeque::from([input(happening, now)]);
            while let Some(input) = inputs.pop_front() {
                match &input {
                    Input::Lost(_) | Input::LeaseEnded | Input::WatchdogFailed { .. } => {
                        checker.may_have_lost = true;
                    }
                    _ => {}
                }
                let actions = core.step(input, now);
                for action in &actions {
                    // The executor answers a restart at once, as it does: one in three fails.
                    if let Action::RestartWatchdog(how) = action {
                        inputs.push_back(if advance % 3 == 0 {
                            Input::WatchdogFailed { how: how.clone(), error: "EAGAIN".into() }
                        } else {
                            Input::WatchdogRestarted { how: how.clone(), pid: 7 }
                        });
                    }
                }
                checker.check(&core, &actions, now)?;
            }
            if core.ended(now).is_some() {
                break;
            }
        }
        // The command ends at last and its group goes: how did the run end?
        for input in [Input::Exited(ExitStatus::from_raw(0)), Input::Group { alive: false }] {
            if core.ended(now).is_none() {
                now = now + Duration::from_millis(1);
                let actions = core.step(input, now);
                checker.check(&core, &actions, now)?;
            }
        }
        let ended = core.ended(now).or_else(|| core.ended(now + REAP_WAIT * 2));
        let ended = ended.expect("a command that exited with its group gone has ended");
        if checker.may_have_lost {
            prop_assert_eq!(ended.outcome, Outcome::LockLost, "{:?}", history);
        }
    }
}
