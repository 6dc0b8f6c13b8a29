//! Transitions of the lease and of stop requests: renewals, the stop and kill lines, losing
//! the lock, `--max-runtime`, the grace, the next wake-up.

use nix::sys::signal::Signal::{SIGHUP, SIGKILL, SIGTERM};

use super::*;

#[test]
fn the_watchdog_is_told_the_kill_line_at_once() {
    let (_, actions) = Core::new(config(), at(0), at(0));
    assert_eq!(actions, [Action::Watch(at(KILL_LINE))]);
}

#[test]
fn a_forwarded_signal_goes_to_the_group_and_nothing_more() {
    let (actions, core) = when(given(&[]), 10, Input::Forward(sig(SIGHUP)));
    assert_eq!(
        actions,
        [note(Note::Forwarded(sig(SIGHUP))), signal(SIGHUP)]
    );
    assert_eq!(core.stopping(), None);
}

#[test]
fn a_stop_request_sends_the_stop_signal_and_plans_sigkill_after_the_grace() {
    let (actions, core) = when(given(&[]), 100, Input::StopRequest(sig(SIGTERM)));
    assert_eq!(
        actions,
        [note(Note::StopRequested(sig(SIGTERM))), signal(SIGTERM)]
    );
    assert_eq!(core.wake_at(at(100)), at(100) + ADOPT_POLL);
    assert_eq!(core.stopping, Stopping::Signalled { kill_at: at(1100) });
}

#[test]
fn the_same_stop_request_within_half_a_second_is_one_request() {
    let core = given(&[(100, Input::StopRequest(sig(SIGTERM)))]);
    let (actions, _) = when(core, 599, Input::StopRequest(sig(SIGTERM)));
    assert_eq!(actions, [note(Note::StopRepeated(sig(SIGTERM)))]);
}

#[test]
fn a_later_second_stop_request_kills_at_once() {
    let core = given(&[(100, Input::StopRequest(sig(SIGTERM)))]);
    let (actions, core) = when(core, 600, Input::StopRequest(sig(SIGTERM)));
    assert_eq!(
        actions,
        [
            note(Note::Killed(KillReason::SecondRequest(sig(SIGTERM)))),
            Action::Kill
        ]
    );
    assert_eq!(core.stopping(), Some(true));
}

#[test]
fn sigkill_follows_when_the_grace_runs_out() {
    let core = given(&[(100, Input::StopRequest(sig(SIGTERM)))]);
    let (early, core) = when(core, 1099, Input::Tick);
    assert_eq!(early, []);
    let (actions, _) = when(core, 1100, Input::Tick);
    assert_eq!(
        actions,
        [note(Note::Killed(KillReason::GraceRanOut)), Action::Kill]
    );
}

#[test]
fn a_kill_stop_signal_is_a_reported_sigkill() {
    let config = Config {
        stop_signal: sig(SIGKILL),
        ..config()
    };
    let (actions, _) = when(
        given_with(config, &[]),
        10,
        Input::StopRequest(sig(SIGTERM)),
    );
    assert_eq!(
        actions,
        [
            note(Note::StopRequested(sig(SIGTERM))),
            note(Note::Killed(KillReason::StopSignalIsKill)),
            Action::Kill
        ]
    );
}

#[test]
fn a_renewal_moves_the_kill_line_and_tells_the_watchdog() {
    let (actions, core) = when(given(&[]), 1005, Input::Renewed { sent: at(1000) });
    assert_eq!(
        actions,
        [
            note(Note::Renewed { renewals: 1 }),
            Action::Watch(at(KILL_LINE + 1000))
        ]
    );
    assert_eq!(core.kill_line(), at(KILL_LINE + 1000));
}

#[test]
fn the_first_failed_renewal_is_a_warning_the_next_ones_are_not() {
    let (first, core) = when(given(&[]), 1000, Input::RenewFailed("no answer".into()));
    assert_eq!(
        first,
        [note(Note::RenewFailed {
            error: "no answer".into(),
            first: true
        })]
    );
    let (second, core) = when(core, 1150, Input::RenewFailed("no answer".into()));
    assert_eq!(
        second,
        [note(Note::RenewFailed {
            error: "no answer".into(),
            first: false
        })]
    );
    // The lease still ends where the acquire put it.
    assert_eq!(core.kill_line(), at(KILL_LINE));
}

/// Once the lease is lost, the renewals that still fail (the lease thread goes on until the
/// release) are no news: never a warning again, however many (a hostile run showed 33 lines).
#[test]
fn failed_renewals_after_the_lease_is_lost_warn_no_more() {
    let (_, core) = when(given(&[]), STOP_LINE, Input::Tick);
    for (ms, input) in [
        (STOP_LINE + 10, Input::RenewFailed("no answer".into())),
        (STOP_LINE + 20, Input::Unacknowledged("0 of 1".into())),
    ] {
        let (actions, _) = when(core.clone(), ms, input);
        assert!(
            actions.iter().all(|a| !matches!(
                a,
                Action::Note(
                    Note::RenewFailed { first: true, .. }
                        | Note::Unacknowledged { first: true, .. }
                )
            )),
            "{actions:?}"
        );
    }
}

