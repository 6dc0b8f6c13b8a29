//! Who holds a lock kept as a queue of entries, decided from its entries alone (no I/O): the
//! consensus backends (etcd, ZooKeeper) give every client that holds or waits an entry (a key
//! under `BASE/q/` on etcd, a sequential node on ZooKeeper), and the entries in the order the
//! server made them (their create revisions; their sequence numbers) are the queue. First come,
//! first served by construction: a waiter never passes one that came before it, with or
//! without `--fair`.
//!
//! - Alone (no `--limit`, no `--shared`): the first entry holds. A waiter watches only the entry
//!   just ahead of it (no herd: one waiter wakes per release).
//! - `--limit N`: the first N hold. A waiter watches the whole queue, since any of the entries
//!   ahead leaving lets it move up.
//! - `--shared`: a shared entry holds when no exclusive entry is ahead of it; an exclusive one
//!   holds when it is first. A shared waiter watches the last exclusive entry ahead of it, an
//!   exclusive one the entry just ahead.
//!
//! A client of another kind than the entries' (another `--limit`, a semaphore against a lock) is
//! refused, as on Redis.

use crate::lock::{Forced, Held, HeldAs, Holder, Kind};

/// One entry of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    /// Its place in the queue, as the server numbered it: etcd's create revision (also the
    /// holder's fencing token), ZooKeeper's sequence number.
    pub rev: i64,
    /// How its client holds the lock (`lock`, `limit N`, `shared`), as stored.
    pub kind: String,
    /// Not redlock's: on etcd, its key names no lease, or its value is not a holder's; on
    /// ZooKeeper, its name is not one redlock gives.
    pub foreign: bool,
}

/// Where a client's entry stands in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// It holds the lock.
    Holds,
    /// It waits; what to watch for the change that may let it in.
    Behind(Watch),
    /// The other entries hold the lock another way.
    Mismatch(HeldAs),
}

/// What a waiter watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Watch {
    /// This key, until it is deleted.
    Key(String),
    /// The whole queue, until any entry ahead is deleted.
    Queue,
}

/// Where the entry numbered `ours` stands among `entries` (every entry of the queue, in any
/// order, ours included), for a client holding the lock as `kind`. An entry that is not there
/// (its lease ran out, its session ended) stands at the back.
pub(crate) fn place(entries: &[Entry], ours: i64, kind: Kind) -> Place {
    let mut queue: Vec<&Entry> = entries.iter().collect();
    queue.sort_by_key(|e| e.rev);
    if let Some(found) = mismatch(&queue, ours, kind) {
        return Place::Mismatch(found);
    }
    let ahead: Vec<&Entry> = queue.iter().copied().filter(|e| e.rev < ours).collect();
    match kind {
        Kind::Exclusive => match ahead.last() {
            None => Place::Holds,
            Some(next) => Place::Behind(Watch::Key(next.key.clone())),
        },
        Kind::Limit(n) if ahead.len() < n as usize => Place::Holds,
        Kind::Limit(_) => Place::Behind(Watch::Queue),
        Kind::Shared => match ahead.iter().rev().find(|e| e.kind != Kind::Shared.stored()) {
            None => Place::Holds,
            Some(writer) => Place::Behind(Watch::Key(writer.key.clone())),
        },
    }
}

/// How the other entries hold the lock, when a client of `kind` may not join them.
fn mismatch(queue: &[&Entry], ours: i64, kind: Kind) -> Option<HeldAs> {
    if let Some(entry) = queue.iter().find(|e| e.foreign && e.rev != ours) {
        return Some(HeldAs::Foreign(format!(
            "an entry in its queue ({})",
            entry.key
        )));
    }
    for entry in queue.iter().filter(|e| e.rev != ours) {
        let theirs = HeldAs::from_stored(&entry.kind);
        let fits = match theirs.kind() {
            Some(k) => {
                k == kind
                    || matches!((k, kind), (Kind::Exclusive, Kind::Shared))
                    || matches!((k, kind), (Kind::Shared, Kind::Exclusive))
            }
            None => false,
        };
        if !fits {
            return Some(theirs);
        }
    }
    None
}

