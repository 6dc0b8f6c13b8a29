//! The events redlock reports: each diagnostic is one, and its name is the JSON log's `event`
//! field (`--log-format json`). The names are an interface: a name, once published, never
//! changes meaning, and fields are only ever added. Each is written once, here; the JSON events
//! table in docs/operating.md lists every one of them, and a test holds the two together.

use crate::exit::Outcome;

/// The enum, its list and its names from one table, so that a new event is named once and can
/// be neither missing from [`Event::ALL`] nor named twice.
macro_rules! events {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// Every event redlock reports.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Event {
            $($(#[$doc])* $variant,)*
        }

        impl Event {
            /// Every event, in the order the docs list them.
            #[cfg(test)]
            pub const ALL: &[Event] = &[$(Event::$variant,)*];

            /// The event's name, as the JSON log's `event` field has it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Event::$variant => $name,)*
                }
            }
        }
    };
}

events! {
    Splay => "splay",
    Acquired => "acquired",
    Busy => "busy",
    Skipped => "skipped",
    Interrupted => "interrupted",
    SignalIgnored => "signal_ignored",
    Unreachable => "unreachable",
    AcquireUnacknowledged => "acquire_unacknowledged",
    LeaveFailed => "leave_failed",
    GaveBack => "gave_back",
    GiveBackFailed => "give_back_failed",
    Renewed => "renewed",
    RenewFailed => "renew_failed",
    RenewRecovered => "renew_recovered",
    RenewUnacknowledged => "renew_unacknowledged",
    LockLost => "lock_lost",
    MaxRuntime => "max_runtime",
    SignalForwarded => "signal_forwarded",
    StopRequested => "stop_requested",
    StopRepeated => "stop_repeated",
    Killed => "killed",
    Suspended => "suspended",
    Continued => "continued",
    ContinuedUntilRenewed => "continued_until_renewed",
    Leftovers => "leftovers",
    Exited => "exited",
    Released => "released",
    ReleaseFailed => "release_failed",
    Reaped => "reaped",
    WatchdogRestarted => "watchdog_restarted",
    WatchdogFailed => "watchdog_failed",
    WatchdogStopped => "watchdog_stopped",
    SpawnFailed => "spawn_failed",
    Error => "error",
    EvictionPolicy => "eviction_policy",
    PreflightSkipped => "preflight_skipped",
    RoleUnchecked => "role_unchecked",
    IdentityUnchecked => "identity_unchecked",
    MasterChanged => "master_changed",
    Moved => "moved",
    WatchCancelled => "watch_cancelled",
    KeepAliveUnanswered => "keepalive_unanswered",
    PgpassIgnored => "pgpass_ignored",
    PruneFailed => "prune_failed",
    RecordFailed => "record_failed",
    /// Anything else: a line with no event of its own.
    Message => "message",
}

/// The event that reports how a run ended.
impl From<Outcome> for Event {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Exited(_) | Outcome::Signaled(_) => Event::Exited,
            Outcome::Busy => Event::Busy,
            Outcome::Skipped => Event::Skipped,
            Outcome::Interrupted(_) => Event::Interrupted,
            Outcome::NotRun { .. } => Event::SpawnFailed,
            Outcome::LockLost => Event::LockLost,
            Outcome::MaxRuntime => Event::MaxRuntime,
            Outcome::Usage | Outcome::Unavailable | Outcome::Internal => Event::Error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first cells of the JSON events table of docs/operating.md.
    fn documented() -> Vec<String> {
        let page =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operating.md"))
                .unwrap();
        let table = &page[page.find("| event |").expect("the JSON events table")..];
        table
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .filter_map(|line| line.split('|').nth(1))
            .map(|cell| cell.trim().trim_matches('`').to_owned())
            .collect()
    }

    #[test]
    fn the_docs_list_every_event_and_nothing_else() {
        let names: Vec<String> = Event::ALL.iter().map(|e| e.name().to_owned()).collect();
        let documented = documented();
        let missing: Vec<&String> = names.iter().filter(|n| !documented.contains(n)).collect();
        let unknown: Vec<&String> = documented.iter().filter(|d| !names.contains(d)).collect();
        assert!(
            missing.is_empty(),
            "events the docs do not list: {missing:?}"
        );
        assert!(
            unknown.is_empty(),
            "events the docs list that redlock never reports: {unknown:?}"
        );
    }

    #[test]
    fn every_name_is_written_once() {
        let mut names: Vec<&str> = Event::ALL.iter().map(|e| e.name()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "two events share a name");
    }
}
