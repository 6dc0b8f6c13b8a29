//! What the supervisor says: each [`Note`] of the decision core as one line (or one JSON
//! event), at its level. The words live here, the decisions in `core`.

use crate::lock::Kind;
use crate::report;
use crate::run::Options;
use crate::run::core::{KillReason, LostWhy, Note};

/// Say `note` about the run of `options`.
pub(crate) fn say(note: &Note, options: &Options) {
    let key = &options.key;
    match note {
        Note::StopRequested(signal) => report!(
            1,
            StopRequested { "signal" => signal.to_string() },
            "{signal} received; sending {} to the command, SIGKILL after {}",
            options.stop_signal.as_str(),
            report::duration(options.kill_after)
        ),
        Note::StopRepeated(signal) => report!(
            2,
            StopRepeated { "signal" => signal.to_string() },
            "{signal} again within {}: the same stop request",
            report::duration(crate::run::core::SAME_REQUEST)
        ),
        Note::Forwarded(signal) => report!(
            1,
            SignalForwarded { "signal" => signal.to_string() },
            "forwarding {signal} to the command"
        ),
        Note::Suspended(signal) => report!(
            1,
            Suspended { "signal" => signal.to_string() },
            "{signal}: stopped the command, stopping redlock (the lease is not renewed \
             meanwhile; if it runs out, the command is killed)"
        ),
        Note::Continued => report!(1, Continued {}, "continued; continuing the command"),
        Note::ContinuedUntilRenewed => report!(
            1,
            ContinuedUntilRenewed {},
            "continued with the lease running low; the command stays stopped until it is renewed"
        ),
        Note::LockLost(why) => {
            report::error_event(report::Event::LockLost, lost(*why, key, options.kind))
        }
        Note::Killed(reason) => killed(*reason),
        Note::MaxRuntime => report!(
            0,
            MaxRuntime {},
            "the command ran past --max-runtime; stopping it"
        ),
        Note::Leftovers => report!(
            1,
            Leftovers {},
            "the command left processes behind (in its group, or double-forked out of it); \
             stopping them"
        ),
        Note::Renewed { renewals } => {
            report!(2, Renewed { "renewals" => *renewals }, "renewed lock '{key}'")
        }
        Note::RenewRecovered => {
            report!(0, RenewRecovered {}, "renewing lock '{key}' works again")
        }
        Note::RenewFailed { error, first } => report!(
            if *first { 0 } else { 2 },
            RenewFailed { "error" => error.as_str() },
            "warning: renewing lock '{key}' failed ({error}); retrying"
        ),
        Note::Unacknowledged { why, first } => unacknowledged(key, why, *first),
        Note::LostTrack(error) => report::error_event(
            report::Event::Error,
            format!("lost track of the command: {error}"),
        ),
        Note::LeaseEnded => report::error(format!(
            "the lease thread for lock '{key}' ended unexpectedly"
        )),
        Note::WatchdogRestarted { .. } | Note::WatchdogFailed { .. } | Note::WatchdogStopped(_) => {
            watchdog(note)
        }
    }
}

/// Say what became of the watchdog.
fn watchdog(note: &Note) {
    match note {
        Note::WatchdogRestarted { how, pid } => report!(
            0,
            WatchdogRestarted { "how" => how.as_str(), "pid" => *pid },
            "warning: redlock's watchdog {how}; started a new one (pid {pid})"
        ),
        Note::WatchdogFailed { how, error } => report!(
            0,
            WatchdogFailed { "how" => how.as_str(), "error" => error.as_str() },
            "warning: redlock's watchdog {how}, and no new one could be started ({error})"
        ),
        Note::WatchdogStopped(signal) => report!(
            0,
            WatchdogStopped { "signal" => signal.to_string() },
            "warning: redlock's watchdog was stopped ({signal}); continued it"
        ),
        _ => {}
    }
}

