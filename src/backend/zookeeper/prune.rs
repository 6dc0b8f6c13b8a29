//! Lock names pruned where the server would keep them for ever: a server without TTL nodes
//! (`zookeeper.extendedTypesEnabled` off, ZooKeeper's default) makes the record, its counters
//! and `fence` plain nodes, and so did one that got TTL nodes later, for the names it had; the
//! lock's node (a container) stays as long as they do. So one release in [`PRUNE_EVERY`] also
//! removes other lock names of its folder unused for [`RECORD_TTL`], as PostgreSQL's releases
//! do, on every server (a client cannot tell a TTL node from a plain one).
//!
//! Unused is by the server's clock, never the host's: "now" is the modification time of the
//! record the release has just written, and a name is unused when the latest modification time
//! of its node and of every child is older than now less [`RECORD_TTL`]. A host whose clock is
//! wrong prunes nothing early.
//!
//! A name is removed only when it is redlock's as redlock leaves it: a lock node with no data
//! whose children are all the record's (`record`, `count-*`, `uncount-*`, `fence`), each as
//! redlock writes it (the record redlock's JSON, the others empty). An entry (a run holds or
//! waits), a foreign child, data on the node or a child redlock would not have written keeps
//! it, and so does a node with no child at all: a lock node of redlock's is a container, which
//! the server removes itself once empty, so an empty node is somebody else's. The
//! delete is one transaction: each child guarded by the version read, then the lock's node
//! guarded by its own. A run that starts on the name meanwhile (its entry: the node is not
//! empty; a write of the record or a counter: a version moved) makes it fail whole, and nothing
//! is deleted.
//!
//! The decision ([`candidates`], [`doomed`]) is pure; [`prune`] reads and deletes, each step's
//! requests all sent before any answer is awaited: the folder's children, the names' children,
//! their Stats, the deletes, four round trips whatever the number of names. The next holder
//! does not wait for it: the run's entry is gone by then.

use std::time::Instant;

use zookeeper_client::{Client, Error, MultiWriteError, Stat};

use super::client::Conn;
use super::names;
use super::url::Base;
use crate::lock::record::RECORD_TTL;

/// One release in this many prunes: sampled at random ([`sampled`]), not from the fencing token
/// as on PostgreSQL, where tokens step by one per run. A zxid steps by every transaction of the
/// ensemble (several per run, and every other client's), so its remainder is no fair sample.
pub(crate) const PRUNE_EVERY: u64 = 16;

/// At most this many names removed by one prune: 32 in 16 releases is two per release, more
/// than the one a run can make, so that names used once each are kept up with (PostgreSQL's
/// figure).
pub(crate) const PRUNE_LIMIT: usize = 32;

/// At most this many names of the folder looked at by one prune, a window that starts at
/// random: a folder of thousands of names costs a prune no more than one of 64, and every
/// name is looked at sooner or later.
pub(crate) const EXAMINED: usize = 64;

/// Whether a release prunes, from a random number: one in [`PRUNE_EVERY`].
pub(crate) fn sampled(random: u64) -> bool {
    random.is_multiple_of(PRUNE_EVERY)
}

/// The lock nodes (paths) a prune looks at among `children`, the folder's: those named as
/// `base` names a lock, but `own` (the releasing run's lock), sorted; a window of [`EXAMINED`]
/// from `start` (taken modulo their number), wrapping round.
pub(crate) fn candidates(base: &Base, own: &str, children: &[String], start: usize) -> Vec<String> {
    let mut paths: Vec<String> = children
        .iter()
        .filter_map(|child| base.name_of(child))
        // `{}`: no name a run can have (the command line refuses an empty one).
        .filter(|name| !name.is_empty())
        .map(|name| base.lock(&name))
        .filter(|path| path != own)
        .collect();
    paths.sort();
    if paths.is_empty() {
        return paths;
    }
    let start = start % paths.len();
    paths.rotate_left(start);
    paths.truncate(EXAMINED);
    paths
}

/// What a prune read of a node: its data's version, its modification time (the server's
/// clock, ms), and whether its data is what redlock writes there ([`as_redlock_writes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub version: i32,
    pub mtime: i64,
    pub redlocks: bool,
}

