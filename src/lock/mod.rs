//! The lock, as `run`, `lease` and the admin commands see it, whatever keeps it: the
//! [`Locker`] trait a run's lease drives (take, renew, wait, release), the [`Backend`] a run
//! and the admin commands open from the URLs given and read through ([`Node`]: names, a lock's
//! state, its record of runs, a forced release), and the words they share: how a lock is held
//! ([`Kind`], [`HeldAs`]), what an attempt or a renewal came to, a lock's state and holders
//! (`holder`), the record of runs (`record`), why a request failed (`failure`), and how long
//! a lease is certainly ours (`validity`). Nothing here names a backend; each backend, a
//! folder of `backend/`, implements these traits in its own words.
//!
//! May use `report` (diagnostics), `clock` and `exit` (the outcome labels and exit statuses the
//! record of runs keeps); never `lease`, `run`, `cli`, `admin` or `backend`, which use it.

mod backend;
mod failure;
mod holder;
pub(crate) mod record;
pub(crate) mod validity;

pub(crate) use backend::{Backend, Capabilities, Node, RunSpec};
pub use failure::{Failure, Reason};
pub use holder::Holder;
pub(crate) use holder::{Fence, Forced, Inspected, LockInfo, Place, Several};
pub(crate) use record::{RunEnding, Runs};

use std::time::Duration;

use crate::clock::Moment;

/// How a client holds a lock: alone, as one of at most N (a semaphore), or beside other shared
/// holders (and never beside an exclusive one). Every client of a key must agree, except that
/// shared and exclusive clients of a key are meant to meet (readers and a writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// One holder at a time (no `--limit`, no `--shared`).
    #[default]
    Exclusive,
    /// At most N holders at once (`--limit N`).
    Limit(u32),
    /// Any number of shared holders at once, never beside an exclusive one (`--shared`).
    Shared,
}

impl Kind {
    /// How the lock's holders record it on the server, and the server's side names it: `lock`,
    /// `limit N`, `shared`.
    pub(crate) fn stored(self) -> String {
        match self {
            Kind::Exclusive => "lock".to_owned(),
            Kind::Limit(n) => format!("limit {n}"),
            Kind::Shared => "shared".to_owned(),
        }
    }

    /// The kind a key's holders recorded (`lock`, `limit N`, `shared`), None when unknown.
    pub(crate) fn from_stored(stored: &str) -> Option<Kind> {
        match stored {
            "lock" => Some(Kind::Exclusive),
            "shared" => Some(Kind::Shared),
            other => other
                .strip_prefix("limit ")
                .and_then(|n| n.parse().ok())
                .map(Kind::Limit),
        }
    }

    /// As a user would write it on the command line.
    pub fn flags(self) -> String {
        match self {
            Kind::Exclusive => "an exclusive lock (no --limit or --shared)".to_owned(),
            Kind::Limit(n) => format!("a semaphore of {n} (--limit {n})"),
            Kind::Shared => "shared (--shared)".to_owned(),
        }
    }
}

/// How a lock is held, as found on its server: by redlock clients of one [`Kind`], by several
/// holders that did not record how, or not by redlock at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldAs {
    /// By redlock clients of this kind.
    Kind(Kind),
    /// By several holders whose way of holding it this redlock does not know: the text they
    /// recorded (a newer redlock's), as stored, or nothing, when they recorded none (as the
    /// first redlock's semaphores did not).
    Unknown(String),
    /// Not by redlock: what the lock's key holds instead, as the backend says it (`a hash`, in
    /// the server's words).
    Foreign(String),
}

impl HeldAs {
    /// How several holders (or an attempt turned away) say they hold a lock: `lock`, `limit N`,
    /// `shared`, or '' when not recorded.
    pub(crate) fn from_stored(stored: &str) -> HeldAs {
        Kind::from_stored(stored).map_or_else(|| HeldAs::Unknown(stored.to_owned()), HeldAs::Kind)
    }

