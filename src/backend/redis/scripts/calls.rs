//! Every script's definition: the struct of its arguments, the lock's keys it takes, its files
//! (the helpers it calls, then its own) and what its reply decodes to. The order of the keys
//! and of the fields here is the order of KEYS and ARGV, and their names are the Lua's names
//! for them (see `scripts`).

use std::time::Duration;

use redis::Value;

use crate::backend::redis::record::Kept;
use crate::backend::redis::reply::{Fields, FromReply};
use crate::backend::redis::scripts::{args, script};
use crate::lock::record::{Lost, RunEnding, Runs};
use crate::lock::{Forced, Held, HeldAs, Holder, Inspected, Kind};

/// A file of `scripts/` (the lock's own step and what several steps share), or of a feature's
/// own folder (`waiters/`, `several/`, `record/`), by name and text.
macro_rules! lua {
    ($name:literal) => {
        ($name, include_str!(concat!($name, ".lua")))
    };
    ($dir:literal / $name:literal) => {
        (
            concat!($dir, "/", $name),
            include_str!(concat!("../", $dir, "/", $name, ".lua")),
        )
    };
}

const CLOCK: (&str, &str) = lua!("clock");
const FENCE: (&str, &str) = lua!("fence");
const LOCK: (&str, &str) = lua!("lock");
const HOLDER: (&str, &str) = lua!("holder");
const HOLDERS: (&str, &str) = lua!("several" / "holders");
const WAKE: (&str, &str) = lua!("waiters" / "wake");
const PASS_ON: (&str, &str) = lua!("waiters" / "pass_on");
const QUEUE: (&str, &str) = lua!("waiters" / "queue");
const REGISTRY: (&str, &str) = lua!("waiters" / "registry");
const ATTEMPT: (&str, &str) = lua!("attempt");
const FINISH: (&str, &str) = lua!("several" / "finish");
const RING: (&str, &str) = lua!("record" / "ring");
const NEW_RUN: (&str, &str) = lua!("record" / "new_run");
const READ: (&str, &str) = lua!("record" / "read");
const RECORD_START: (&str, &str) = lua!("record" / "start");
const RECORD_ENDED: (&str, &str) = lua!("record" / "ended");
const RECORD_LOST: (&str, &str) = lua!("record" / "lost");

args! {
    /// What every attempt of the feature acquires says of itself (acquire.lua, acquire_many.lua).
    #[derive(Debug, Clone, Copy)]
    pub struct Attempt<'a> {
        /// This holder's token.
        pub token: &'a str,
        /// The lease asked for.
        pub ttl: Duration,
        /// Skip the run when one succeeded this recently (`--min-interval`; None: off).
        pub min_interval: Option<Duration>,
        /// Recorded beside the lock when taken.
        pub holder: &'a Holder,
        /// How long a place in the waiters' queue lasts unless refreshed.
        pub entry: Duration,
        /// How long a wake-up waits in its list for a waiter to take it.
        pub linger: Duration,
        /// How long a waiter turned away counts as waiting, in the registry of waiters.
        pub lifetime: Duration,
        /// First come, first served among waiters (`--fair`).
        pub fair: bool,
        /// An earlier attempt of this waiter was, or may have been (its reply lost), turned
        /// away: once let in it leaves the waiters' records, and a semaphore's waiter let in
        /// with room left wakes the next. A first attempt that is let in touches none of them.
        pub waited: bool,
        /// How the record of runs is kept (the run is recorded when taken).
        pub record: Kept,
        /// The run as the record keeps it once taken, as far as the client knows it (see
        /// [`crate::lock::record::started_json`]).
        pub run: &'a str,
    }
}

args! {
    /// What a release says of the run that ends.
    #[derive(Debug, Clone, Copy)]
    pub struct Finish<'a> {
        /// The holder's token.
        pub token: &'a str,
        /// How long a wake-up waits in its list for a waiter to take it.
        pub linger: Duration,
        /// The run succeeded: record it for this long (`--min-interval`; None: failed, or none).
        pub success_for: Option<Duration>,
        /// An attempt of this holder was, or may have been, turned away (see [`Attempt`]).
        pub waited: bool,
        /// The run's N in the record of runs ('' when not recorded).
        pub slot: &'a str,
        /// How the run ended, for the record of runs.
        pub ended: RunEnding,
        pub record: Kept,
        /// The take is given back unused: too few replicas acknowledged it, and the wait tries
        /// again. Its run leaves the record of runs and counts nowhere (`ended` is not
        /// recorded): however many takes a wait gives back, the run is recorded once.
        pub unused: bool,
    }
}

script! {
    /// Take the lock alone, without `--fair` or `--min-interval` (take.lua); the run is
    /// recorded (record/start.lua) or the waiter registered (registered.lua) after it, in the
    /// same call.
    pub struct Take<'a> {
        token: &'a str,
        ttl: Duration,
        holder: &'a Holder,
        /// How long a waiter turned away counts as waiting, in the registry of waiters.
        lifetime: Duration,
        /// See [`Attempt::waited`].
        waited: bool,
        record: Kept,
        /// See [`Attempt::run`].
        run: &'a str,
    }
    keys [lock, fence, holder, wake, queue, alive, waiting, counts];
    files [CLOCK, WAKE, REGISTRY, RING, NEW_RUN, lua!("take")];
    then [RECORD_START, lua!("waiters" / "registered")];
    reply AcquireReply;
}

