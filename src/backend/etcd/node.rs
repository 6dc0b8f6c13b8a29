//! What the admin commands read of locks on etcd, or break: a lock's whole range read in one
//! request (its queue, its record), the holders' leases asked for what is left of them, and a
//! forced release (the holder's entry deleted, guarded by its create revision, and its lease
//! revoked, so that its renewals fail and its command is stopped).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use etcd_client::{GetOptions, KeyValue, LeaseTimeToLiveOptions};

use super::client::Conn;
use super::keys::Keys;
use super::protocol;
use super::record;
use super::recorder::Recorder;
use super::seen::entry_of;
use crate::backend::queue::{self, Entry};
use crate::backend::run_record::now_ms;
use crate::lock::Fence;
use crate::lock::{
    Failure, Forced, HeldAs, Holder, Inspected, Kind, LockInfo, Node, Place, Runs, Several,
};

/// The cluster, as the admin commands read it.
pub(crate) struct EtcdNode {
    conn: Conn,
    prefix: String,
}

/// A lock's whole range, as one read found it.
struct Range {
    queue: Vec<(Entry, KeyValue)>,
    record: record::Read,
    /// The cluster's revision when it was read.
    revision: i64,
    /// The last forced release's fence (`BASE/fence`'s mod revision), if one is kept.
    forced: Option<i64>,
}

impl Range {
    /// The fencing counter the admin commands show: the last token given out for the lock (its
    /// newest run's, or a holder's), or with none recorded (never taken, or its keys deleted)
    /// the cluster's revision, which the next token exceeds as it exceeds every earlier one.
    /// A forced release's fence counts as one given out.
    fn fence(&self, runs: &Runs, holders: &[i64]) -> i64 {
        runs.runs
            .iter()
            .map(|r| r.fence)
            .chain(holders.iter().copied())
            .chain(self.forced)
            .max()
            .unwrap_or(self.revision)
    }
}

impl EtcdNode {
    pub(crate) fn new(conn: Conn, prefix: String) -> Self {
        Self { conn, prefix }
    }