/// The entries that hold the lock now, in the order of the queue.
pub(crate) fn holders(entries: &[Entry]) -> Vec<&Entry> {
    let mut queue: Vec<&Entry> = entries.iter().collect();
    queue.sort_by_key(|e| e.rev);
    let Some(first) = queue.first() else {
        return Vec::new();
    };
    match HeldAs::from_stored(&first.kind).kind() {
        Some(Kind::Limit(n)) => queue.into_iter().take(n as usize).collect(),
        Some(Kind::Shared) => queue
            .into_iter()
            .take_while(|e| e.kind == Kind::Shared.stored())
            .collect(),
        _ => vec![queue[0]],
    }
}

/// What a renewal or a release that does not hold the lock found, as the model says it: another
/// client's token where one exclusive entry holds the lock ([`Held::Theirs`]); else its place is
/// gone ([`Held::Gone`]: a free lock, or several holders). `ours`: the asking client's entry,
/// which holds nothing for it until its take has seen it at the head.
pub(crate) fn found(entries: &[Entry], ours: Option<i64>) -> Held {
    match holders(entries).as_slice() {
        [one] if one.kind == Kind::Exclusive.stored() && Some(one.rev) != ours => Held::Theirs,
        _ => Held::Gone,
    }
}

/// A client's token and details from its entry's value (JSON: `token`, `host`, `pid`,
/// `command`, `started`, as a client writes it), None for details where it names no host.
pub(crate) fn holder_of(value: &[u8]) -> (String, Option<Holder>) {
    let value: serde_json::Value = serde_json::from_slice(value).unwrap_or_default();
    let text = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or_default();
    let int = |name: &str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    let holder = (!text("host").is_empty()).then(|| Holder {
        host: text("host").to_owned(),
        pid: u32::try_from(int("pid")).unwrap_or(0),
        command: text("command").to_owned(),
        started: int("started"),
    });
    (text("token").to_owned(), holder)
}

