//! Transitions of the command and the watchdog: job control, the command's end and what it
//! left behind, losing track of it, the watchdog killed or stopped.

use nix::sys::signal::Signal::{SIGCONT, SIGKILL, SIGSTOP, SIGTERM, SIGTSTP};

use super::*;

#[test]
fn job_control_stops_the_group_then_redlock() {
    let (actions, _) = when(given(&[]), 100, Input::JobStop(sig(SIGTSTP)));
    assert_eq!(
        actions,
        [
            note(Note::Suspended(sig(SIGTSTP))),
            Action::Suspend(sig(SIGTSTP))
        ]
    );
}

#[test]
fn continued_in_time_renews_at_once_and_continues_the_command() {
    let core = given(&[(100, Input::JobStop(sig(SIGTSTP)))]);
    let (actions, _) = when(core, 1000, Input::Continued);
    assert_eq!(
        actions,
        [Action::RenewNow, note(Note::Continued), Action::Continue]
    );
}

#[test]
fn continued_past_the_kill_line_kills_without_continuing() {
    let core = given(&[(100, Input::JobStop(sig(SIGTSTP)))]);
    let (actions, _) = when(core, 5000, Input::Continued);
    assert_eq!(
        actions,
        [
            note(Note::LockLost(LostWhy::RanOutWhileStopped)),
            signal(SIGTERM),
            note(Note::Killed(KillReason::LeaseRanOutWhileStopped)),
            Action::Kill
        ]
    );
    assert!(!actions.contains(&Action::Continue));
}

/// Continued past the stop line but before the kill line (ttl 3 s: stopped at 0.3 s, continued
/// at 2.5 s, a hostile run's case that exited 76 with the lease still good): the command stays
/// stopped until the renewal asked for at once extends the lease, then runs on.
#[test]
fn continued_with_the_lease_running_low_continues_the_command_once_renewed() {
    let core = given(&[(100, Input::JobStop(sig(SIGTSTP)))]);
    let (actions, core) = when(core, STOP_LINE + 100, Input::Continued);
    assert_eq!(
        actions,
        [Action::RenewNow, note(Note::ContinuedUntilRenewed)]
    );
    // Past the stop line, still stopped, nothing is given up meanwhile.
    let (actions, core) = when(core, STOP_LINE + 200, Input::Tick);
    assert_eq!(actions, []);
    let sent = STOP_LINE + 100;
    let (actions, _) = when(core, STOP_LINE + 250, Input::Renewed { sent: at(sent) });
    assert_eq!(
        actions,
        [
            note(Note::Renewed { renewals: 1 }),
            Action::Watch(at(KILL_LINE + sent)),
            note(Note::Continued),
            Action::Continue
        ]
    );
}

/// The same, with no renewal by the kill line: killed there, never continued.
#[test]
fn continued_with_the_lease_running_low_and_no_renewal_is_killed_stopped() {
    let core = given(&[
        (100, Input::JobStop(sig(SIGTSTP))),
        (STOP_LINE + 100, Input::Continued),
        (STOP_LINE + 300, Input::RenewFailed("no answer".into())),
    ]);
    let (actions, core) = when(core, KILL_LINE, Input::Tick);
    assert_eq!(
        actions,
        [
            note(Note::LockLost(LostWhy::RanOut)),
            signal(SIGTERM),
            note(Note::Killed(KillReason::LeaseRanOut)),
            Action::Kill
        ]
    );
    let (actions, _) = when(
        core,
        KILL_LINE + 10,
        Input::Renewed {
            sent: at(KILL_LINE),
        },
    );
    assert!(!actions.contains(&Action::Continue), "{actions:?}");
}

#[test]
fn continued_after_someones_sigstop_renews_and_continues_nothing() {
    let (actions, _) = when(given(&[]), 1000, Input::Continued);
    assert_eq!(actions, [Action::RenewNow]);
}

#[test]
fn someones_sigstop_of_the_command_is_left_alone() {
    let (actions, _) = when(given(&[]), 1000, Input::Paused(sig(SIGSTOP)));
    assert_eq!(actions, []);
}

#[test]
fn job_control_once_the_command_exited_stops_redlock_alone() {
    let core = given(&[(100, Input::Exited(exited(0)))]);
    let (actions, _) = when(core, 101, Input::JobStop(sig(SIGTSTP)));
    assert_eq!(actions, [Action::StopSelf(sig(SIGTSTP))]);
}