    /// The kind, when redlock clients hold it as one it knows.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            HeldAs::Kind(kind) => Some(*kind),
            _ => None,
        }
    }

    /// Why a run of `key` asking for `asked` does not take it (exit 64), as one line.
    pub fn refusal(&self, key: &str, asked: Kind) -> String {
        let held = match self {
            HeldAs::Foreign(what) => {
                return format!(
                    "lock '{key}': its key is {what} that redlock did not make; not running the \
                     command (`redlock release --force` on this key removes it)"
                );
            }
            HeldAs::Kind(kind) => kind.flags(),
            HeldAs::Unknown(text) if text.is_empty() => {
                "several holders that did not record how".to_owned()
            }
            HeldAs::Unknown(text) => format!("'{text}'"),
        };
        format!(
            "lock '{key}' is held as {held}, but this run asks for {}: all clients of a lock \
             must give the same --limit, and --shared mixes only with exclusive clients; not \
             running the command",
            asked.flags()
        )
    }
}

/// The result of one acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Taken; the fencing counter after this acquisition.
    Acquired { fence: i64 },
    /// Held by someone else, who has this much lease left (None: no expiry, or unknown); or,
    /// with `queued`, free but promised to the `--fair` waiters ahead of this one.
    Busy {
        remaining: Option<Duration>,
        queued: bool,
    },
    /// Not attempted: a run of this lock succeeded this long ago, within the min-interval.
    Skipped { ago: Duration },
    /// Not attempted: the lock's holders use it otherwise (another `--limit`, a semaphore
    /// against an exclusive lock), or its key is not redlock's.
    Mismatch { found: HeldAs },
    /// Not attempted: the servers given cannot hold this lock as asked (several nodes of a
    /// quorum that are one server, given under different names), as one line; nothing was
    /// written by this attempt. A usage error (64).
    Misconfigured(String),
}

/// What a compare-and-extend or compare-and-delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The key held our token (and was extended or deleted).
    Ours,
    /// The key was gone.
    Gone,
    /// The key held another owner's token; it was left untouched.
    Theirs,
}

/// What one renewal came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// The lock held our token and was extended, as durably as asked: the lease counts from
    /// when the renewal was sent.
    Extended,
    /// The lock held our token and was extended, but not as durably as the backend options
    /// asked (fewer replicas than `--min-replicas` acknowledged it in time; the message says
    /// how many). A
    /// server that takes over now could carry the older lease, so the lease must not count
    /// from this renewal: the lease thread treats it as a failed renewal and tries again.
    Unacknowledged(String),
    /// Not extended: the key was gone ([`Held::Gone`]) or held by another owner ([`Held::Theirs`]).
    Lost(Held),
}

impl From<Held> for Renewal {
    /// A renewal made without `--min-replicas`.
    fn from(held: Held) -> Self {
        match held {
            Held::Ours => Renewal::Extended,
            lost => Renewal::Lost(lost),
        }
    }
}

