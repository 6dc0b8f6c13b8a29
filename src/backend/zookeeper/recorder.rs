//! The record's nodes as a run and the admin commands read and write them: the record read
//! whole, changed, and written back guarded by the version read (a write that finds another's
//! first reads again), in one transaction with what the change counts (an unguarded write to
//! each counter, whose version is the count) and the change to the lock it goes with (a
//! release's delete of the run's entry). A record write never stops a lock: a failed one is
//! the record's loss.
//!
//! Nothing is left for ever: the record and its counters are TTL nodes of [`RECORD_TTL`] where
//! the server has them (`zookeeper.extendedTypesEnabled`), which the server deletes once they
//! go unwritten that long; the lock's node above them is a container, deleted once its last
//! child is. Where the server has no TTL nodes, they are plain nodes; so are those a name got
//! before its server was given TTL nodes. For them, one release in 16 removes other names of
//! its folder unused for [`RECORD_TTL`] by the server's clock (`prune`), whatever the server.

use std::time::Instant;

use zookeeper_client::{
    Acls, CreateMode, CreateOptions, Error, MultiWriteError, MultiWriteResult, Stat,
};

use super::client::Conn;
use super::names;
use super::record::{Counted, Record};
use crate::lock::record::{Counts, RECORD_TTL};

/// How a write of the record with a lock's change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// Written: the record's node as the write left it (None where the server's answer did not
    /// say, as some servers' answer to a create in a transaction does not).
    Done(Option<Stat>),
    /// The lock's change was refused (the entry to delete was gone): nothing was written.
    EntryGone,
}

/// The record's nodes of one lock.
pub(crate) struct Recorder {
    /// The lock's node.
    lock: String,
    acls: Acls<'static>,
    /// The server makes TTL nodes (until it refuses one).
    ttl_nodes: bool,
    /// The record as this recorder last wrote it, or as a take read it beside the queue, with
    /// its node's version (None: there was no node): the next write starts from it rather than
    /// from a read of its own (a round trip less). Written guarded by that version, so that if
    /// another client wrote meanwhile the write is refused, and the record read.
    known: Option<(Record, Option<i32>)>,
}

/// How many times a write is made again after another client's came first, or after a counter
/// it counts was made.
const RETRIES: usize = 30;

/// Why a transaction of the record's was refused.
enum Refused {
    /// The entry to delete was gone.
    Entry,
    /// The record changed since it was read, or was made meanwhile.
    Record,
    /// A counter is not there yet: its name.
    Counter(String),
    /// TTL nodes are not enabled on the server.
    NoTtl,
    Other(Error),
}

impl Recorder {
    pub(crate) fn new(lock: &str, acls: Acls<'static>) -> Self {
        Self {
            lock: lock.to_owned(),
            acls,
            ttl_nodes: true,
            known: None,
        }
    }

    fn path(&self, child: &str) -> String {
        format!("{}/{child}", self.lock)
    }