    /// Every key of lock `name`, in one request.
    fn range(&mut self, name: &str, timeout: Duration) -> Result<(Keys, Range), Failure> {
        let keys = Keys::new(&self.prefix, name);
        let all = keys.all();
        let found = self.conn.run(Instant::now() + timeout, move |mut client| {
            let all = all.clone();
            async move { client.get(all, Some(GetOptions::new().with_prefix())).await }
        })?;
        let (queue_at, runs_at) = (keys.queue(), keys.runs());
        let (counts_at, uncounts_at) = (keys.counts(), keys.uncounts());
        let mut queue = Vec::new();
        let mut read = record::Read::default();
        let mut entries_leases = BTreeSet::new();
        let mut forced = None;
        for kv in found.kvs() {
            let key = String::from_utf8_lossy(kv.key());
            if key.starts_with(&queue_at) {
                if let Some(lease) = Keys::lease_of(kv.key()) {
                    entries_leases.insert(lease);
                }
                queue.push((entry_of(kv), kv.clone()));
            }
        }
        for kv in found.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            if let Some(lease) = key.strip_prefix(&runs_at) {
                let lease = u64::from_str_radix(lease, 16).map(|l| l as i64).ok();
                let running = lease.is_some_and(|l| entries_leases.contains(&l));
                read.runs
                    .push((kv.value().to_vec(), kv.create_revision(), running));
            } else if key == keys.last_success() {
                read.last_success = Some(kv.value().to_vec());
            } else if key == keys.fence() {
                forced = Some(kv.mod_revision());
            } else if key == keys.last_ended() {
                read.last_ended = Some(kv.value().to_vec());
            } else if let Some(label) = key.strip_prefix(&counts_at) {
                read.counts.push((label.to_owned(), kv.version()));
            } else if let Some(label) = key.strip_prefix(&uncounts_at) {
                read.counts.push((label.to_owned(), -kv.version()));
            }
        }
        queue.sort_by_key(|(e, _)| e.rev);
        Ok((
            keys,
            Range {
                queue,
                record: read,
                revision: found.header().map_or(0, |h| h.revision()),
                forced,
            },
        ))
    }

    /// What is left of lease `id`, by the cluster's count (None: gone, or not answered).
    fn lease_left(&mut self, id: i64, timeout: Duration) -> Option<Duration> {
        let left = self
            .conn
            .run(Instant::now() + timeout, move |mut client| async move {
                client
                    .lease_time_to_live(id, None::<LeaseTimeToLiveOptions>)
                    .await
                    .map(|r| r.ttl())
            });
        left.ok()
            .filter(|ttl| *ttl > 0)
            .map(|ttl| Duration::from_secs(ttl as u64))
    }

    /// A holder's entry deleted, guarded by its create revision, with the entries waiting
    /// behind it ([`protocol::force`]), and its lease revoked, so that its renewals fail and its
    /// command is stopped. The fence: the delete's revision; None when it was gone already.
    fn remove(
        &mut self,
        keys: &Keys,
        (entry, kv): (&Entry, &KeyValue),
        waiting: Vec<(String, i64)>,
        deadline: Instant,
    ) -> Result<Option<i64>, Failure> {
        let holder = (entry.key.clone(), entry.rev);
        let done = Recorder::new(keys.clone()).send(&mut self.conn, deadline, |keys, record| {
            protocol::force(keys, holder.clone(), waiting.clone(), record)
        })?;
        if !done.succeeded() {
            return Ok(None);
        }
        if let Some(lease) = Keys::lease_of(kv.key()) {
            // Its renewals fail from now on, and its command is stopped; gone already is fine.
            let _ = self.conn.run(deadline, move |mut client| async move {
                client.lease_revoke(lease).await.map(drop)
            });
        }
        Ok(done.header().map(|h| h.revision()))
    }

    /// The holders' tokens, details and what is left of their leases, into `info`: one holder,
    /// or the places of a semaphore or a shared lock.
    fn holders_into(
        &mut self,
        info: &mut LockInfo,
        range: &Range,
        holding: usize,
        held_as: HeldAs,
        timeout: Duration,
    ) {
        let leases: Vec<(i64, KeyValue)> = range
            .queue
            .iter()
            .take(holding)
            .filter_map(|(_, kv)| Keys::lease_of(kv.key()).map(|l| (l, kv.clone())))
            .collect();
        match held_as.kind() {
            Some(Kind::Limit(_) | Kind::Shared) if !leases.is_empty() => {
                let mut places = Vec::new();
                for (lease, kv) in &leases {
                    let (token, holder) = holder_of(kv);
                    let age = holder.as_ref().map(|h| {
                        Duration::from_secs(now_ms() / 1000 - h.started.min(now_ms() / 1000))
                    });
                    places.push(Place {
                        token,
                        lease: self.lease_left(*lease, timeout).unwrap_or_default(),
                        holder,
                        age,
                    });
                }
                places.sort_by_key(|p| p.lease);
                info.several = Some(Several {
                    held_as,
                    ttl: places.last().map(|p| p.lease),
                    places,
                });
            }
            _ => {
                if let Some((lease, kv)) = leases.first() {
                    let (token, holder) = holder_of(kv);
                    info.held = Some((token, self.lease_left(*lease, timeout)));
                    info.holder = holder;
                }
            }
        }
    }
}

/// A holder's details from its entry's value.
fn holder_of(kv: &KeyValue) -> (String, Option<Holder>) {
    queue::holder_of(kv.value())
}

impl Node for EtcdNode {
    fn names(&mut self, timeout: Duration) -> Result<BTreeSet<String>, Failure> {
        let prefix = self.prefix.clone();
        let found = self.conn.run(Instant::now() + timeout, move |mut client| {
            let prefix = prefix.clone();
            async move {
                client
                    .get(
                        prefix,
                        Some(GetOptions::new().with_prefix().with_keys_only()),
                    )
                    .await
            }
        })?;
        Ok(found
            .kvs()
            .iter()
            .filter(|kv| String::from_utf8_lossy(kv.key()).contains("/q/"))
            .filter_map(|kv| Keys::name_of(&self.prefix, kv.key()))
            .collect())
    }