/// The lock protocol as the lease and run code see it, one implementation per backend, and
/// per deployment where a backend has several (one server, or a quorum that composes one
/// locker per node and counts their answers by majority). What is atomic on the server (the
/// take, the renewal, the release and the record of runs beside them) is the backend's, in its
/// server's own language; the rules above it are the lease's, written once.
///
/// A locker is made for one run ([`Backend::locker`]) and bound to that run's owner token
/// ([`RunSpec::token`]): every request it makes is on that token's behalf, so none takes one.
///
/// A waiter keeps one connection per server: [`Locker::wait`] blocks on the same connection
/// that acquires, so that a fleet of waiters does not need two each. What cuts such a wait
/// short from another thread is an [`Interrupt`].
pub trait Locker: Send {
    /// Block until a release wakes this waiter, its [`Interrupt`] fires, or `until.pause`
    /// comes, over the connection the other requests use. An answer that does not come is
    /// given up (a failure) a little after `until.pause` (how little is the backend's), and
    /// by `until.wait_ends` (a shortest block aside). Ok(true) when woken, Ok(false) when the
    /// time ran out.
    fn wait(&mut self, until: Until) -> Result<bool, Failure>;
    /// [`Locker::wait`], with the next attempt to take the lock ([`Locker::acquire`] for
    /// `ttl`) sent behind the block in the same request where this lock can: the server runs
    /// the attempt the moment the block ends, so a woken waiter's attempt costs no round
    /// trip of its own. The block's answer, and the attempt's when it came and can be acted on
    /// (None: not sent, or to be made again as usual). A lease that the attempt took counts
    /// from when the request was sent, since the attempt ran at some moment after that.
    fn wait_then_acquire(
        &mut self,
        until: Until,
        _ttl: Duration,
    ) -> (Result<bool, Failure>, Option<Acquire>) {
        (self.wait(until), None)
    }
    /// What another thread uses to cut this waiter's [`Locker::wait`] short.
    fn interrupter(&self) -> Box<dyn Interrupt>;
    /// Stop waiting: leave the fair queue and, if the lock is free, pass on a wake-up this
    /// waiter may have taken; `busy`: the run gives up on a busy lock (the record counts it).
    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure>;
    /// Whether an attempt may have taken the lock although its reply never came (cut off,
    /// timed out, unreadable) and no request was answered since: a wait that ends without the
    /// lock must then give it back ([`Locker::release`]), or it stays taken for its ttl. A
    /// quorum undoes every failed attempt on every node at once, so it never needs to.
    fn unanswered(&self) -> bool {
        false
    }
    /// What a backend leaves until the lock is reported taken, so that it runs beside the
    /// command's start instead of before it (such as the run's record of a waiter that was let
    /// in, written with a request of its own); within `timeout`. Its failure is the record's,
    /// never the lock's: the next renewal finds a lock that was lost meanwhile.
    fn settle(&mut self, _timeout: Duration) {}
    /// One attempt to take the lock for `ttl`, within `timeout`. A failure that is
    /// [`Failure::Unacknowledged`] may leave the lock taken: the caller gives it back with
    /// [`Locker::give_back_unacknowledged`].
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure>;
    /// Extend the lease to `ttl` from now if the lock is still the run's; with
    /// `--min-replicas`, wait (within `timeout`) for that many replicas to acknowledge it.
    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure>;
    /// Give back what an attempt that failed with [`Failure::Unacknowledged`] took, waking a
    /// waiter as a release does. `ended` None: the wait tries again, and the take leaves no run
    /// in the record of runs nor counts, so that the run is recorded once however many takes
    /// it gave back; Some: the wait is over, and the run is recorded as so ended. A backend
    /// whose acquire gives back such a take itself (a quorum undoes its nodes' takes, and
    /// records no run for an attempt that fell short) has nothing to do.
    fn give_back_unacknowledged(
        &mut self,
        _ended: Option<RunEnding>,
        _timeout: Duration,
    ) -> Result<(), Failure> {
        Ok(())
    }
    /// Delete the lock if it is still the run's, recording how the run ended (`ended`); a
    /// success is also recorded for the min-interval, if one is set.
    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure>;
}

/// Ends a waiter's blocked [`Locker::wait`] at once, from another thread. How is the
/// backend's: a marker pushed through the server to the waiter, or the waiter's own watch or
/// listen cancelled in the client; each backend's interrupt says why it is done so.
pub trait Interrupt: Send + Sync {
    /// Make the waiter's current (or next) wait return at once; within `timeout`.
    fn interrupt(&self, timeout: Duration) -> Result<(), Failure>;
}

/// Until when a waiter waits for a release ([`Locker::wait`]), on the lease's clock. How long
/// its server is asked to hold the request, and how late an answer is still awaited, is the
/// backend's to add: each knows how late its server may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Until {
    /// When the waiter tries again if no release woke it first.
    pub pause: Moment,
    /// When the whole wait for the lock ends (None: `--wait forever`): a server that does not
    /// answer is given up by then, so that the wait ends on time.
    pub wait_ends: Option<Moment>,
}

/// A fencing counter (or other key of the lock's) holding what redlock did not write, as
/// messages say it: what is there, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// `the fencing counter KEY holds a hash, which redlock did not write`, in the server's
    /// words.
    pub said: String,
    /// How to remove it, with the server's own tool, and what the next holder's token then
    /// carries on from.
    pub remedy: String,
}