#[test]
fn a_command_that_exited_with_nothing_left_keeps_its_status() {
    let (actions, core) = when(given(&[]), 100, Input::Exited(exited(3)));
    assert_eq!(actions, []);
    assert!(core.watching_group());
    assert_eq!(core.wake_at(at(100)), at(100) + GROUP_POLL);
    assert_eq!(
        core.ended(at(100)),
        None,
        "not before the group was looked at"
    );
    let (actions, core) = when(core, 110, Input::Group { alive: false });
    assert_eq!(actions, []);
    let ended = core.ended(at(110)).unwrap();
    assert_eq!(ended.outcome, Outcome::Exited(3));
    assert!(!ended.signaled);
}

#[test]
fn a_command_that_left_processes_behind_has_them_stopped() {
    let core = given(&[(100, Input::Exited(exited(0)))]);
    let (actions, core) = when(core, 110, Input::Group { alive: true });
    assert_eq!(actions, [note(Note::Leftovers), signal(SIGTERM)]);
    let (actions, core) = when(core, 1110, Input::Group { alive: true });
    assert_eq!(
        actions,
        [note(Note::Killed(KillReason::GraceRanOut)), Action::Kill]
    );
    assert_eq!(core.ended(at(1110)), None);
    // Gone at last: the command's own status stands.
    let (_, core) = when(core, 1120, Input::Group { alive: false });
    assert_eq!(core.ended(at(1120)).unwrap().outcome, Outcome::Exited(0));
}

#[test]
fn a_group_that_will_not_go_is_given_up_on_a_second_after_sigkill() {
    let core = given(&[
        (100, Input::Exited(exited(0))),
        (110, Input::Group { alive: true }),
        (1110, Input::Group { alive: true }),
    ]);
    assert_eq!(core.ended(at(2110)), None);
    assert!(core.ended(at(2111)).is_some());
}

#[test]
fn leftovers_alive_at_the_kill_line_lose_the_lease() {
    let core = given(&[
        (100, Input::Exited(exited(0))),
        (110, Input::Group { alive: true }),
    ]);
    let (actions, core) = when(core, 1000, Input::Renewed { sent: at(990) });
    assert_eq!(actions, [note(Note::Renewed { renewals: 1 })]);
    // The command is gone: the watchdog is not told (it watches the command's group only
    // while it runs), but the kill line moved with the renewal.
    let (actions, _) = when(core, KILL_LINE + 990, Input::Group { alive: true });
    assert_eq!(
        actions,
        [note(Note::Killed(KillReason::LeaseRanOut)), Action::Kill]
    );
}

#[test]
fn a_command_seen_to_end_past_the_kill_line_ends_in_76() {
    // redlock was frozen; the watchdog killed the command; redlock sees it on waking.
    let (actions, core) = when(given(&[]), 5000, Input::Exited(killed_by(SIGKILL)));
    assert_eq!(
        actions,
        [
            note(Note::Killed(KillReason::Watchdog)),
            note(Note::LockLost(LostWhy::RanOutBeforeSeen)),
            // For what it may have left behind.
            note(Note::Killed(KillReason::LeaseRanOut)),
            Action::Kill
        ]
    );
    let (_, core) = when(core, 5001, Input::Group { alive: false });
    let ended = core.ended(at(5001)).unwrap();
    assert_eq!(ended.outcome, Outcome::LockLost);
    assert!(ended.signaled);
}

#[test]
fn losing_track_of_the_command_kills_it_and_ends_as_an_internal_error() {
    let (actions, core) = when(given(&[]), 100, Input::LostTrack("EINVAL".into()));
    assert_eq!(
        actions,
        [
            note(Note::LostTrack("EINVAL".into())),
            note(Note::Killed(KillReason::LostTrack)),
            Action::Kill
        ]
    );
    let (_, core) = when(core, 200, Input::Exited(killed_by(SIGKILL)));
    let (_, core) = when(core, 201, Input::Group { alive: false });
    assert_eq!(core.ended(at(201)).unwrap().outcome, Outcome::Internal);
}

#[test]
fn a_killed_watchdog_is_replaced_and_told_the_kill_line() {
    let (actions, core) = when(given(&[]), 100, Input::WatchdogDied("was killed".into()));
    assert_eq!(actions, [Action::RestartWatchdog("was killed".into())]);
    let (actions, _) = when(
        core,
        101,
        Input::WatchdogRestarted {
            how: "was killed".into(),
            pid: 42,
        },
    );
    assert_eq!(
        actions,
        // The new watchdog has its orders before redlock says it started.
        [
            Action::Watch(at(KILL_LINE)),
            note(Note::WatchdogRestarted {
                how: "was killed".into(),
                pid: 42
            })
        ]
    );
}

