//! The record of a lock's runs, as a run writes it: the name's record lease (its ID derived from
//! the lock's keys, so that every client knows it without asking), kept alive once an hour and
//! granted when it is found gone (the first use of the name, or its first use [`RECORD_TTL`]
//! after the last); every record write attached to it; counts; a vanished run marked; a lost
//! run's end written; the oldest runs pruned and keys that no lease holds (a 0.3 client's)
//! adopted. A record write never stops a lock: a failed one is the record's loss.
//!
//! A write whose record lease is gone (the name unused for [`RECORD_TTL`] while a run held it,
//! or the lease revoked by hand) is made once more, the lease granted anew.

use std::time::{Duration, Instant};

use etcd_client::{Error, GetOptions, KeyValue, LeaseGrantOptions, TxnResponse};

use super::client::Conn;
use super::keys::Keys;
use super::protocol::{self, Step};
use super::record;
use super::session::keep_alive;
use crate::backend::run_record::now_ms;
use crate::lock::Failure;
use crate::lock::record::{RECORD_TTL, RUNS_KEPT};

/// The least time a count is given, whatever the step it closes has left (a run turned away
/// without `--wait` has 100 ms for its whole leave): a count is one request.
const COUNT_TIME: Duration = Duration::from_secs(1);

/// How often at most a client keeps the record's lease alive: a name used more often has it
/// kept alive once an hour (`BASE/kept` says when), so that a run costs no request for it, and
/// its record goes between 40 days less an hour and 40 days after its last use.
const KEEP_EVERY: Duration = Duration::from_secs(3600);

/// How many runs past [`RUNS_KEPT`] a lock's record may hold before a take prunes it: a prune
/// is a request of its own, made every few runs rather than every run.
const PRUNE_SLACK: u32 = 5;

/// The record of one lock name, as a client writes it.
pub(super) struct Recorder {
    keys: Keys,
    /// The name's record lease.
    lease: i64,
    state: Lease,
}

/// What this client knows of the record's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lease {
    /// Not kept alive in the last [`KEEP_EVERY`], as far as this client knows: it is, once the
    /// run is under way.
    Unknown,
    /// Kept alive, or granted, by this client.
    Alive,
    /// Found gone: granted again before the next write.
    Gone,
}

/// `step` sent within `deadline`. None: a lease it writes with is gone (etcd refuses the whole
/// transaction).
pub(super) fn send_step(
    conn: &mut Conn,
    step: &Step,
    deadline: Instant,
) -> Result<Option<TxnResponse>, Failure> {
    let txn = etcd_client::Txn::from(step);
    conn.run(deadline, move |mut client| {
        let txn = txn.clone();
        async move {
            match client.txn(txn).await {
                Err(Error::GRpcStatus(status)) if status.code() == tonic::Code::NotFound => {
                    Ok(None)
                }
                other => other.map(Some),
            }
        }
    })
}

impl Recorder {
    pub(super) fn new(keys: Keys) -> Self {
        Self {
            lease: keys.record_lease(),
            keys,
            state: Lease::Unknown,
        }
    }

    /// What the take read of when the lease was last kept alive (unix ms, a host's clock):
    /// within [`KEEP_EVERY`] of `now_ms` (and not later by more), this client need not.
    pub(super) fn seen(&mut self, kept_ms: Option<u64>, now_ms: u64) {
        let every = KEEP_EVERY.as_millis() as u64;
        let recent = kept_ms.is_some_and(|at| at < now_ms + every && now_ms < at + every);
        if self.state == Lease::Unknown && recent {
            self.state = Lease::Alive;
        }
    }

    /// The record's lease kept alive, and `BASE/kept` set, unless this client knows it alive;
    /// one found gone is granted again before the next write.
    pub(super) fn keep(&mut self, conn: &mut Conn, deadline: Instant) {
        if self.state != Lease::Unknown {
            return;
        }
        let lease = self.lease;
        match conn.run(deadline, move |client| keep_alive(client, lease)) {
            Ok(true) => {
                self.state = Lease::Alive;
                let step = protocol::kept(&self.keys, now_ms(), lease);
                let _ = send_step(conn, &step, deadline);
            }
            Ok(false) => self.state = Lease::Gone,
            Err(_) => {}
        }
    }

    /// The lease was kept alive (true) or found gone (false).
    pub(super) fn kept(&mut self, alive: bool) {
        self.state = if alive { Lease::Alive } else { Lease::Gone };
    }

    /// The record lease, granted again within `deadline` if it was found gone.
    pub(super) fn ensure(&mut self, conn: &mut Conn, deadline: Instant) -> Result<i64, Failure> {
        if self.state != Lease::Gone {
            return Ok(self.lease);
        }
        let (id, secs) = (self.lease, RECORD_TTL.as_secs() as i64);
        conn.run(deadline, move |mut client| async move {
            let options = LeaseGrantOptions::new().with_id(id);
            match client.lease_grant(secs, Some(options)).await {
                // Another client granted it first.
                Err(Error::GRpcStatus(s)) if s.code() == tonic::Code::FailedPrecondition => Ok(()),
                other => other.map(drop),
            }
        })?;
        self.state = Lease::Alive;
        let _ = send_step(conn, &protocol::kept(&self.keys, now_ms(), id), deadline);
        // What the record holds from before (a 0.3 client's keys) goes with it.
        self.tidy(conn, 0, deadline);
        Ok(self.lease)
    }

