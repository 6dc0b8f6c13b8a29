//! What the admin commands read and break on ZooKeeper: the locks under the prefix (the
//! children of its folder), a lock's state (its entries and their data, its record), its record
//! of runs, and a forced release (the holder's entry deleted: every entry made later has a
//! larger zxid, so the fencing token moves past the removed holder's).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use zookeeper_client::{Acls, CreateMode, Error, Stat};

use super::client::Conn;
use super::names;
use super::recorder::Recorder;
use super::url::Base;
use crate::backend::queue::{self, Entry};
use crate::backend::run_record::{self, now_ms};
use crate::lock::record::{Counts, RECORD_TTL};
use crate::lock::{
    Failure, Fence, Forced, HeldAs, Holder, Inspected, Kind, LockInfo, Node, Place, Runs, Several,
};

/// The admin commands' view of the locks under one prefix.
pub(crate) struct ZkNode {
    conn: Conn,
    base: Base,
    /// Whom the nodes it makes (the `fence` node) let in, as a run's.
    acls: Acls<'static>,
}

/// A lock as read: its node's Stat (None: no node), its entries in queue order with their
/// data, and its record with its counts.
struct Read {
    stat: Option<Stat>,
    /// Each child that is an entry, in the queue's order (foreign ones first), with its data
    /// and its creation zxid.
    entries: Vec<(Entry, Vec<u8>, i64)>,
    /// The children of the lock's node.
    children: Vec<String>,
    record: super::record::Record,
    counts: Counts,
}

impl Read {
    /// Every token given out later is larger than this: the largest holder's token while the
    /// lock is held (every waiter's entry came after, and has a larger zxid); else the zxid of
    /// the last change to the lock's children (0 where there is no node: any entry made is
    /// larger).
    fn fence(&self) -> i64 {
        let holding = queue::holders(&self.queue()).len();
        match self.entries[..holding]
            .iter()
            .map(|(_, _, czxid)| *czxid)
            .max()
        {
            Some(top) => top,
            None => self.stat.as_ref().map_or(0, |s| s.pzxid),
        }
    }

    fn queue(&self) -> Vec<Entry> {
        self.entries.iter().map(|(e, _, _)| e.clone()).collect()
    }

    fn runs(&self) -> Runs {
        let live: Vec<String> = self
            .entries
            .iter()
            .filter_map(|(e, _, _)| names::parse(&e.key).map(|n| n.token))
            .collect();
        let live: Vec<&str> = live.iter().map(String::as_str).collect();
        self.record.runs(&live, self.counts.clone(), now_ms())
    }
}

impl ZkNode {
    pub(crate) fn new(conn: Conn, base: Base, acls: Acls<'static>) -> Self {
        Self { conn, base, acls }
    }

    fn failure(&self, err: Error) -> Failure {
        self.conn.failure(err)
    }

    /// Lock `name` as it stands.
    fn read(&mut self, name: &str, deadline: Instant) -> Result<(String, Read), Failure> {
        let lock = self.base.lock(name);
        let path = lock.clone();
        let found = self
            .conn
            .run(deadline, |c| async move { c.get_children(&path).await });
        let (children, stat) = match found {
            Ok((children, stat)) => (children, Some(stat)),
            Err(Error::NoNode) => {
                self.conn.chroot_exists(deadline)?;
                (Vec::new(), None)
            }
            Err(err) => return Err(self.failure(err)),
        };
        let mut queue = names::entries(&children);
        queue.sort_by_key(|e| e.rev);
        let mut entries = Vec::with_capacity(queue.len());
        for entry in queue {
            let path = format!("{lock}/{}", entry.key);
            let data = match self
                .conn
                .run(deadline, |c| async move { c.get_data(&path).await })
            {
                Ok((data, stat)) => (data, stat.czxid),
                // Gone since the children were read: its client left.
                Err(Error::NoNode) => continue,
                Err(err) => return Err(self.failure(err)),
            };
            // Named as redlock names an entry, but holding no holder's record (no token): made
            // by hand, or by another program. Told as foreign, as etcd tells a key whose value
            // is not a holder's, rather than shown as a holder with no token.
            let mut entry = entry;
            entry.foreign |= queue::holder_of(&data.0).0.is_empty();
            entries.push((entry, data.0, data.1));
        }
        let recorder = Recorder::new(&lock, zookeeper_client::Acls::anyone_all());
        let (record, _) = recorder
            .read(&mut self.conn, deadline)
            .map_err(|e| self.failure(e))?;
        let counts = recorder
            .counts(&mut self.conn, deadline, &children)
            .map_err(|e| self.failure(e))?;
        Ok((
            lock,
            Read {
                stat,
                entries,
                children,
                record,
                counts,
            },
        ))
    }
}