impl Seen {
    fn of(stat: &Stat, redlocks: bool) -> Seen {
        Seen {
            version: stat.version,
            mtime: stat.mtime,
            redlocks,
        }
    }
}

/// Whether `data` is what redlock writes in the lock's child `child` (None: the lock's node
/// itself): the record, a JSON object with its `runs`; every other node (the lock's, a
/// counter, `fence`) empty.
pub(crate) fn as_redlock_writes(child: Option<&str>, data: &[u8]) -> bool {
    match child {
        Some(names::RECORD) => serde_json::from_slice::<serde_json::Value>(data)
            .is_ok_and(|v| v.get("runs").is_some_and(serde_json::Value::is_array)),
        _ => data.is_empty(),
    }
}

/// A lock node as read: its own [`Seen`], and each child's (None: gone when read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Looked {
    pub path: String,
    pub node: Seen,
    pub children: Vec<(String, Option<Seen>)>,
}

/// A lock node to delete, its children first, each guarded by the version read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Doomed {
    pub path: String,
    pub version: i32,
    pub children: Vec<(String, i32)>,
}

/// Whether a lock node's `children` are all the record's: only then are their times worth
/// reading.
pub(crate) fn only_the_records(children: &[String]) -> bool {
    children.iter().all(|c| names::of_the_record(c))
}

/// The lock nodes to delete among `looked`, `now_ms` by the server's clock: those redlock left
/// as it leaves them (the node and every child as redlock writes them, every child the
/// record's and there when read, at least one), and whose latest modification time (its own,
/// its children's) is older than `now_ms` less [`RECORD_TTL`]. The oldest first, at most
/// [`PRUNE_LIMIT`].
pub(crate) fn doomed(now_ms: i64, looked: Vec<Looked>) -> Vec<Doomed> {
    let ttl = i64::try_from(RECORD_TTL.as_millis()).unwrap_or(i64::MAX);
    let before = now_ms.saturating_sub(ttl);
    let mut doomed: Vec<(i64, Doomed)> = looked
        .into_iter()
        .filter_map(|node| {
            let names: Vec<String> = node.children.iter().map(|(c, _)| c.clone()).collect();
            if !only_the_records(&names) || names.is_empty() || !node.node.redlocks {
                return None;
            }
            let mut last = node.node.mtime;
            let mut children = Vec::with_capacity(node.children.len());
            for (child, seen) in node.children {
                let seen = seen.filter(|s| s.redlocks)?;
                last = last.max(seen.mtime);
                children.push((child, seen.version));
            }
            (last < before).then(|| {
                let doomed = Doomed {
                    path: node.path,
                    version: node.node.version,
                    children,
                };
                (last, doomed)
            })
        })
        .collect();
    doomed.sort_by_key(|(last, _)| *last);
    doomed.truncate(PRUNE_LIMIT);
    doomed.into_iter().map(|(_, d)| d).collect()
}

/// Removes other lock names of `base`'s folder than `own` unused for [`RECORD_TTL`] by the
/// server's clock (`now_ms`: the modification time of a node the run has just written), at
/// most [`PRUNE_LIMIT`]. Answers how many were removed; a name whose delete fails (a run
/// started on it, it went meanwhile, another user's) is left, and is no error.
pub(crate) fn prune(
    conn: &mut Conn,
    base: &Base,
    own: &str,
    now_ms: i64,
    deadline: Instant,
) -> Result<usize, Error> {
    let folder = base.folder().to_owned();
    let children = match conn.run(deadline, |c| async move { c.list_children(&folder).await }) {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(0),
        Err(err) => return Err(err),
    };
    let start = uuid::Uuid::new_v4().as_u128() as usize;
    let paths = candidates(base, own, &children, start);
    if paths.is_empty() {
        return Ok(0);
    }
    let looked = conn.run(deadline, |c| async move { look(&c, paths).await })?;
    let doomed = doomed(now_ms, looked);
    if doomed.is_empty() {
        return Ok(0);
    }
    conn.run(deadline, |c| async move { delete(&c, &doomed).await })
}