#[test]
fn a_renewal_after_failures_says_renewing_works_again() {
    let core = given(&[(1000, Input::RenewFailed("no answer".into()))]);
    let (actions, _) = when(core, 1200, Input::Renewed { sent: at(1150) });
    assert_eq!(
        actions,
        [
            note(Note::Renewed { renewals: 1 }),
            note(Note::RenewRecovered),
            Action::Watch(at(KILL_LINE + 1150))
        ]
    );
}

#[test]
fn unacknowledged_renewals_warn_once_and_do_not_move_the_kill_line() {
    let (first, core) = when(given(&[]), 1000, Input::Unacknowledged("0 of 1".into()));
    assert_eq!(
        first,
        [note(Note::Unacknowledged {
            why: "0 of 1".into(),
            first: true
        })]
    );
    // A failure in between does not make the replicas' story a new one.
    let core = {
        let mut core = core;
        core.step(Input::RenewFailed("no answer".into()), at(1150));
        core
    };
    let (again, core) = when(core, 1300, Input::Unacknowledged("0 of 1".into()));
    assert_eq!(
        again,
        [note(Note::Unacknowledged {
            why: "0 of 1".into(),
            first: false
        })]
    );
    assert_eq!(core.kill_line(), at(KILL_LINE));
}

#[test]
fn no_renewal_by_the_stop_line_gives_the_lease_up() {
    let (early, core) = when(given(&[]), STOP_LINE - 1, Input::Tick);
    assert_eq!(early, []);
    let (actions, core) = when(core, STOP_LINE, Input::Tick);
    assert_eq!(
        actions,
        [
            note(Note::LockLost(LostWhy::RunningLow {
                unacknowledged: false
            })),
            signal(SIGTERM)
        ]
    );
    // SIGKILL after the grace, which ends exactly at the kill line here.
    assert_eq!(
        core.stopping,
        Stopping::Signalled {
            kill_at: at(KILL_LINE)
        }
    );
    assert_eq!(core.wake_at(at(STOP_LINE)), at(STOP_LINE) + ADOPT_POLL);
}

#[test]
fn replicas_that_stopped_acknowledging_are_named_when_the_lease_is_given_up() {
    let core = given(&[(1000, Input::Unacknowledged("0 of 1".into()))]);
    let (actions, _) = when(core, STOP_LINE, Input::Tick);
    assert_eq!(
        actions[0],
        note(Note::LockLost(LostWhy::RunningLow {
            unacknowledged: true
        }))
    );
}

#[test]
fn the_kill_line_kills_the_group() {
    let core = given(&[(STOP_LINE, Input::Tick)]);
    let (actions, core) = when(core, KILL_LINE, Input::Tick);
    assert_eq!(
        actions,
        [note(Note::Killed(KillReason::LeaseRanOut)), Action::Kill]
    );
    assert_eq!(core.stopping(), Some(true));
}

#[test]
fn a_suspend_past_the_lease_is_seen_as_the_kill_line_passed() {
    // The machine slept through the stop line and the kill line: on resume, the first step
    // (whatever its input) gives the lease up and kills, in one go.
    let (actions, core) = when(given(&[]), 60_000, Input::Tick);
    assert_eq!(
        actions,
        [
            note(Note::LockLost(LostWhy::RanOut)),
            signal(SIGTERM),
            note(Note::Killed(KillReason::LeaseRanOut)),
            Action::Kill
        ]
    );
    let core = {
        let mut core = core;
        core.step(Input::Exited(killed_by(SIGKILL)), at(60_001));
        core.step(Input::Group { alive: false }, at(60_002));
        core
    };
    assert_eq!(core.ended(at(60_002)).unwrap().outcome, Outcome::LockLost);
}

#[test]
fn a_key_found_gone_stops_the_command_with_the_lease_grace() {
    let (actions, core) = when(given(&[]), 1000, Input::Lost(Held::Gone));
    assert_eq!(
        actions,
        [note(Note::LockLost(LostWhy::Gone)), signal(SIGTERM)]
    );
    // --kill-after is 1 s, but after a lost lease the grace is a quarter of the ttl.
    assert_eq!(core.stopping, Stopping::Signalled { kill_at: at(1750) });
}

#[test]
fn a_key_found_taken_stops_the_command_too() {
    let (actions, _) = when(given(&[]), 1000, Input::Lost(Held::Theirs));
    assert_eq!(
        actions,
        [note(Note::LockLost(LostWhy::Theirs)), signal(SIGTERM)]
    );
}

