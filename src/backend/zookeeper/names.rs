//! The children of a lock's node on ZooKeeper, by name (no I/O): a client's entry in the queue
//! is an ephemeral sequential node named `KIND-TOKEN-SEQUENCE`, so that one read of the
//! children tells who is queued, in what order and how each holds the lock, and a client
//! whose create went unanswered finds its own entry by its token (Curator's "protected" mode).
//!
//! | child | what | kind of node |
//! |---|---|---|
//! | `lock-TOKEN-0000000007` | an exclusive client (`limit3-`, `shared-` for the others) | ephemeral, sequential |
//! | `record` | the record of the lock's runs (`record`) | persistent, with a TTL where the server has them |
//! | `count-LABEL`, `uncount-LABEL` | a counter of the record, and counts taken back: the node's version is the count | as `record` |
//! | `fence` | the last `release --force`: its last change's zxid is the fence it gave | persistent |
//!
//! KIND is `lock`, `limitN` or `shared` ([`Kind::stored`] without its space); TOKEN the run's
//! owner token (a UUID: letters, digits and dashes); SEQUENCE the ten digits ZooKeeper appends,
//! which order the queue. Any other child is foreign: redlock did not make it.

use crate::backend::queue::Entry;
use crate::lock::Kind;

/// The record's child.
pub(crate) const RECORD: &str = "record";

/// The child a forced release writes in its transaction: its zxid is the fence it gave.
pub(crate) const FENCE: &str = "fence";

/// The child that counts `label`, or (`up` false) takes counts of it back.
pub(crate) fn counter(label: &str, up: bool) -> String {
    format!("{}{label}", if up { COUNT } else { UNCOUNT })
}

const COUNT: &str = "count-";
const UNCOUNT: &str = "uncount-";

/// The label a child counts, and whether it counts up; None for a child that is no counter.
pub(crate) fn counted(child: &str) -> Option<(&str, bool)> {
    match child.strip_prefix(COUNT) {
        Some(label) => Some((label, true)),
        None => child.strip_prefix(UNCOUNT).map(|label| (label, false)),
    }
}

/// Whether a child is the record's (the record, or a counter), not a client's entry.
pub(crate) fn of_the_record(child: &str) -> bool {
    child == RECORD || child == FENCE || counted(child).is_some()
}

/// What ZooKeeper is given to name a client's entry: `KIND-TOKEN-`, to which it appends the
/// sequence.
pub(crate) fn entry_prefix(kind: Kind, token: &str) -> String {
    format!("{}-{token}-", kind.stored().replace(' ', ""))
}

/// A client's entry, read from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    /// How it holds the lock, as [`Kind::stored`] says it (`limit 3`).
    pub kind: String,
    pub token: String,
    pub seq: i64,
}

/// The entry a child's name is, if it is one.
pub(crate) fn parse(child: &str) -> Option<Named> {
    let (rest, seq) = child.rsplit_once('-')?;
    if seq.len() < 10 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (kind, token) = rest.split_once('-')?;
    let kind = match kind {
        "lock" | "shared" => kind.to_owned(),
        _ => {
            let n: u32 = kind.strip_prefix("limit")?.parse().ok()?;
            format!("limit {n}")
        }
    };
    if token.is_empty() {
        return None;
    }
    Some(Named {
        kind,
        token: token.to_owned(),
        seq: seq.parse().ok()?,
    })
}

/// The queue of a lock from its children's names: each entry, and each child that is neither
/// an entry nor the record as a foreign one (at the front, so that it is seen).
pub(crate) fn entries(children: &[String]) -> Vec<Entry> {
    children
        .iter()
        .filter(|c| !of_the_record(c))
        .map(|child| match parse(child) {
            Some(named) => Entry {
                key: child.clone(),
                rev: named.seq,
                kind: named.kind,
                foreign: false,
            },
            None => Entry {
                key: child.clone(),
                rev: -1,
                kind: String::new(),
                foreign: true,
            },
        })
        .collect()
}

/// The entry of `token` among `children`, if one is there.
pub(crate) fn find<'a>(children: &'a [String], token: &str) -> Option<(&'a str, Named)> {
    children.iter().find_map(|child| {
        let named = parse(child)?;
        (named.token == token).then_some((child.as_str(), named))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_named_by_its_kind_token_and_sequence() {
        let token = "0b9c7e4e-5a2e-4f0e-9d7c-2b1e3c4d5e6f";
        let name = format!("{}0000000042", entry_prefix(Kind::Limit(3), token));
        assert_eq!(name, format!("limit3-{token}-0000000042"));
        let named = parse(&name).unwrap();
        assert_eq!(named.kind, "limit 3");
        assert_eq!(named.token, token);
        assert_eq!(named.seq, 42);
        for kind in [Kind::Exclusive, Kind::Shared, Kind::Limit(1)] {
            let name = format!("{}2147483647", entry_prefix(kind, token));
            assert_eq!(parse(&name).unwrap().kind, kind.stored());
        }
        for foreign in [
            "record",
            "lock-0000000001",
            "lock-abc-12",
            "limit-abc-0000000001",
            "limitx-abc-0000000001",
            "other-abc-0000000001",
            "lock-abc-00000000x1",
            "_c_4f0e-lock-abc-",
        ] {
            assert_eq!(parse(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn the_queue_is_the_entries_and_a_stranger_is_foreign() {
        let children: Vec<String> = [
            "record",
            "count-busy",
            "uncount-vanished",
            "lock-a-0000000002",
            "lock-b-0000000001",
            "x",
        ]
        .map(String::from)
        .to_vec();
        let queue = entries(&children);
        assert_eq!(queue.len(), 3);
        assert_eq!((queue[0].rev, queue[1].rev), (2, 1));
        assert!(queue[2].foreign);
        assert_eq!(find(&children, "b").unwrap().1.seq, 1);
        assert_eq!(find(&children, "c"), None);
        assert_eq!(counted(&counter("busy", true)), Some(("busy", true)));
        assert_eq!(
            counted(&counter("vanished", false)),
            Some(("vanished", false))
        );
        assert_eq!(counted("record"), None);
    }
}
