//! The record's node as a run and the admin commands read and write it: read whole, changed, and
//! written back guarded by the version read (a write that finds another's first reads again),
//! in one transaction with the change to the lock it goes with (a release's delete of the
//! run's entry). A record write never stops a lock: a failed one is the record's loss.
//!
//! Nothing is left for ever: the record is a TTL node of [`RECORD_TTL`] where the server has
//! them (`zookeeper.extendedTypesEnabled`), which the server deletes once it goes unwritten that
//! long; the lock's node above it is a container, deleted once its last child is. Where the
//! server has no TTL nodes, the record is a plain node.

use std::time::Instant;

use zookeeper_client::{Acls, CreateMode, Error, MultiWriteError, Stat};

use super::client::Conn;
use super::record::Record;
use crate::lock::record::RECORD_TTL;

/// How a write of the record with a lock's change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Done,
    /// The lock's change was refused (the entry to delete was gone): nothing was written.
    EntryGone,
}

/// The record node of one lock.
pub(crate) struct Recorder {
    /// `LOCK/record`.
    path: String,
    acls: Acls<'static>,
    /// The server makes TTL nodes (until it refuses one).
    ttl_nodes: bool,
}

/// How many times a write is made again after another client's came first.
const RETRIES: usize = 20;

impl Recorder {
    pub(crate) fn new(lock: &str, acls: Acls<'static>) -> Self {
        Self {
            path: format!("{lock}/{}", super::names::RECORD),
            acls,
            ttl_nodes: true,
        }
    }

    /// The record and its node's Stat (None: no record yet).
    pub(crate) fn read(
        &self,
        conn: &mut Conn,
        deadline: Instant,
    ) -> Result<(Record, Option<Stat>), Error> {
        let path = self.path.clone();
        match conn.run(deadline, |c| async move { c.get_data(&path).await }) {
            Ok((data, stat)) => Ok((Record::parse(&data), Some(stat))),
            Err(Error::NoNode) => Ok((Record::default(), None)),
            Err(err) => Err(err),
        }
    }

    /// `change` applied to the record and written, with `entry` (a child of the lock, guarded
    /// by its version 0) deleted in the same transaction when given.
    pub(crate) fn write(
        &mut self,
        conn: &mut Conn,
        deadline: Instant,
        entry: Option<&str>,
        change: impl Fn(&mut Record),
    ) -> Result<Written, Error> {
        for _ in 0..RETRIES {
            let (mut record, stat) = self.read(conn, deadline)?;
            change(&mut record);
            let data = record.to_bytes();
            let (path, entry) = (self.path.clone(), entry.map(str::to_owned));
            let ttl = self.ttl_nodes;
            let acls = self.acls;
            let written = conn.run(deadline, |c| async move {
                let mut txn = c.new_multi_writer();
                if let Some(entry) = &entry {
                    txn.add_delete(entry, Some(0))?;
                }
                match stat {
                    Some(stat) => txn.add_set_data(&path, &data, Some(stat.version))?,
                    None => {
                        let mut node = CreateMode::Persistent.with_acls(acls);
                        if ttl {
                            node = node.with_ttl(RECORD_TTL);
                        }
                        txn.add_create(&path, &data, &node)?;
                    }
                }
                match txn.commit().await {
                    Ok(_) => Ok(Written::Done),
                    Err(MultiWriteError::OperationFailed { index: 0, source })
                        if entry.is_some()
                            && matches!(source, Error::NoNode | Error::BadVersion) =>
                    {
                        Ok(Written::EntryGone)
                    }
                    Err(MultiWriteError::OperationFailed { source, .. }) => Err(source),
                    Err(MultiWriteError::RequestFailed { source }) => Err(source),
                }
            });
            match written {
                // Another client wrote the record first, or made it: read it again.
                Err(Error::BadVersion | Error::NodeExists | Error::NoNode) => continue,
                // A server without TTL nodes: a plain one.
                Err(Error::Unimplemented | Error::BadArguments(_)) if ttl => {
                    self.ttl_nodes = false;
                }
                other => return other,
            }
        }
        Err(Error::BadVersion)
    }
}