#[test]
fn a_lost_lease_near_its_end_is_killed_at_the_kill_line_not_after_the_grace() {
    let (_, core) = when(given(&[]), 2500, Input::Lost(Held::Gone));
    assert_eq!(
        core.stopping,
        Stopping::Signalled {
            kill_at: at(KILL_LINE)
        }
    );
}

#[test]
fn a_renewal_after_the_lease_was_given_up_changes_nothing() {
    let core = given(&[(1000, Input::Lost(Held::Gone))]);
    let (actions, core) = when(core, 1100, Input::Renewed { sent: at(1050) });
    assert_eq!(actions, [note(Note::Renewed { renewals: 1 })]);
    assert_eq!(core.kill_line(), at(KILL_LINE));
}

#[test]
fn max_runtime_stops_the_command_and_ends_in_124() {
    let config = Config {
        max_runtime: Some(Duration::from_millis(500)),
        ..config()
    };
    let core = given_with(config, &[]);
    assert_eq!(core.wake_at(at(0)), at(500));
    let (actions, core) = when(core, 500, Input::Tick);
    assert_eq!(actions, [note(Note::MaxRuntime), signal(SIGTERM)]);
    let core = {
        let mut core = core;
        core.step(Input::Exited(killed_by(SIGTERM)), at(510));
        core.step(Input::Group { alive: false }, at(511));
        core
    };
    assert_eq!(core.ended(at(511)).unwrap().outcome, Outcome::MaxRuntime);
}

#[test]
fn a_lost_lease_wins_over_max_runtime() {
    let config = Config {
        max_runtime: Some(Duration::from_millis(1500)),
        ..config()
    };
    let core = given_with(config, &[(1000, Input::Lost(Held::Gone))]);
    let (actions, core) = when(core, 1500, Input::Tick);
    assert_eq!(actions, []);
    let core = {
        let mut core = core;
        core.step(Input::Exited(exited(0)), at(1510));
        core.step(Input::Group { alive: false }, at(1511));
        core
    };
    assert_eq!(core.ended(at(1511)).unwrap().outcome, Outcome::LockLost);
}

#[test]
fn a_lease_thread_that_ends_unasked_loses_the_lease() {
    let (actions, core) = when(given(&[]), 100, Input::LeaseEnded);
    assert_eq!(
        actions,
        [
            note(Note::LeaseEnded),
            note(Note::LockLost(LostWhy::LeaseEnded)),
            signal(SIGTERM)
        ]
    );
    let (_, core) = when(core, 200, Input::Exited(killed_by(SIGTERM)));
    let (_, core) = when(core, 201, Input::Group { alive: false });
    assert_eq!(core.ended(at(201)).unwrap().outcome, Outcome::LockLost);
}

#[test]
fn the_next_wake_up_is_the_nearest_line() {
    let core = given(&[]);
    assert_eq!(core.wake_at(at(0)), at(STOP_LINE));
    let core = given(&[(STOP_LINE, Input::Tick)]);
    assert_eq!(core.wake_at(at(KILL_LINE - 1)), at(KILL_LINE));
    let core = given(&[(KILL_LINE, Input::Tick)]);
    // Killed: only the group's end (and the one second it gets) is awaited.
    assert_eq!(core.wake_at(at(KILL_LINE)), at(KILL_LINE) + ADOPT_POLL);
    let (core, _) = Core::new(
        Config {
            ttl: Duration::from_secs(3600),
            ..config()
        },
        at(0),
        at(0),
    );
    assert_eq!(core.wake_at(at(0)), at(0) + IDLE_WAKE);
}

#[test]
fn the_lease_grace_is_the_shorter_of_kill_after_and_a_quarter_of_the_ttl() {
    let s = Duration::from_secs;
    assert_eq!(lease_grace(s(4), s(5)), s(1));
    assert_eq!(lease_grace(s(40), s(5)), s(5));
    assert_eq!(lease_grace(s(30), Duration::ZERO), Duration::ZERO);
}

#[test]
fn nothing_heard_any_more_is_an_internal_error_unless_the_lease_was_lost() {
    assert_eq!(given(&[]).abandoned().outcome, Outcome::Internal);
    assert_eq!(
        given(&[(100, Input::Lost(Held::Gone))]).abandoned().outcome,
        Outcome::LockLost
    );
}

#[test]
fn a_renewal_sent_before_the_last_one_never_moves_the_kill_line_back() {
    let core = given(&[(1005, Input::Renewed { sent: at(1000) })]);
    let (actions, core) = when(core, 1010, Input::Renewed { sent: at(500) });
    assert_eq!(
        actions,
        [
            note(Note::Renewed { renewals: 2 }),
            Action::Watch(at(KILL_LINE + 1000))
        ]
    );
    assert_eq!(core.kill_line(), at(KILL_LINE + 1000));
}