/// The lock nodes of `paths` whose children are all the record's, as read: every node's
/// children asked for at once, then every such child's data and Stat at once (a record is a
/// few KiB; the other children are empty). A node gone, or one this user may not read, is
/// left out.
async fn look(c: &Client, paths: Vec<String>) -> Result<Vec<Looked>, Error> {
    let listed: Vec<_> = paths.iter().map(|path| c.get_children(path)).collect();
    let mut nodes = Vec::new();
    for (path, listed) in paths.into_iter().zip(listed) {
        match listed.await {
            Ok((children, stat)) if only_the_records(&children) => {
                let node = Seen::of(&stat, stat.data_length == 0);
                nodes.push((path, node, children));
            }
            Ok(_) | Err(Error::NoNode | Error::NoAuth) => {}
            Err(err) => return Err(err),
        }
    }
    let reads: Vec<Vec<_>> = nodes
        .iter()
        .map(|(path, _, children)| {
            let read = |child: &String| c.get_data(&format!("{path}/{child}"));
            children.iter().map(read).collect()
        })
        .collect();
    let mut looked = Vec::with_capacity(nodes.len());
    for ((path, node, children), reads) in nodes.into_iter().zip(reads) {
        let mut seen = Vec::with_capacity(children.len());
        for (child, read) in children.into_iter().zip(reads) {
            let read = match read.await {
                Ok((data, stat)) => Some(Seen::of(&stat, as_redlock_writes(Some(&child), &data))),
                Err(Error::NoNode | Error::NoAuth) => None,
                Err(err) => return Err(err),
            };
            seen.push((child, read));
        }
        looked.push(Looked {
            path,
            node,
            children: seen,
        });
    }
    Ok(looked)
}