script! {
    /// Take the lock alone with `--fair` or `--min-interval`, or behind shared holders.
    pub struct Acquire<'a> {
        attempt: Attempt<'a>,
    }
    keys [lock, fence, wake, queue, alive, holder, done, kind, holders, waiting, counts];
    files [CLOCK, FENCE, LOCK, HOLDER, HOLDERS, WAKE, PASS_ON, QUEUE, REGISTRY, RING, NEW_RUN,
        ATTEMPT, lua!("acquire")];
    reply AcquireReply;
}

script! {
    /// Take a place among several holders: a semaphore's slot or a shared hold.
    pub struct AcquireMany<'a> {
        attempt: Attempt<'a>,
        /// How: `Kind::Limit(n)` or `Kind::Shared`.
        held_as: Kind,
    }
    keys [lock, fence, wake, queue, alive, done, kind, holders, waiting, counts];
    files [CLOCK, FENCE, LOCK, HOLDERS, WAKE, PASS_ON, QUEUE, REGISTRY, RING, NEW_RUN,
        ATTEMPT, lua!("several" / "acquire_many")];
    reply AcquireReply;
}

script! {
    /// Extend the lease while the key still holds our token (extend.lua); a lease found lost
    /// ends the run's record (record/lost.lua).
    pub struct Extend<'a> {
        token: &'a str,
        ttl: Duration,
        /// The run's N in the record of runs ('' when not recorded).
        slot: &'a str,
        /// How the run's record ends when the lock is found lost.
        lost: Lost,
        record: Kept,
    }
    keys [lock, holder, counts];
    files [CLOCK, RING, lua!("extend")];
    then [RECORD_LOST];
    reply Held;
}

script! {
    /// Extend our place among several holders while we still have it.
    pub struct ExtendMany<'a> {
        token: &'a str,
        ttl: Duration,
        slot: &'a str,
        /// How the run's record ends when the place is found lost.
        lost: Lost,
        record: Kept,
    }
    keys [lock, kind, holders, counts];
    files [CLOCK, LOCK, HOLDERS, RING, lua!("several" / "extend_many")];
    reply Held;
}

script! {
    /// Give the lock back while it holds our token (give_back.lua); then, in the same call,
    /// the success kept for `--min-interval` (interval.lua), the run's end in the record
    /// (record/ended.lua) and a waiter woken (wake_next.lua).
    pub struct GiveBack<'a> {
        finish: Finish<'a>,
        /// The run as it ended, the record's JSON, written by the client ('' unknown).
        ended_run: &'a str,
    }
    keys [lock, holder, done, wake, queue, alive, waiting, counts];
    files [CLOCK, WAKE, PASS_ON, RING, lua!("give_back")];
    then [lua!("interval"), RECORD_ENDED, lua!("waiters" / "wake_next")];
    reply Held;
}

script! {
    /// Give up our place among several holders, and wake a waiter the place may let in.
    pub struct ReleaseMany<'a> {
        finish: Finish<'a>,
        /// The run as it ended, the record's JSON, written by the client ('' unknown): the
        /// last run to end, when more runs began beside it than the record keeps.
        ended_run: &'a str,
    }
    keys [lock, wake, queue, alive, done, kind, holders, waiting, counts];
    files [CLOCK, LOCK, HOLDERS, WAKE, PASS_ON, FINISH, RING, lua!("several" / "release_many")];
    reply Held;
}

script! {
    /// A waiter gives up: it leaves the waiters' records and passes on a wake-up it may have
    /// taken; `busy`: the run ends busy, counted so in the record of runs.
    pub struct Leave<'a> {
        token: &'a str,
        linger: Duration,
        busy: bool,
        record: Kept,
    }
    keys [lock, wake, queue, alive, waiting, counts];
    files [CLOCK, LOCK, WAKE, PASS_ON, QUEUE, RING, lua!("waiters" / "leave")];
    reply ();
}

script! {
    /// Cut a waiter's BLPOP short with a marker on its own wake list.
    pub struct Interrupt<'a> {
        token: &'a str,
        linger: Duration,
    }
    keys [wake];
    files [WAKE, lua!("waiters" / "interrupt")];
    reply ();
}

script! {
    /// Undo a quorum's partial acquire, waking nobody; the waiter recorded as waiting for
    /// `lifetime` when the attempt ended turned away (None: it does not wait).
    pub struct Undo<'a> {
        token: &'a str,
        /// The run's N in the record of runs ('' when not recorded).
        slot: &'a str,
        lifetime: Option<Duration>,
        record: Kept,
    }
    keys [lock, holder, waiting, counts];
    files [CLOCK, HOLDER, REGISTRY, RING, lua!("undo")];
    reply bool;
}