    fn inspect(&mut self, name: &str, timeout: Duration) -> Result<Inspected, Failure> {
        let (keys, range) = self.range(name, timeout)?;
        let runs = range.record.runs(now_ms());
        let entries: Vec<Entry> = range.queue.iter().map(|(e, _)| e.clone()).collect();
        if let Some(foreign) = entries.iter().find(|e| e.foreign) {
            return Ok(Inspected::Foreign {
                stored_key: foreign.key.clone(),
                what: "an entry in its queue".to_owned(),
            });
        }
        let holding: Vec<&Entry> = queue::holders(&entries);
        let revs: Vec<i64> = holding.iter().map(|e| e.rev).collect();
        let fence = range.fence(&runs, &revs);
        let held_as = holding
            .first()
            .map(|e| HeldAs::from_stored(&e.kind))
            .unwrap_or(HeldAs::Kind(Kind::Exclusive));
        let waiting = entries.len().saturating_sub(holding.len()) as u64;
        let mut info = LockInfo {
            stored_key: keys.all(),
            fence: Fence::Counter(fence),
            held: None,
            holder: None,
            several: None,
            done: range
                .record
                .last_success
                .as_deref()
                .and_then(|v| record::done(v, now_ms())),
            // Every waiter on etcd is in its first-come-first-served queue, --fair or not: one
            // count, not a "fair queue" line that names an option the runs did not give.
            queue: None,
            waiting,
            runs: runs.summary,
        };
        self.holders_into(&mut info, &range, holding.len(), held_as, timeout);
        Ok(Inspected::Lock(Box::new(info)))
    }

    fn runs(&mut self, name: &str, timeout: Duration) -> Result<Runs, Failure> {
        let (_, range) = self.range(name, timeout)?;
        Ok(range.record.runs(now_ms()))
    }

    fn force_release(
        &mut self,
        name: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        // This command writes: a refusal advises readwrite.
        self.conn.writes();
        let deadline = Instant::now() + timeout;
        let (keys, range) = self.range(name, timeout)?;
        let entries: Vec<Entry> = range.queue.iter().map(|(e, _)| e.clone()).collect();
        let holding = queue::holders(&entries).len();
        let holders: Vec<&(Entry, KeyValue)> = range.queue.iter().take(holding).collect();
        let revs: Vec<i64> = holders.iter().map(|(e, _)| e.rev).collect();
        let fence = range.fence(&range.record.runs(now_ms()), &revs);
        let held_as = holders
            .first()
            .map(|(e, _)| HeldAs::from_stored(&e.kind))
            .unwrap_or(HeldAs::Kind(Kind::Exclusive));
        let several = matches!(held_as.kind(), Some(Kind::Limit(_) | Kind::Shared));
        let chosen = match token {
            Some(token) => holders.iter().find(|(_, kv)| holder_of(kv).0 == token),
            None => holders.first(),
        };
        let Some((entry, kv)) = chosen else {
            let first = holders.first().map(|(_, kv)| holder_of(kv).0);
            let asked = (token.is_some(), several);
            return Ok(queue::unchosen(first, holders.len(), asked, held_as, fence));
        };
        if several && token.is_none() && holders.len() > 1 {
            return Ok(Forced::Several {
                held_as,
                holders: holders.len() as u64,
                fence,
            });
        }
        let waiting = entries[holding..]
            .iter()
            .map(|e| (e.key.clone(), e.rev))
            .collect();
        let Some(forced) = self.remove(&keys, (entry, kv), waiting, deadline)? else {
            // It left (or its lease ended) between the read and the delete.
            return Ok(Forced::Free { fence, cleared: 0 });
        };
        let (removed, holder) = holder_of(kv);
        // The counter a resource may hold the next holders to: the delete's revision, past the
        // removed holder's token. Every token given out after it is larger: the waiters queue
        // again behind it.
        Ok(Forced::Removed {
            token: removed,
            fence: forced,
            holder,
            held_as,
            left: holders.len().saturating_sub(1) as u64,
        })
    }
}