/// Say that the replicas stopped acknowledging renewals: a warning the first time, `-vv` after.
fn unacknowledged(key: &str, why: &str, first: bool) {
    report!(
        if first { 0 } else { 2 },
        RenewUnacknowledged { "error" => why },
        "warning: the replicas stopped acknowledging renewals of lock '{key}': {why}; the lease \
         is not extended until they do"
    );
}

/// Why the lease was given up, as the `lock_lost` line says it. A lock held by several
/// (`kind`) is gone for one holder when its place is: the key may well hold the others.
fn lost(why: LostWhy, key: &str, kind: Kind) -> String {
    let stopping = "; stopping the command";
    match why {
        LostWhy::Gone => match kind {
            Kind::Exclusive => format!(
                "lost lock '{key}': nobody holds it now (removed, or its lease ended){stopping}"
            ),
            Kind::Limit(_) => format!(
                "lost lock '{key}': its place in the semaphore is gone (removed, or its lease \
                 ended){stopping}"
            ),
            Kind::Shared => format!(
                "lost lock '{key}': its place among the shared holders is gone (removed, or its \
                 lease ended){stopping}"
            ),
        },
        LostWhy::Theirs => format!("lost lock '{key}': another owner holds it{stopping}"),
        LostWhy::RanOut => {
            format!("the lease on lock '{key}' ran out without a renewal{stopping}")
        }
        LostWhy::RanOutWhileStopped => {
            format!("the lease on lock '{key}' ran out while redlock was stopped{stopping}")
        }
        LostWhy::RanOutBeforeSeen => {
            format!("the lease on lock '{key}' ran out before the command was seen to end")
        }
        LostWhy::RunningLow { unacknowledged } => format!(
            "could not renew lock '{key}' before its lease ran low{}{stopping}",
            if unacknowledged {
                ": its replicas stopped acknowledging the renewals (--min-replicas)"
            } else {
                ""
            }
        ),
        LostWhy::LeaseEnded => format!("cannot renew lock '{key}'{stopping}"),
        LostWhy::NoWatchdog => format!(
            "no watchdog guards lock '{key}' any more (nothing would stop the command if redlock \
             froze past the lease){stopping}"
        ),
    }
}

/// Say that the group is (or was) SIGKILLed, and why.
fn killed(reason: KillReason) {
    let why = kill_reason(reason);
    let name = reason_name(reason);
    match reason {
        KillReason::Watchdog => report!(
            1,
            Killed { "reason" => name, "by" => "watchdog" },
            "the watchdog sent SIGKILL to the command's process group: {why}"
        ),
        KillReason::LeaseRanOut
        | KillReason::LeaseRanOutWhileStopped
        | KillReason::GraceRanOut
        | KillReason::SecondRequest(_)
        | KillReason::StopSignalIsKill
        | KillReason::LostTrack => report!(
            1,
            Killed { "reason" => name },
            "sending SIGKILL to the command's process group: {why}"
        ),
    }
}

/// Why the group was SIGKILLed, as a message says it.
fn kill_reason(reason: KillReason) -> String {
    match reason {
        KillReason::LeaseRanOut => "the lease ran out".to_owned(),
        KillReason::LeaseRanOutWhileStopped | KillReason::Watchdog => {
            "the lease ran out while redlock was stopped".to_owned()
        }
        KillReason::GraceRanOut => "the grace after the stop signal ran out".to_owned(),
        KillReason::SecondRequest(signal) => format!("a second {signal}"),
        KillReason::StopSignalIsKill => "the stop signal is KILL".to_owned(),
        KillReason::LostTrack => "redlock lost track of the command".to_owned(),
    }
}

/// The JSON `reason` of a `killed` event: a stable name.
fn reason_name(reason: KillReason) -> &'static str {
    match reason {
        KillReason::LeaseRanOut => "lease_ran_out",
        KillReason::LeaseRanOutWhileStopped | KillReason::Watchdog => "lease_ran_out_while_stopped",
        KillReason::GraceRanOut => "grace_ran_out",
        KillReason::SecondRequest(_) => "second_stop_request",
        KillReason::StopSignalIsKill => "stop_signal_is_kill",
        KillReason::LostTrack => "lost_track",
    }
}
