//! The client's entry in the lock's queue: made (with the queue and the record read in the
//! same round trip), or found after a create whose answer was lost, in a session whose timeout
//! the lease fits in. A child of `locker`, so that the locker's fields stay private to both.

use std::future::Future;
use std::time::{Duration, Instant};

use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, Error};

use super::{Own, ZkLocker};
use crate::backend::zookeeper::names::{self, Named};
use crate::lock::Failure;

impl ZkLocker {
    /// The client's entry made (or, after a create that went unanswered, found), in the
    /// session open now, the session checked against the lease first; with the lock's children.
    pub(super) fn join(
        &mut self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<(Own, Vec<String>), Failure> {
        let (own, listed) = self.made_or_found(ttl, deadline)?;
        let children = match listed {
            Some(children) => children,
            // Read again, for an entry made by an earlier attempt (a waiter's): the record the
            // create's round trip read may have changed since (the holder's release wrote it),
            // and the next write reads it first. Not read here: it would lengthen the
            // hand-over, and the record's write comes after the command's start.
            None => {
                self.recorder.forget();
                self.children(deadline)?
            }
        };
        Ok((own, children))
    }

    /// The entry, and the lock's children when they were read in its create's round trip.
    fn made_or_found(
        &mut self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<(Own, Option<Vec<String>>), Failure> {
        if let Some(own) = self.live_entry() {
            return Ok((own.clone(), None));
        }
        self.entry = None;
        self.taken = None;
        let client = self
            .conn
            .client(deadline)
            .map_err(|e| self.conn.failure(e))?;
        self.check_session(&client, ttl)?;
        if self.unanswered {
            let children = self.children(deadline)?;
            if let Some((name, named)) = names::find(&children, &self.token) {
                let name = name.to_owned();
                return Ok((self.adopt(name, named, deadline)?, None));
            }
            self.unanswered = false;
        }
        let prefix = self.path(&names::entry_prefix(self.kind, &self.token));
        let data = self.entry_value();
        for _ in 0..3 {
            let (lock, acls, record) = (self.lock.clone(), self.acls, self.recorder.record_path());
            let (prefix, data) = (prefix.clone(), data.clone());
            let created = self.conn.run(deadline, |c| async move {
                let entry = CreateMode::EphemeralSequential.with_acls(acls);
                // The queue and the record read in the create's round trip (the children read
                // include the entry): two round trips fewer per run.
                let create = |c| create_and_look(c, (&prefix, &data, &entry), &lock, &record);
                match create(&c).await {
                    // The lock's node is made when first used, and deleted by the server
                    // (a container) once its last child is gone: made again, and the entry
                    // with it.
                    (Err(Error::NoNode), _, _) => match make_lock_node(&c, &lock, acls).await {
                        Ok(()) => Ok(Some(create(&c).await)),
                        // zookeeper-client's mkdir: the chroot itself is not there.
                        Err(Error::NoNode) => Ok(None),
                        Err(err) => Err(err),
                    },
                    done => Ok(Some(done)),
                }
            });
            let created = match created {
                Ok(None) => return Err(self.conn.no_chroot()),
                Ok(Some((created, listed, read))) => created.map(|c| (c, listed, read)),
                Err(err) => Err(err),
            };
            match created {
                Ok(((stat, seq), listed, read)) => {
                    let seq = seq.into_i64();
                    let name = format!("{}{seq:010}", names::entry_prefix(self.kind, &self.token));
                    let own = Own {
                        name,
                        seq,
                        czxid: stat.czxid,
                        session: self.conn.session(),
                        made: Some(Instant::now()),
                    };
                    self.entry = Some(own.clone());
                    self.recorder.prime(read);
                    // A read that failed is made again on its own.
                    return Ok((own, listed.ok()));
                }
                // The container was deleted between the two creates: once more.
                Err(Error::NoNode) => continue,
                Err(err @ (Error::Timeout | Error::ConnectionLoss)) => {
                    self.unanswered = true;
                    return Err(self.conn.failure(err));
                }
                Err(err) => return Err(self.conn.failure(err)),
            }
        }
        Err(Failure::Unreachable(
            format!(
                "ZooKeeper at {} deleted the lock's node {} under each of three creates",
                self.conn.shown(),
                self.lock
            )
            .into(),
        ))
    }

    /// The entry of this client that a create made although its answer never came.
    fn adopt(&mut self, name: String, named: Named, deadline: Instant) -> Result<Own, Failure> {
        let path = self.path(&name);
        let stat = self
            .conn
            .run(deadline, |c| async move { c.check_stat(&path).await })
            .map_err(|e| self.conn.failure(e))?;
        self.unanswered = false;
        let Some(stat) = stat else {
            // Gone meanwhile: a new one is made on the next attempt.
            return Err(Failure::Unreachable(
                format!("the run's entry {name} went while it was read").into(),
            ));
        };
        let own = Own {
            name,
            seq: named.seq,
            czxid: stat.czxid,
            session: self.conn.session(),
            made: None,
        };
        self.entry = Some(own.clone());
        Ok(own)
    }

    /// A session the ensemble gave shorter than the lease is refused: the lease would count
    /// on the entry past the session's end.
    fn check_session(&self, client: &Client, ttl: Duration) -> Result<(), Failure> {
        let given = client.session_timeout();
        if given < ttl {
            return Err(Failure::Refused(
                format!(
                    "ZooKeeper at {} gives sessions of at most {} (its maxSessionTimeout), \
                     shorter than --ttl {}: give --ttl {} or less, or raise maxSessionTimeout",
                    self.conn.shown(),
                    humantime::format_duration(given),
                    humantime::format_duration(ttl),
                    humantime::format_duration(given),
                )
                .into(),
            ));
        }
        Ok(())
    }
}

/// The entry created (`entry`: its path's prefix, its data, how it is made), and the lock's
/// children and the record read, in one round trip: each request is sent as it is made, and a
/// member answers a session's requests in order.
#[allow(clippy::type_complexity)]
fn create_and_look<'a>(
    client: &'a Client,
    (prefix, data, options): (&'a str, &[u8], &CreateOptions<'_>),
    lock: &'a str,
    record: &'a str,
) -> impl Future<
    Output = (
        Result<(zookeeper_client::Stat, zookeeper_client::CreateSequence), Error>,
        Result<Vec<String>, Error>,
        Result<(Vec<u8>, zookeeper_client::Stat), Error>,
    ),
> + 'a {
    let created = client.create(prefix, data, options);
    let (listed, read) = (client.list_children(lock), client.get_data(record));
    async move { tokio::join!(created, listed, read) }
}

/// The lock's node, a container, made with the folders above it (containers too: the server
/// deletes each once its last child is gone).
async fn make_lock_node(client: &Client, lock: &str, acls: Acls<'_>) -> Result<(), Error> {
    client
        .mkdir(lock, &CreateMode::Container.with_acls(acls))
        .await
}
