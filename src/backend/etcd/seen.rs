//! What a take's look at the queue found ([`Seen`], read from the answer to
//! [`protocol::take`](super::protocol::take)), the queue's entries as `queue` decides on them,
//! and this host's clock.

use etcd_client::{KeyValue, TxnOpResponse, TxnResponse};

use super::keys::Keys;
use crate::backend::queue::Entry;

/// What one read of the queue found.
pub(super) struct Seen {
    /// The queue, in order.
    pub queue: Vec<Entry>,
    /// Our entry's create revision (None: not there).
    pub ours: Option<i64>,
    /// The revision the read was made at.
    pub revision: i64,
    /// The run's record was written with the entry (nobody else was queued).
    pub recorded: bool,
    pub last_success: Option<Vec<u8>>,
    /// When the record's lease was last kept alive (unix ms), if it says.
    pub kept_ms: Option<u64>,
    /// The newest runs' records (up to two), newest first, this run's own left out.
    pub runs: Vec<KeyValue>,
    /// How many runs the record holds, this run's own included once it is written.
    pub runs_total: i64,
}

impl Seen {
    /// From the answer to [`protocol::take`]: its gets are the queue, the last success, when
    /// the record's lease was last kept alive, and the newest runs.
    pub(super) fn read(response: &TxnResponse, entry: &str, recorded: bool) -> Seen {
        let revision = response.header().map_or(0, |h| h.revision());
        let gets: Vec<(Vec<KeyValue>, i64)> = response
            .op_responses()
            .into_iter()
            .filter_map(|op| match op {
                TxnOpResponse::Get(get) => Some((get.kvs().to_vec(), get.count())),
                _ => None,
            })
            .collect();
        let runs_total = gets.last().map_or(0, |(_, count)| *count) + i64::from(!recorded);
        let mut gets = gets.into_iter().map(|(kvs, _)| kvs);
        let queue: Vec<Entry> = gets
            .next()
            .unwrap_or_default()
            .iter()
            .map(entry_of)
            .collect();
        let first = |gets: &mut dyn Iterator<Item = Vec<KeyValue>>| {
            gets.next()
                .and_then(|kvs| kvs.first().map(|kv| kv.value().to_vec()))
        };
        let last_success = first(&mut gets);
        let kept_ms = first(&mut gets)
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|v| v.parse().ok());
        let runs = gets
            .next()
            .unwrap_or_default()
            .into_iter()
            // Not our own run's record, written in this very transaction.
            .filter(|kv| recorded.then_some(kv.create_revision()) != Some(revision))
            .collect();
        let ours = queue.iter().find(|e| e.key == entry).map(|e| e.rev);
        Seen {
            queue,
            ours,
            revision,
            recorded,
            last_success,
            kept_ms,
            runs,
            runs_total,
        }
    }
}

/// The queue as the first get of a transaction's answer read it (a look, a give-up, a release
/// that found the entry gone); empty when it read none.
pub(super) fn queue_of(response: &TxnResponse) -> Vec<Entry> {
    let get = response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => Some(get),
        _ => None,
    });
    get.map_or_else(Vec::new, |get| get.kvs().iter().map(entry_of).collect())
}

/// An entry of the queue from its key and value.
pub(crate) fn entry_of(kv: &KeyValue) -> Entry {
    let value = serde_json::from_slice::<serde_json::Value>(kv.value()).ok();
    let kind = value
        .as_ref()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_default();
    let token = value.as_ref().and_then(|v| v.get("token")).is_some();
    Entry {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        rev: kv.create_revision(),
        kind,
        foreign: !token || Keys::lease_of(kv.key()).is_none(),
    }
}