/// Each of `doomed` deleted in a transaction of its own, all sent at once: how many went.
async fn delete(c: &Client, doomed: &[Doomed]) -> Result<usize, Error> {
    let mut commits = Vec::with_capacity(doomed.len());
    for node in doomed {
        let mut txn = c.new_multi_writer();
        for (child, version) in &node.children {
            txn.add_delete(&format!("{}/{child}", node.path), Some(*version))?;
        }
        txn.add_delete(&node.path, Some(node.version))?;
        commits.push(txn.commit());
    }
    let mut removed = 0;
    for commit in commits {
        match commit.await {
            Ok(_) => removed += 1,
            // A version moved, a child came, the node went, another user's: left as it is.
            Err(MultiWriteError::OperationFailed { .. }) => {}
            Err(MultiWriteError::RequestFailed { source }) => return Err(source),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600 * 1000;
    const NOW: i64 = 1_000 * DAY;

    fn seen(version: i32, days_ago: i64) -> Option<Seen> {
        Some(Seen {
            version,
            mtime: NOW - days_ago * DAY,
            redlocks: true,
        })
    }

    /// A lock node last changed `days_ago`, with `children` as (name, version, days ago).
    fn looked(path: &str, days_ago: i64, children: &[(&str, Option<Seen>)]) -> Looked {
        Looked {
            path: path.to_owned(),
            node: seen(0, days_ago).unwrap(),
            children: children
                .iter()
                .map(|(c, s)| ((*c).to_owned(), *s))
                .collect(),
        }
    }

    #[test]
    fn a_name_unused_for_the_records_lifetime_by_the_servers_clock_is_doomed() {
        let old = [
            ("record", seen(7, 41)),
            ("count-success", seen(3, 41)),
            ("uncount-vanished", seen(1, 45)),
            ("fence", seen(0, 50)),
        ];
        assert_eq!(
            doomed(NOW, vec![looked("/redlock:{old}", 60, &old)]),
            [Doomed {
                path: "/redlock:{old}".into(),
                version: 0,
                children: vec![
                    ("record".into(), 7),
                    ("count-success".into(), 3),
                    ("uncount-vanished".into(), 1),
                    ("fence".into(), 0),
                ],
            }]
        );
        // One child written within the lifetime keeps it: a busy count, say.
        let mut young = old;
        young[1].1 = seen(4, 39);
        assert_eq!(doomed(NOW, vec![looked("/a", 60, &young)]), []);
        // Exactly the lifetime ago is not older than it.
        let edge = [("record", seen(1, 40))];
        assert_eq!(doomed(NOW, vec![looked("/a", 40, &edge)]), []);
        // A node with no child is not redlock's (the server removes its empty containers),
        // however old.
        assert_eq!(doomed(NOW, vec![looked("/a", 90, &[])]), []);
    }

    #[test]
    fn data_redlock_would_not_have_written_keeps_a_name() {
        let children = [("record", seen(1, 90)), ("count-busy", seen(2, 90))];
        assert_eq!(doomed(NOW, vec![looked("/a", 90, &children)]).len(), 1);
        // Data on the lock's node.
        let mut node = looked("/a", 90, &children);
        node.node.redlocks = false;
        assert_eq!(doomed(NOW, vec![node]), []);
        // A child's data.
        for i in 0..children.len() {
            let mut node = looked("/a", 90, &children);
            node.children[i].1.as_mut().unwrap().redlocks = false;
            assert_eq!(doomed(NOW, vec![node]), [], "{}", children[i].0);
        }
    }

    #[test]
    fn what_redlock_writes_in_each_node() {
        let record = br#"{"runs":[],"last_success":null,"last_ended":null}"#;
        assert!(as_redlock_writes(Some("record"), record));
        assert!(as_redlock_writes(
            Some("record"),
            br#"{"runs":[{"token":"t"}]}"#
        ));
        for data in [&b""[..], b"not json at all", b"{}", br#"{"runs":3}"#, b"[]"] {
            assert!(!as_redlock_writes(Some("record"), data), "{data:?}");
        }
        for child in [
            None,
            Some("count-busy"),
            Some("uncount-vanished"),
            Some("fence"),
        ] {
            assert!(as_redlock_writes(child, b""), "{child:?}");
            assert!(!as_redlock_writes(child, b"x"), "{child:?}");
        }
    }

    #[test]
    fn an_entry_a_stranger_or_a_child_gone_keeps_a_name() {
        for child in [
            "lock-0b9c7e4e-5a2e-4f0e-9d7c-2b1e3c4d5e6f-0000000007",
            "limit3-t-0000000001",
            "shared-t-0000000001",
            "x",
            "records",
        ] {
            let children = [("record", seen(1, 90)), (child, seen(0, 90))];
            assert_eq!(
                doomed(NOW, vec![looked("/a", 90, &children)]),
                [],
                "{child}"
            );
        }
        let gone = [("record", seen(1, 90)), ("count-busy", None)];
        assert_eq!(doomed(NOW, vec![looked("/a", 90, &gone)]), []);
    }

    #[test]
    fn the_oldest_go_first_and_no_more_than_the_limit() {
        let looked: Vec<Looked> = (0..PRUNE_LIMIT as i64 + 5)
            .map(|i| looked(&format!("/n{i}"), 41 + i, &[("record", seen(1, 41 + i))]))
            .collect();
        let gone = doomed(NOW, looked);
        assert_eq!(gone.len(), PRUNE_LIMIT);
        assert_eq!(gone[0].path, format!("/n{}", PRUNE_LIMIT + 4));
        assert_eq!(gone[PRUNE_LIMIT - 1].path, "/n5");
    }

    #[test]
    fn only_the_folders_lock_nodes_but_ones_own_are_candidates() {
        let base = super::super::url::base("", "redlock:").unwrap();
        let children: Vec<String> = [
            "redlock:{b}",
            "redlock:{a}",
            "redlock:{own}",
            "redlock:b",
            "other:{a}",
            "redlock:{%41}",
            "redlock:{}",
            "zookeeper",
        ]
        .map(String::from)
        .to_vec();
        let own = base.lock("own");
        assert_eq!(
            candidates(&base, &own, &children, 0),
            ["/redlock:{a}", "/redlock:{b}"]
        );
        assert_eq!(
            candidates(&base, &own, &children, 3),
            ["/redlock:{b}", "/redlock:{a}"]
        );
        let jobs = super::super::url::base("", "jobs/").unwrap();
        let many: Vec<String> = (0..EXAMINED + 10).map(|i| format!("{{n{i:03}}}")).collect();
        let window = candidates(&jobs, "/jobs/{x}", &many, EXAMINED);
        assert_eq!(window.len(), EXAMINED);
        assert_eq!(window[0], format!("/jobs/{{n{EXAMINED:03}}}"));
        assert_eq!(
            window[EXAMINED - 1],
            format!("/jobs/{{n{:03}}}", EXAMINED - 11)
        );
    }

    #[test]
    fn one_release_in_sixteen_prunes() {
        let pruning = (0..1600u64).filter(|r| sampled(*r)).count();
        assert_eq!(pruning, 100);
    }
}