    /// How the record's nodes are made: persistent, with a TTL while the server takes them.
    fn node(&self) -> CreateOptions<'static> {
        let node = CreateMode::Persistent.with_acls(self.acls);
        match self.ttl_nodes {
            true => node.with_ttl(RECORD_TTL),
            false => node,
        }
    }

    /// The record's path, for a read sent beside another request ([`Recorder::prime`]).
    pub(crate) fn record_path(&self) -> String {
        self.path(names::RECORD)
    }

    /// The next write starts from `read`, the answer to a read of [`Recorder::record_path`]
    /// that was sent beside another request (the entry's create).
    pub(crate) fn prime(&mut self, read: Result<(Vec<u8>, Stat), Error>) {
        self.known = match read {
            Ok((data, stat)) => Some((Record::parse(&data), Some(stat.version))),
            Err(Error::NoNode) => Some((Record::default(), None)),
            Err(_) => None,
        };
    }

    /// The record this recorder knows forgotten: the next write reads it first.
    pub(crate) fn forget(&mut self) {
        self.known = None;
    }

    /// The record and its node's Stat (None: no record yet).
    pub(crate) fn read(
        &self,
        conn: &mut Conn,
        deadline: Instant,
    ) -> Result<(Record, Option<Stat>), Error> {
        let path = self.path(names::RECORD);
        match conn.run(deadline, |c| async move { c.get_data(&path).await }) {
            Ok((data, stat)) => Ok((Record::parse(&data), Some(stat))),
            Err(Error::NoNode) => Ok((Record::default(), None)),
            Err(err) => Err(err),
        }
    }

    /// `change` applied to the record and written, with what it counts, and with `entry` (a
    /// child of the lock, guarded by its version 0) deleted in the same transaction when given.
    pub(crate) fn write(
        &mut self,
        conn: &mut Conn,
        deadline: Instant,
        entry: Option<&str>,
        change: impl Fn(&mut Record) -> Counted,
    ) -> Result<Written, Error> {
        for _ in 0..RETRIES {
            let (mut record, version) = match self.known.take() {
                Some(known) => known,
                None => {
                    let (record, stat) = self.read(conn, deadline)?;
                    (record, stat.map(|s| s.version))
                }
            };
            let counted = change(&mut record);
            let written = (record.to_bytes(), version);
            match self.commit(conn, deadline, entry, Some(written), &counted)? {
                Ok(stat) => {
                    self.known = stat.map(|stat| (record, Some(stat.version)));
                    return Ok(Written::Done(stat));
                }
                Err(Refused::Entry) => return Ok(Written::EntryGone),
                Err(refused) => self.mend(conn, deadline, refused)?,
            }
        }
        Err(Error::BadVersion)
    }

    /// One more of `label` (a busy run, a skipped one), the record left as it is.
    pub(crate) fn count(
        &mut self,
        conn: &mut Conn,
        deadline: Instant,
        label: &str,
    ) -> Result<(), Error> {
        let counted = Counted {
            up: vec![label.to_owned()],
            down: Vec::new(),
        };
        for _ in 0..RETRIES {
            match self.commit(conn, deadline, None, None, &counted)? {
                Ok(_) => return Ok(()),
                Err(refused) => self.mend(conn, deadline, refused)?,
            }
        }
        Err(Error::BadVersion)
    }

    /// After a refusal that another try may get past: the counter made, or TTL nodes given up.
    fn mend(&mut self, conn: &mut Conn, deadline: Instant, refused: Refused) -> Result<(), Error> {
        match refused {
            Refused::Counter(child) => {
                let (path, node) = (self.path(&child), self.node());
                match conn.run(
                    deadline,
                    |c| async move { c.create(&path, b"", &node).await },
                ) {
                    Ok(_) | Err(Error::NodeExists) => Ok(()),
                    Err(Error::Unimplemented | Error::BadArguments(_)) if self.ttl_nodes => {
                        self.ttl_nodes = false;
                        Ok(())
                    }
                    Err(err) => Err(err),
                }
            }
            Refused::NoTtl => {
                self.ttl_nodes = false;
                Ok(())
            }
            Refused::Record | Refused::Entry => Ok(()),
            Refused::Other(err) => Err(err),
        }
    }

    /// One transaction: `entry` deleted, the record written (`record`: its data and the version
    /// it was read at, None when there was none), each counter of `counted` written once. Done,
    /// it answers the record's Stat as written (None: not written, or not said).
    fn commit(
        &self,
        conn: &mut Conn,
        deadline: Instant,
        entry: Option<&str>,
        record: Option<(Vec<u8>, Option<i32>)>,
        counted: &Counted,
    ) -> Result<Result<Option<Stat>, Refused>, Error> {
        let mut ops: Vec<Op> = Vec::new();
        if let Some(entry) = entry {
            ops.push(Op::Delete(entry.to_owned()));
        }
        if let Some((data, version)) = record {
            let path = self.path(names::RECORD);
            ops.push(match version {
                Some(version) => Op::Set(path, data, Some(version)),
                None => Op::Create(path, data),
            });
        }
        let counters = counted
            .up
            .iter()
            .map(|l| names::counter(l, true))
            .chain(counted.down.iter().map(|l| names::counter(l, false)));
        for child in counters {
            ops.push(Op::Set(self.path(&child), Vec::new(), None));
        }
        let node = self.node();
        let sent = ops.clone();
        let done = conn.run(deadline, |c| async move {
            let mut txn = c.new_multi_writer();
            for op in &sent {
                match op {
                    Op::Delete(path) => txn.add_delete(path, Some(0))?,
                    Op::Set(path, data, version) => txn.add_set_data(path, data, *version)?,
                    Op::Create(path, data) => txn.add_create(path, data, &node)?,
                }
            }
            match txn.commit().await {
                Ok(results) => Ok(Ok(results)),
                Err(MultiWriteError::OperationFailed { index, source }) => Ok(Err((index, source))),
                Err(MultiWriteError::RequestFailed { source }) => Err(source),
            }
        });
        let (index, source) = match done {
            Ok(Ok(results)) => {
                // The record's operation comes after the entry's delete, when there is one.
                let (at, record) = (usize::from(entry.is_some()), self.path(names::RECORD));
                let stat = match (ops.get(at), results.into_iter().nth(at)) {
                    (Some(Op::Set(path, ..) | Op::Create(path, _)), Some(result))
                        if *path == record =>
                    {
                        match result {
                            MultiWriteResult::SetData { stat }
                            | MultiWriteResult::Create { stat, .. } => {
                                Some(stat).filter(|s| !s.is_invalid())
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                return Ok(Ok(stat));
            }
            Ok(Err(failed)) => failed,
            Err(Error::Unimplemented | Error::BadArguments(_)) if self.ttl_nodes => {
                return Ok(Err(Refused::NoTtl));
            }
            Err(err) => return Err(err),
        };
        Ok(Err(match (ops.get(index), source) {
            (Some(Op::Delete(_)), Error::NoNode | Error::BadVersion) => Refused::Entry,
            (Some(Op::Set(..) | Op::Create(..)), Error::BadVersion | Error::NodeExists)
                if index <= usize::from(entry.is_some()) =>
            {
                Refused::Record
            }
            (Some(Op::Set(path, _, None)), Error::NoNode) => {
                Refused::Counter(path.rsplit('/').next().unwrap_or_default().to_owned())
            }
            (Some(Op::Set(..)), Error::NoNode) => Refused::Record,
            (Some(Op::Create(..)), Error::Unimplemented | Error::BadArguments(_)) => Refused::NoTtl,
            (_, err) => Refused::Other(err),
        }))
    }

    /// The counts of the record, from the lock's `children` (each counter's version, less what
    /// was taken back).
    pub(crate) fn counts(
        &self,
        conn: &mut Conn,
        deadline: Instant,
        children: &[String],
    ) -> Result<Counts, Error> {
        let mut counts = std::collections::BTreeMap::<String, i64>::new();
        for child in children {
            let Some((label, up)) = names::counted(child) else {
                continue;
            };
            let path = self.path(child);
            let version = match conn.run(deadline, |c| async move { c.check_stat(&path).await })? {
                Some(stat) => i64::from(stat.version),
                None => continue,
            };
            *counts.entry(label.to_owned()).or_default() += if up { version } else { -version };
        }
        Ok(Counts(
            counts
                .into_iter()
                .map(|(label, n)| (label, n.max(0) as u64))
                .collect(),
        ))
    }
}

/// An operation of a record's transaction.
#[derive(Clone)]
enum Op {
    /// An entry, guarded by its version 0.
    Delete(String),
    /// Data written, guarded by the version given (none: a counter).
    Set(String, Vec<u8>, Option<i32>),
    Create(String, Vec<u8>),
}