/// The lease an entry's client asked for (its session's timeout): how long its lock outlives
/// it at most once it goes silent.
fn ttl_of(data: &[u8]) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_slice(data).ok()?;
    value
        .get("ttl_ms")
        .and_then(serde_json::Value::as_u64)
        .map(Duration::from_millis)
}

impl Node for ZkNode {
    fn names(&mut self, timeout: Duration) -> Result<BTreeSet<String>, Failure> {
        let deadline = Instant::now() + timeout;
        let folder = self.base.folder().to_owned();
        match self
            .conn
            .run(deadline, |c| async move { c.list_children(&folder).await })
        {
            Ok(children) => Ok(children
                .iter()
                .filter_map(|c| self.base.name_of(c))
                .collect()),
            Err(Error::NoNode) => {
                self.conn.chroot_exists(deadline)?;
                Ok(BTreeSet::new())
            }
            Err(err) => Err(self.failure(err)),
        }
    }

    fn inspect(&mut self, name: &str, timeout: Duration) -> Result<Inspected, Failure> {
        let (lock, read) = self.read(name, Instant::now() + timeout)?;
        if let Some((foreign, _, _)) = read.entries.iter().find(|(e, _, _)| e.foreign) {
            return Ok(Inspected::Foreign {
                stored_key: format!("{lock}/{}", foreign.key),
                what: "a node in its queue".to_owned(),
            });
        }
        let runs = read.runs();
        let holding = queue::holders(&read.queue()).len();
        let holders = &read.entries[..holding];
        let held_as = holders
            .first()
            .map(|(e, _, _)| HeldAs::from_stored(&e.kind))
            .unwrap_or(HeldAs::Kind(Kind::Exclusive));
        let mut info = LockInfo {
            stored_key: lock,
            fence: Fence::Counter(read.fence()),
            held: None,
            holder: None,
            several: None,
            done: read
                .record
                .last_success()
                .and_then(|v| run_record::done(&v, now_ms())),
            // Every waiter is in the queue, --fair or not: one count.
            queue: None,
            waiting: (read.entries.len() - holding) as u64,
            runs: runs.summary,
        };
        match held_as.kind() {
            Some(Kind::Limit(_) | Kind::Shared) => {
                let now = now_ms() / 1000;
                let places: Vec<Place> = holders
                    .iter()
                    .map(|(_, data, _)| {
                        let (token, holder) = queue::holder_of(data);
                        let age = holder
                            .as_ref()
                            .map(|h| Duration::from_secs(now - h.started.min(now)));
                        Place {
                            token,
                            lease: ttl_of(data).unwrap_or_default(),
                            holder,
                            age,
                        }
                    })
                    .collect();
                info.several = Some(Several {
                    held_as,
                    ttl: places.iter().map(|p| p.lease).max(),
                    places,
                });
            }
            _ => {
                if let Some((_, data, _)) = holders.first() {
                    let (token, holder) = queue::holder_of(data);
                    info.held = Some((token, ttl_of(data)));
                    info.holder = holder;
                }
            }
        }
        Ok(Inspected::Lock(Box::new(info)))
    }

    fn runs(&mut self, name: &str, timeout: Duration) -> Result<Runs, Failure> {
        let (_, read) = self.read(name, Instant::now() + timeout)?;
        Ok(read.runs())
    }

