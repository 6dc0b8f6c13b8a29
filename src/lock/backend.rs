//! What a backend is to the run and the admin commands: a [`Backend`], opened once from the
//! URLs given, makes a [`Locker`] for a run and a [`Node`] for each server the admin commands
//! read (one, or every node of a quorum of independent servers, whose answers count by
//! majority).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::lock::{Failure, Forced, Holder, Inspected, Kind, Locker, Runs};

/// One lock service, opened from the URLs given, as its backend keeps locks: one server, one
/// replicated service (a cluster of members, a primary with standbys, a service that names
/// its current primary), or a quorum of independent servers whose answers count by majority
/// ([`Capabilities::quorum`]). Each backend folder of `backend/` says which of these it
/// offers.
pub(crate) trait Backend: Send + Sync {
    /// The servers the admin commands read, as messages name them: one, or each node of a
    /// quorum ([`Backend::node`] takes their index).
    fn nodes(&self) -> Vec<String>;
    /// What this backend honours, for the checks made before anything is connected.
    fn capabilities(&self) -> Capabilities;
    /// Where the locks live, as a message names it: the servers and the prefix
    /// (`127.0.0.1:6379 under prefix 'redlock:'`).
    fn described(&self) -> String;
    /// The lock protocol for one run of `run`.
    fn locker(&self, run: &RunSpec) -> Box<dyn Locker>;
    /// What the admin commands read through on node `index` of [`Backend::nodes`].
    fn node(&self, index: usize) -> Box<dyn Node>;
    /// The statements that make the tables this backend keeps its locks in (`redlock init
    /// --print`); None for a backend that needs none made ([`Capabilities::init`]).
    fn tables(&self) -> Option<String> {
        None
    }
    /// Make those tables (idempotent), within `timeout`; what was done, as one line.
    fn init(&self, _timeout: Duration) -> Result<String, Failure> {
        Ok(String::new())
    }
}

/// What a backend honours: a flag it cannot is refused in one line (64) before anything is
/// connected, in the backend's own words ([`Capabilities::refusal`]).
#[derive(Debug, Clone)]
pub(crate) struct Capabilities {
    /// Its nodes ([`Backend::nodes`]) are independent servers whose answers count by majority
    /// (a quorum), rather than one service: the admin commands read every node.
    pub quorum: bool,
    /// A first-come, first-served queue of waiters (`--fair`): Ok, or why not, as one line.
    pub fair: Result<(), String>,
    /// Semaphores and shared holders (`--limit`, `--shared`): Ok, or why not.
    pub several_holders: Result<(), String>,
    /// The backend options it knows (named as their flags, without the dashes): each taken,
    /// or refused with why. One it does not list is refused as one it does not take.
    pub options: Vec<(&'static str, Result<(), String>)>,
    /// Its tables must be made (`redlock init`) before the first run.
    pub init: bool,
}

impl Capabilities {
    /// Why a run asking for `kind`, `fair` and `options` (name and value) cannot be honoured
    /// here, as one line; None when it can. Options first, then the queue, then the kind.
    pub(crate) fn refusal(
        &self,
        kind: Kind,
        fair: bool,
        options: &[(&str, String)],
    ) -> Option<String> {
        for (name, _) in options {
            match self.options.iter().find(|(known, _)| known == name) {
                Some((_, Ok(()))) => {}
                Some((_, Err(why))) => return Some(why.clone()),
                None => return Some(format!("--{name} does not work with this backend")),
            }
        }
        if fair && let Err(why) = &self.fair {
            return Some(why.clone());
        }
        if kind != Kind::Exclusive
            && let Err(why) = &self.several_holders
        {
            return Some(why.clone());
        }
        None
    }
}

/// What a run asks of the lock: everything the backend needs to take it as asked.
#[derive(Debug, Clone)]
pub(crate) struct RunSpec {
    /// The lock's name (`--key`).
    pub key: String,
    /// The run's owner token: unique to this run, what its holder is known by on the server
    /// (`REDLOCK_TOKEN`). The locker made for the run acts for it in every request.
    pub token: String,
    /// Alone, one of at most N (`--limit`), or shared (`--shared`).
    pub kind: Kind,
    /// First come, first served among waiters (`--fair`).
    pub fair: bool,
    /// Skip the run when one succeeded this recently (`--min-interval`).
    pub min_interval: Option<Duration>,
    /// Who takes it: recorded beside the lock and in the record of runs.
    pub holder: Holder,
    /// The lease asked for (`--ttl`).
    pub ttl: Duration,
    /// The longest a waiter turned away pauses before its next attempt, as the lease's
    /// schedule says: the backend counts it as waiting (`status`'s waiters) that long, and
    /// as much longer as its own waits may answer late.
    pub waiting: Duration,
}

/// One server as the admin commands read it (a node of a quorum is one): the locks under the
/// prefix, a lock's state, its record of runs, and a forced release. Each request within
/// `timeout`.
pub(crate) trait Node: Send {
    /// The names of the locks under the prefix that may be held (some backends include free
    /// ones; the caller reads each).
    fn names(&mut self, timeout: Duration) -> Result<BTreeSet<String>, Failure>;
    /// The state of lock `name`; a fencing counter that holds what redlock did not write is
    /// read as [`crate::lock::Fence::Unreadable`].
    fn inspect(&mut self, name: &str, timeout: Duration) -> Result<Inspected, Failure>;
    /// The state of each of `names` in as few requests as the backend can, each None where it
    /// must be read alone ([`Node::inspect`] says why). A failure is the whole batch's.
    /// `with_runs`: with the record of runs' summary, which only `--json` shows.
    fn inspect_each(
        &mut self,
        names: &[String],
        with_runs: bool,
        timeout: Duration,
    ) -> Result<Vec<Option<Inspected>>, Failure> {
        let _ = with_runs;
        names
            .iter()
            .map(|name| self.inspect(name, timeout).map(Some))
            .collect()
    }
    /// The record of the runs of lock `name`.
    fn runs(&mut self, name: &str, timeout: Duration) -> Result<Runs, Failure>;
    /// Break lock `name`: remove its holder (the one of `token`, when given) and advance its
    /// fencing token past theirs.
    fn force_release(
        &mut self,
        name: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_the_backend_cannot_honour_is_refused_in_its_words() {
        let caps = Capabilities {
            quorum: true,
            fair: Err("no queue here".into()),
            several_holders: Err("no count here".into()),
            options: vec![
                ("fsync", Ok(())),
                ("min-replicas", Err("no replicas".into())),
            ],
            init: false,
        };
        let none: &[(&str, String)] = &[];
        let fsync = [("fsync", String::new())];
        let refused = |kind, fair, options: &[(&str, String)]| caps.refusal(kind, fair, options);
        assert_eq!(refused(Kind::Exclusive, false, none), None);
        assert_eq!(refused(Kind::Exclusive, false, &fsync), None);
        assert_eq!(
            refused(Kind::Exclusive, false, &[("min-replicas", "2".into())]).as_deref(),
            Some("no replicas")
        );
        assert_eq!(
            refused(Kind::Exclusive, false, &[("zstd", String::new())]).as_deref(),
            Some("--zstd does not work with this backend")
        );
        assert_eq!(
            refused(Kind::Exclusive, true, none).as_deref(),
            Some("no queue here")
        );
        assert_eq!(
            refused(Kind::Shared, false, none).as_deref(),
            Some("no count here")
        );
        assert_eq!(
            refused(Kind::Limit(2), true, &[("min-replicas", "1".into())]).as_deref(),
            Some("no replicas"),
            "options are looked at first"
        );
    }
}
