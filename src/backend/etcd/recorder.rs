//! The record of a lock's runs, as a run writes it: the name's record lease found, or granted and
//! named in `BASE/record` when there is none (the first use of the name, or its first use
//! [`RECORD_TTL`] after the last); every record write attached to it; counts; a vanished run
//! marked; a lost run's end written; the oldest runs pruned and keys that no lease holds (a 0.3
//! client's) adopted. A record write never stops a lock: a failed one is the record's loss.
//!
//! A write whose record lease is gone (the name unused for [`RECORD_TTL`] while a run held it,
//! or the lease revoked by hand) is made once more with a new one.

use std::time::{Duration, Instant};

use etcd_client::{
    Client, Error, GetOptions, KeyValue, LeaseGrantOptions, TxnOpResponse, TxnResponse,
};

use super::client::Conn;
use super::keys::Keys;
use super::protocol::{self, Step};
use super::record;
use crate::lock::Failure;
use crate::lock::record::{RECORD_TTL, RUNS_KEPT};

/// The least time a count is given, whatever the step it closes has left (a run turned away
/// without `--wait` has 100 ms for its whole leave): a count is one request.
const COUNT_TIME: Duration = Duration::from_secs(1);

/// How many runs past [`RUNS_KEPT`] a lock's record may hold before a take prunes it: a prune
/// is a request of its own, made every few runs rather than every run.
const PRUNE_SLACK: u32 = 5;

/// The record of one lock name, as a client writes it.
pub(super) struct Recorder {
    keys: Keys,
    /// The name's record lease, once found or granted.
    lease: Option<i64>,
    /// The lease was found, not granted here, and is not kept alive yet.
    found: bool,
}

/// `step` sent within `deadline`. None: a lease it writes with is gone (etcd refuses the whole
/// transaction).
pub(super) fn send(
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

/// A lease kept alive once: false when it is gone.
pub(super) async fn keep_alive(mut client: Client, lease: i64) -> Result<bool, Error> {
    match client.lease_keep_alive(lease).await {
        Ok(_) => Ok(true),
        // The only error of this kind a first keep-alive gives: the lease is gone.
        Err(Error::LeaseKeepAliveError(_)) => Ok(false),
        Err(err) => Err(err),
    }
}

/// The first key a transaction's answer read.
fn first_kv(response: &TxnResponse) -> Option<KeyValue> {
    response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().cloned(),
        _ => None,
    })
}

impl Recorder {
    pub(super) fn new(keys: Keys) -> Self {
        Self {
            keys,
            lease: None,
            found: false,
        }
    }

    /// The record lease, if known.
    pub(super) fn lease(&self) -> Option<i64> {
        self.lease
    }

    /// The lease found, and not yet kept alive by this client: the next take keeps it alive.
    pub(super) fn due(&self) -> Option<i64> {
        self.lease.filter(|_| self.found)
    }

    /// What a read of `BASE/record` found (None: nothing), and whether the lease it names was
    /// then kept alive (`kept`).
    pub(super) fn read(&mut self, kv: Option<&KeyValue>) {
        if let Some(lease) =
            kv.and_then(|kv| protocol::record_of(kv.value()).filter(|l| *l == kv.lease()))
        {
            self.lease = Some(lease);
            self.found = true;
        }
    }

    /// The lease was kept alive (true) or found gone (false).
    pub(super) fn kept(&mut self, alive: bool) {
        self.found = false;
        if !alive {
            self.lease = None;
        }
    }

    /// The record lease, found or granted within `deadline`.
    pub(super) fn ensure(&mut self, conn: &mut Conn, deadline: Instant) -> Result<i64, Failure> {
        if let Some(lease) = self.lease {
            return Ok(lease);
        }
        let key = self.keys.record();
        let found = conn.run(deadline, move |mut client| {
            let key = key.clone();
            async move { client.get(key, None).await }
        })?;
        self.read(found.kvs().first());
        if let Some(lease) = self.lease {
            return Ok(lease);
        }
        let secs = RECORD_TTL.as_secs() as i64;
        let granted = conn.run(deadline, move |mut client| async move {
            client
                .lease_grant(secs, None::<LeaseGrantOptions>)
                .await
                .map(|r| r.id())
        })?;
        let claimed = send(conn, &protocol::claim_record(&self.keys, granted), deadline)?;
        // Theirs only if it names the lease it is attached to: anything else there (not
        // redlock's) is left, and the record lives on ours, unnamed.
        let theirs = claimed.as_ref().filter(|r| !r.succeeded()).map(|r| {
            first_kv(r).and_then(|kv| protocol::record_of(kv.value()).filter(|l| *l == kv.lease()))
        });
        match theirs {
            // Another client named one first: ours goes.
            Some(Some(theirs)) => {
                conn.ask_once(deadline, move |mut client| async move {
                    client.lease_revoke(granted).await.map(drop)
                });
                self.lease = Some(theirs);
            }
            _ => {
                self.lease = Some(granted);
                // What the record holds from before (a 0.3 client's keys) goes with it.
                self.tidy(conn, 0, deadline);
            }
        }
        self.found = false;
        Ok(self.lease.unwrap_or(granted))
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
            match send(conn, &build(&self.keys, lease), deadline)? {
                Some(response) => return Ok(response),
                None => self.lease = None,
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
        let Some(record) = self.lease else { return };
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
            let _ = send(
                conn,
                &protocol::tidy(&self.keys, old, strays, record),
                deadline,
            );
        }
    }
}