    fn force_release(
        &mut self,
        name: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        let deadline = Instant::now() + timeout;
        let (lock, read) = self.read(name, deadline)?;
        let fence = read.fence();
        if let Some((foreign, _, _)) = read.entries.iter().find(|(e, _, _)| e.foreign) {
            let what = format!("a node in its queue ({})", foreign.key);
            if token.is_some() {
                return Ok(Forced::Foreign {
                    what,
                    fence,
                    removed: false,
                });
            }
            let path = format!("{lock}/{}", foreign.key);
            let removed = self.delete_all(vec![path], &lock, &read.children, deadline)?;
            return Ok(Forced::Foreign {
                what,
                fence: removed.unwrap_or(fence),
                removed: removed.is_some(),
            });
        }
        let holders = &read.entries[..queue::holders(&read.queue()).len()];
        let held_as = holders
            .first()
            .map(|(e, _, _)| HeldAs::from_stored(&e.kind))
            .unwrap_or(HeldAs::Kind(Kind::Exclusive));
        let several = matches!(held_as.kind(), Some(Kind::Limit(_) | Kind::Shared));
        let chosen = match token {
            Some(token) => holders
                .iter()
                .find(|(_, data, _)| queue::holder_of(data).0 == token),
            None => holders.first(),
        };
        let Some((entry, data, _)) = chosen else {
            let first = holders.first().map(|(_, data, _)| queue::holder_of(data).0);
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
        // The holder's entry and every waiter's, in one transaction: a waiter's entry is older
        // than the delete, so its token would be smaller than the counter this reports. Each
        // waiter finds its entry gone as it next looks, and queues anew (the order of the
        // waiters may change), as on etcd.
        let waiting = read.entries[holders.len()..].iter().map(|(e, _, _)| &e.key);
        let doomed: Vec<String> = std::iter::once(&entry.key)
            .chain(waiting)
            .map(|key| format!("{lock}/{key}"))
            .collect();
        let Some(forced) = self.delete_all(doomed, &lock, &read.children, deadline)? else {
            // One left (or its session ended) between the read and the delete.
            return Ok(Forced::Free { fence, cleared: 0 });
        };
        let (removed, holder): (String, Option<Holder>) = queue::holder_of(data);
        // The delete's zxid, past the removed holder's token: every entry made after it, the
        // waiters' next ones included, has a larger one.
        Ok(Forced::Removed {
            token: removed,
            fence: forced,
            holder,
            held_as,
            left: holders.len().saturating_sub(1) as u64,
        })
    }
}

impl ZkNode {
    /// `paths` deleted whatever their versions, all or none, in one transaction that also
    /// writes the lock's `fence` node; its zxid (the fence node's, read back: waiters that
    /// queue again after it do not move it), or None when one was gone already.
    fn delete_all(
        &mut self,
        paths: Vec<String>,
        lock: &str,
        children: &[String],
        deadline: Instant,
    ) -> Result<Option<i64>, Failure> {
        let fence = format!("{lock}/{}", names::FENCE);
        let made = children.iter().any(|c| c == names::FENCE);
        // A TTL node as the record's (it goes 40 days after the last forced release), or a
        // plain one where the server has none.
        for ttl in [true, false] {
            let node = match ttl {
                true => CreateMode::Persistent
                    .with_acls(self.acls)
                    .with_ttl(RECORD_TTL),
                false => CreateMode::Persistent.with_acls(self.acls),
            };
            let (paths, written) = (paths.clone(), fence.clone());
            let deleted = self.conn.run(deadline, |c| async move {
                let mut txn = c.new_multi_writer();
                for path in &paths {
                    txn.add_delete(path, None)?;
                }
                match made {
                    true => txn.add_set_data(&written, b"", None)?,
                    false => txn.add_create(&written, b"", &node)?,
                }
                txn.commit().await.map(drop).map_err(Error::from)
            });
            match deleted {
                Ok(()) => break,
                Err(Error::NoNode | Error::NodeExists) => return Ok(None),
                Err(Error::Unimplemented | Error::BadArguments(_)) if ttl && !made => continue,
                Err(err) => return Err(self.failure(err)),
            }
        }
        let at = fence.clone();
        match self
            .conn
            .run(deadline, |c| async move { c.check_stat(&at).await })
        {
            Ok(stat) => Ok(stat.map(|s| s.mzxid)),
            Err(err) => Err(self.failure(err)),
        }
    }
}