    /// `build(lease)` sent with the record lease, and once more with a new lease if that one
    /// is gone.
    pub(super) fn send(
        &mut self,
        conn: &mut Conn,
        deadline: Instant,
        build: impl Fn(&Keys, i64) -> Step,
    ) -> Result<TxnResponse, Failure> {
        for _ in 0..2 {
            let lease = self.ensure(conn, deadline)?;
            match send_step(conn, &build(&self.keys, lease), deadline)? {
                Some(response) => return Ok(response),
                None => self.state = Lease::Gone,
            }
        }
        Err(Failure::Unreachable(
            "the lock's record lease ended as it was written, twice".into(),
        ))
    }

    /// One count of `label`, or one taken back (`up` false). The record's, never the lock's:
    /// failing to count stops nothing.
    pub(super) fn count(&mut self, conn: &mut Conn, label: &str, up: bool, deadline: Instant) {
        let deadline = deadline.max(Instant::now() + COUNT_TIME);
        let _ = self.send(conn, deadline, |keys, lease| {
            protocol::count(keys, label, up, lease)
        });
    }

    /// The run before ours never ended and its entry is gone: it vanished. Marked and counted
    /// once, by the run that took the lock after it.
    pub(super) fn mark_vanished(&mut self, conn: &mut Conn, kv: &KeyValue, deadline: Instant) {
        let Some(marked) = record::vanished(kv.value(), kv.create_revision()) else {
            return;
        };
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let written = self.send(conn, deadline, |keys, lease| {
            protocol::rewrite_run(
                keys,
                key.clone(),
                Some(kv.mod_revision()),
                marked.clone(),
                lease,
            )
        });
        if matches!(written, Ok(r) if r.succeeded()) {
            self.count(conn, record::VANISHED, true, deadline);
        }
    }

    /// A run's end written as `value` (`outcome`: its label) when its lock was found lost, if
    /// its record has no end yet. True when the record already ends as `released` (the
    /// release's own outcome): an earlier attempt of the release went through though its
    /// answer was lost.
    pub(super) fn lost(
        &mut self,
        conn: &mut Conn,
        lease: i64,
        value: String,
        (outcome, released): (&str, &str),
        deadline: Instant,
    ) -> bool {
        let run = self.keys.run(lease);
        let get = conn.run(deadline, {
            let run = run.clone();
            move |mut client| {
                let run = run.clone();
                async move { client.get(run, None).await }
            }
        });
        let Ok(found) = get else { return false };
        // Written as it is found: a record the ring pruned meanwhile is written anew (counted
        // all the same), one that a later take marked vanished is corrected, its count moved,
        // as on Redis; one that ended otherwise (its release, retried) is left.
        let kv = found.kvs().first();
        let was = kv.and_then(|kv| record::outcome_of(kv.value()));
        if was.as_deref().is_some_and(|o| o != record::VANISHED) {
            return was.as_deref() == Some(released);
        }
        let read = kv.map(|kv| kv.mod_revision());
        let written = self.send(conn, deadline, |keys, lease| {
            protocol::rewrite_run(keys, run.clone(), read, value.clone(), lease)
        });
        if matches!(written, Ok(r) if r.succeeded()) {
            self.count(conn, outcome, true, deadline);
            if was.is_some() {
                self.count(conn, record::VANISHED, false, deadline);
            }
        }
        false
    }

    /// The record keeps the newest [`RUNS_KEPT`] runs: past a few more (`total`, this run's
    /// own included), the oldest go; and any key of the record that another lease or none
    /// holds is attached to the record lease. With `total` 0, the adoption alone.
    pub(super) fn tidy(&mut self, conn: &mut Conn, total: i64, deadline: Instant) {
        let excess = total - i64::from(RUNS_KEPT);
        let record = self.lease;
        if total > 0 && excess <= i64::from(PRUNE_SLACK) {
            return;
        }
        let all = self.keys.all();
        let found = conn.run(deadline, move |mut client| {
            let all = all.clone();
            async move {
                let options = GetOptions::new().with_prefix().with_keys_only();
                client.get(all, Some(options)).await
            }
        });
        let Ok(found) = found else { return };
        let (queue, runs) = (self.keys.queue(), self.keys.runs());
        let mut kept: Vec<&KeyValue> = found
            .kvs()
            .iter()
            .filter(|kv| !kv.key().starts_with(queue.as_bytes()))
            .collect();
        kept.sort_by_key(|kv| kv.create_revision());
        let mut old = Vec::new();
        let mut strays = Vec::new();
        for kv in kept {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            if kv.key().starts_with(runs.as_bytes()) && (old.len() as i64) < excess {
                old.push(key);
            } else if kv.lease() != record {
                strays.push(key);
            }
        }
        if !old.is_empty() || !strays.is_empty() {
            let _ = send_step(
                conn,
                &protocol::tidy(&self.keys, old, strays, record),
                deadline,
            );
        }
    }
}