#[test]
fn without_a_watchdog_the_command_is_stopped_as_for_a_lost_lease() {
    let (actions, _) = when(
        given(&[]),
        101,
        Input::WatchdogFailed {
            how: "was killed".into(),
            error: "EAGAIN".into(),
        },
    );
    assert_eq!(
        actions,
        [
            note(Note::WatchdogFailed {
                how: "was killed".into(),
                error: "EAGAIN".into()
            }),
            note(Note::LockLost(LostWhy::NoWatchdog)),
            signal(SIGTERM)
        ]
    );
}

#[test]
fn a_stopped_watchdog_is_only_reported() {
    let (actions, _) = when(given(&[]), 100, Input::WatchdogStopped(sig(SIGSTOP)));
    assert_eq!(actions, [note(Note::WatchdogStopped(sig(SIGSTOP)))]);
}

#[test]
fn a_command_that_exits_in_time_keeps_its_status_even_at_the_kill_line() {
    // It exited and its group went in time; the kill line passing at the same step is moot.
    let core = given(&[(100, Input::Exited(exited(0)))]);
    let (actions, core) = when(core, KILL_LINE, Input::Group { alive: false });
    assert_eq!(actions, []);
    assert_eq!(
        core.ended(at(KILL_LINE)).unwrap().outcome,
        Outcome::Exited(0)
    );
}

#[test]
fn a_suspended_command_killed_at_the_kill_line_is_not_continued_after() {
    let core = given(&[(0, Input::JobStop(sig(SIGTSTP))), (KILL_LINE, Input::Tick)]);
    let (actions, _) = when(core, KILL_LINE + 1, Input::Continued);
    assert_eq!(actions, []);
    let core = given(&[
        (0, Input::JobStop(sig(SIGTSTP))),
        (100, Input::StopRequest(sig(SIGTERM))),
        (700, Input::StopRequest(sig(SIGTERM))),
    ]);
    let (actions, _) = when(core, 800, Input::Continued);
    assert_eq!(actions, [], "killed already: nothing to continue");
}

#[test]
fn sigcont_is_what_continue_sends() {
    // The executor's Continue sends SIGCONT; the core's own signals are the stop signal and
    // the forwarded ones: SIGCONT is never among them on its own.
    let core = given(&[(100, Input::JobStop(sig(SIGTSTP)))]);
    let (actions, _) = when(core, 200, Input::Continued);
    assert!(!actions.contains(&signal(SIGCONT)));
}

/// A job asked to end (a stop request, or TERM, INT, HUP or QUIT forwarded while it ran) was
/// cut short, whatever it exits with; one that only got a USR1, or a TERM once it had ended,
/// was not.
#[test]
fn a_job_asked_to_end_was_cut_short_whatever_its_status() {
    use nix::sys::signal::Signal::{SIGHUP, SIGINT, SIGQUIT, SIGUSR1};
    let ended = |inputs: &[(u64, Input)]| {
        let mut all = inputs.to_vec();
        all.push((500, Input::Exited(exited(0))));
        all.push((510, Input::Group { alive: false }));
        let core = given(&all);
        core.ended(at(510)).unwrap()
    };
    for asked in [
        Input::StopRequest(sig(SIGTERM)),
        Input::Forward(sig(SIGTERM)),
        Input::Forward(sig(SIGINT)),
        Input::Forward(sig(SIGHUP)),
        Input::Forward(sig(SIGQUIT)),
    ] {
        let ended = ended(&[(100, asked.clone())]);
        assert!(ended.cut_short, "{asked:?}");
        assert_eq!(ended.outcome, Outcome::Exited(0), "its status is kept");
    }
    assert!(!ended(&[(100, Input::Forward(sig(SIGUSR1)))]).cut_short);
    assert!(!ended(&[]).cut_short);
    let core = given(&[(100, Input::Exited(exited(0)))]);
    let (_, core) = when(core, 105, Input::Forward(sig(SIGTERM)));
    let (_, core) = when(core, 110, Input::Group { alive: false });
    assert!(!core.ended(at(110)).unwrap().cut_short);
}