script! {
    /// Read the fencing counter (a quorum's read phase).
    pub struct FenceRead {}
    keys [fence];
    files [CLOCK, FENCE, lua!("fence_read")];
    reply i64;
}

script! {
    /// Raise the fencing counter to at least `at_least` (a quorum's write-back phase).
    pub struct FenceRaise {
        at_least: i64,
    }
    keys [fence];
    files [CLOCK, FENCE, lua!("fence_raise")];
    reply i64;
}

script! {
    /// Read a lock's state (a run found vanished is marked so); `summary`: with what the
    /// record of runs says of it (status, and list --json), else an empty one (list).
    pub struct Inspect {
        record: Kept,
        summary: bool,
    }
    keys [lock, fence, queue, alive, holder, done, kind, holders, waiting, runs, counts];
    files [CLOCK, FENCE, LOCK, HOLDER, HOLDERS, RING, READ, lua!("inspect")];
    reply Inspected;
}

script! {
    /// Read the record of a lock's runs (a run found vanished is marked so).
    pub struct ReadRuns {
        record: Kept,
    }
    keys [lock, kind, holders, runs, counts];
    files [CLOCK, HOLDERS, RING, READ, lua!("recent")];
    reply Runs;
}

script! {
    /// Break-glass release: delete the lock whoever holds it (or only while it holds
    /// `expected`), fence it, wake one waiter.
    pub struct ForceRelease<'a> {
        linger: Duration,
        expected: Option<&'a str>,
    }
    keys [lock, fence, wake, queue, alive, holder, kind, holders, waiting];
    files [CLOCK, FENCE, LOCK, HOLDER, HOLDERS, WAKE, PASS_ON, lua!("force_release")];
    reply Forced;
}

/// What an acquire script answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireReply {
    /// Taken; the fencing counter after this acquisition, the server's time then (unix ms)
    /// and the run's N in the record of runs ('' when not recorded).
    Acquired {
        fence: i64,
        at_ms: u64,
        slot: String,
    },
    /// Not attempted by the plain take: the key is a sorted set (several holders) or a key of
    /// this Redis type that redlock does not make; the feature acquire decides.
    Several(String),
    /// Not attempted: a run succeeded this long ago, within the min-interval.
    Skipped { ago: Duration },
    /// Turned away (and recorded as waiting); worth trying again after `retry_in` at the
    /// latest (None: no expiry, or unknown).
    Busy {
        retry_in: Option<Duration>,
        why: TurnedAway,
    },
    /// Not attempted: the key is held otherwise, or is not redlock's.
    Mismatch(HeldAs),
}

/// Why an attempt was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnedAway {
    /// Held: by another holder, or every slot.
    Held,
    /// Free (or a slot is), but promised to waiters ahead in the queue.
    Promised,
    /// Held by shared holders: this exclusive waiter is in the queue behind them, and must
    /// come back to keep its place there.
    Queued,
}

impl FromReply for AcquireReply {
    fn from_reply(value: &Value) -> Option<Self> {
        let mut f = Fields::of(value)?;
        let reply = match f.text()?.as_str() {
            "acquired" => AcquireReply::Acquired {
                fence: f.int()?,
                at_ms: u64::try_from(f.int()?).ok()?,
                slot: f
                    .text()
                    .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
                    .unwrap_or_default(),
            },
            "several" => AcquireReply::Several(f.text()?),
            "skipped" => AcquireReply::Skipped {
                ago: f.millis()?.unwrap_or_default(),
            },
            "busy" => AcquireReply::Busy {
                retry_in: f.millis()?,
                why: match f.text()?.as_str() {
                    "held" => TurnedAway::Held,
                    "turn" => TurnedAway::Promised,
                    "behind" => TurnedAway::Queued,
                    _ => return None,
                },
            },
            "held_as" => AcquireReply::Mismatch(HeldAs::from_stored(&f.text()?)),
            "foreign" => AcquireReply::Mismatch(HeldAs::Foreign(format!("a Redis {}", f.text()?))),
            _ => return None,
        };
        f.end().then_some(reply)
    }
}

/// Every script's text, by its definition's name (for the tests).
#[cfg(test)]
pub(super) fn all() -> Vec<(&'static str, &'static super::Lua)> {
    use crate::backend::redis::scripts::Script;
    vec![
        ("Take", Take::lua()),
        ("Acquire", Acquire::lua()),
        ("AcquireMany", AcquireMany::lua()),
        ("Extend", Extend::lua()),
        ("ExtendMany", ExtendMany::lua()),
        ("GiveBack", GiveBack::lua()),
        ("ReleaseMany", ReleaseMany::lua()),
        ("Leave", Leave::lua()),
        ("Interrupt", Interrupt::lua()),
        ("Undo", Undo::lua()),
        ("FenceRead", FenceRead::lua()),
        ("FenceRaise", FenceRaise::lua()),
        ("Inspect", Inspect::lua()),
        ("ReadRuns", ReadRuns::lua()),
        ("ForceRelease", ForceRelease::lua()),
    ]
}