/// What a forced release answers when no holder is the one asked for: the lock is free; it is
/// held by another token (`first`: the first holder's, `holders` of them); or the token is
/// not one of its holders'. `token`: a token was asked for; `several`: held by several.
pub(crate) fn unchosen(
    first: Option<String>,
    holders: usize,
    (token, several): (bool, bool),
    held_as: HeldAs,
    fence: i64,
) -> Forced {
    match (first, token, several) {
        (None, _, _) => Forced::Free { fence, cleared: 0 },
        (Some(token), true, false) => Forced::Other { token, fence },
        (Some(_), _, _) => Forced::NotAHolder {
            held_as,
            holders: holders as u64,
            fence,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rev: i64, kind: &str) -> Entry {
        Entry {
            key: format!("k/q/{rev}"),
            rev,
            kind: kind.into(),
            foreign: false,
        }
    }

    fn key(rev: i64) -> Place {
        Place::Behind(Watch::Key(format!("k/q/{rev}")))
    }

    /// The queue (the revision and kind of each entry), our revision, how we hold the lock,
    /// and where we stand.
    type Row = (&'static [(i64, &'static str)], i64, Kind, Place);

    #[test]
    fn where_an_entry_stands() {
        const L2: &str = "limit 2";
        const SH: &str = "shared";
        let rows: Vec<Row> = vec![
            (&[(5, "lock")], 5, Kind::Exclusive, Place::Holds),
            (&[(5, "lock"), (9, "lock")], 9, Kind::Exclusive, key(5)),
            // Only the entry just ahead is watched, whatever is further ahead.
            (
                &[(3, "lock"), (5, "lock"), (9, "lock")],
                9,
                Kind::Exclusive,
                key(5),
            ),
            (
                &[(3, "lock"), (5, "lock"), (9, "lock")],
                3,
                Kind::Exclusive,
                Place::Holds,
            ),
            // Our entry gone (its lease ran out): at the back.
            (&[(3, "lock"), (5, "lock")], 9, Kind::Exclusive, key(5)),
            (
                &[(3, L2), (5, L2), (9, L2)],
                5,
                Kind::Limit(2),
                Place::Holds,
            ),
            (
                &[(3, L2), (5, L2), (9, L2)],
                9,
                Kind::Limit(2),
                Place::Behind(Watch::Queue),
            ),
            // Readers beside readers; a writer alone; a reader behind a waiting writer waits.
            (&[(3, SH), (5, SH)], 5, Kind::Shared, Place::Holds),
            (&[(3, SH), (5, "lock"), (9, SH)], 9, Kind::Shared, key(5)),
            (&[(3, SH), (5, "lock")], 5, Kind::Exclusive, key(3)),
            (&[(3, "lock"), (5, SH), (7, SH)], 7, Kind::Shared, key(3)),
        ];
        for (spec, ours, kind, want) in rows {
            let queue: Vec<Entry> = spec.iter().map(|(rev, k)| entry(*rev, k)).collect();
            assert_eq!(place(&queue, ours, kind), want, "{queue:?} {ours} {kind:?}");
        }
    }

    #[test]
    fn other_kinds_are_refused_whatever_the_place() {
        const L2: &str = "limit 2";
        let mismatch = |kind| Place::Mismatch(HeldAs::Kind(kind));
        let rows: Vec<Row> = vec![
            (
                &[(3, "limit 3"), (5, L2)],
                5,
                Kind::Limit(2),
                mismatch(Kind::Limit(3)),
            ),
            (
                &[(3, "lock"), (5, L2)],
                5,
                Kind::Limit(2),
                mismatch(Kind::Exclusive),
            ),
            (
                &[(3, "shared"), (5, L2)],
                5,
                Kind::Limit(2),
                mismatch(Kind::Shared),
            ),
            (
                &[(3, "sorcery"), (5, "lock")],
                5,
                Kind::Exclusive,
                Place::Mismatch(HeldAs::Unknown("sorcery".into())),
            ),
        ];
        for (spec, ours, kind, want) in rows {
            let queue: Vec<Entry> = spec.iter().map(|(rev, k)| entry(*rev, k)).collect();
            assert_eq!(place(&queue, ours, kind), want, "{queue:?} {ours} {kind:?}");
        }
    }

    #[test]
    fn the_holders_are_the_queues_head() {
        let revs = |held: Vec<&Entry>| held.iter().map(|e| e.rev).collect::<Vec<_>>();
        assert_eq!(revs(holders(&[])), Vec::<i64>::new());
        let q = [entry(9, "lock"), entry(3, "lock")];
        assert_eq!(revs(holders(&q)), [3]);
        let q = [
            entry(9, "limit 2"),
            entry(3, "limit 2"),
            entry(4, "limit 2"),
        ];
        assert_eq!(revs(holders(&q)), [3, 4]);
        let q = [
            entry(3, "shared"),
            entry(4, "shared"),
            entry(5, "lock"),
            entry(6, "shared"),
        ];
        assert_eq!(revs(holders(&q)), [3, 4]);
    }

    #[test]
    fn a_lock_not_held_is_theirs_only_where_another_holds_it_alone() {
        assert_eq!(found(&[], None), Held::Gone);
        assert_eq!(
            found(&[entry(3, "lock"), entry(5, "lock")], None),
            Held::Theirs
        );
        // A waiter at the head has not taken the lock yet: nobody holds it.
        assert_eq!(
            found(&[entry(3, "lock"), entry(5, "lock")], Some(3)),
            Held::Gone
        );
        assert_eq!(found(&[entry(3, "lock")], Some(5)), Held::Theirs);
        assert_eq!(found(&[entry(3, "limit 2")], None), Held::Gone);
        assert_eq!(found(&[entry(3, "shared")], None), Held::Gone);
    }

    #[test]
    fn a_foreign_entry_refuses_every_kind_but_its_own_place() {
        let mut q = vec![entry(1, ""), entry(2, "lock")];
        q[0].foreign = true;
        q[0].key = "k/q/zzz".into();
        for kind in [Kind::Exclusive, Kind::Limit(3), Kind::Shared] {
            assert_eq!(
                place(&q, 2, kind),
                Place::Mismatch(HeldAs::Foreign("an entry in its queue (k/q/zzz)".into())),
                "{kind:?}"
            );
        }
    }
}
