//! The lock protocol on etcd as data: each step's transaction (what it compares, what it does
//! when the comparisons hold, what otherwise), built by pure functions from plain inputs, so that
//! the whole protocol reads on one screen and is tested without a server. `steps` sends them.
//!
//! Every key a lock name leaves outlives no lease: a client's entry has the client's lease, and
//! the record (runs, summary, counters) has the name's record lease, granted for [`RECORD_TTL`]
//! and kept alive by the name's runs (once an hour at most), so that the record goes
//! [`RECORD_TTL`] after the name's last use, less up to an hour, as on Redis.
//!
//! A counter is the version of its key (etcd adds one to a key's version at each put, however
//! many clients put at once): a count is one unconditional put, exact under any number of
//! writers, never a compare-and-swap retried. The one count taken back (a run marked vanished
//! that turns out lost) is a put on `BASE/uncount/LABEL`, whose version is subtracted.
//!
//! [`RECORD_TTL`]: crate::lock::record::RECORD_TTL

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};

use super::keys::Keys;

/// One transaction: `then` if every comparison of `when` holds, else `otherwise`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Step {
    pub when: Vec<Cmp>,
    pub then: Vec<Op>,
    pub otherwise: Vec<Op>,
}

/// A comparison of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cmp {
    /// The key's create revision is this (0: the key is absent).
    Created(String, i64),
    /// The key's mod revision is this.
    Modified(String, i64),
    /// No key under this prefix.
    NoneUnder(String),
}

/// An operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    /// The key set to the value, attached to the lease.
    Put {
        key: String,
        value: String,
        lease: i64,
    },
    /// The key attached to the lease, its value kept.
    Adopt {
        key: String,
        lease: i64,
    },
    Delete(String),
    Get(String, Read),
    /// A transaction inside this one.
    Txn(Box<Step>),
}

/// What a get reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    /// The key alone.
    Key,
    /// Every key under the prefix, oldest first.
    Oldest,
    /// The newest keys under the prefix (by create revision), at most this many; the answer
    /// counts them all.
    Newest(i64),
}

/// A count is a put: its value says so, the key's version is the count.
pub(super) const ONE: &str = "+1";

fn put(key: String, value: impl Into<String>, lease: i64) -> Op {
    Op::Put {
        key,
        value: value.into(),
        lease,
    }
}

/// What a take reads in its transaction, in this order: the queue, the last success, when the
/// record's lease was last kept alive, the newest two runs (the one before ours, and ours when
/// the take writes it).
fn reads(keys: &Keys) -> Vec<Op> {
    vec![
        Op::Get(keys.queue(), Read::Oldest),
        Op::Get(keys.last_success(), Read::Key),
        Op::Get(keys.kept(), Read::Key),
        Op::Get(keys.runs(), Read::Newest(2)),
    ]
}

/// The record's lease was kept alive at `now_ms`: so says `BASE/kept`.
pub(super) fn kept(keys: &Keys, now_ms: u64, record: i64) -> Step {
    Step {
        then: vec![put(keys.kept(), now_ms.to_string(), record)],
        ..Step::default()
    }
}

/// How a client takes its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Join {
    /// Its entry is there already: a look at the queue.
    Look,
    /// Its entry put if absent.
    Queue { lease: i64, entry: String },
    /// Its entry put if absent, and with nobody queued the run's record with it (`run`: its
    /// value; `record`: the name's record lease): one request takes the lock.
    Fast {
        lease: i64,
        entry: String,
        run: String,
        record: i64,
    },
}

/// A take: a client's entry put if absent (with the run's record when it is alone), then the
/// queue, the last success and the newest runs read.
pub(super) fn take(keys: &Keys, join: Join) -> Step {
    let queue_up = |lease: i64, entry: String| {
        Op::Txn(Box::new(Step {
            when: vec![Cmp::Created(keys.entry(lease), 0)],
            then: vec![put(keys.entry(lease), entry, lease)],
            otherwise: vec![],
        }))
    };
    match join {
        Join::Look => Step {
            then: reads(keys),
            ..Step::default()
        },
        Join::Queue { lease, entry } => Step {
            then: [vec![queue_up(lease, entry)], reads(keys)].concat(),
            ..Step::default()
        },
        Join::Fast {
            lease,
            entry,
            run,
            record,
        } => Step {
            when: vec![Cmp::NoneUnder(keys.queue())],
            then: [
                vec![
                    put(keys.entry(lease), entry.clone(), lease),
                    put(keys.run(lease), run, record),
                ],
                reads(keys),
            ]
            .concat(),
            otherwise: [vec![queue_up(lease, entry)], reads(keys)].concat(),
        },
    }
}

/// The entry of `lease` deleted if it is still the one put at `rev`; the queue read after, for
/// what a client that held nothing found ([`queue::found`](super::queue::found)).
pub(super) fn give_up(keys: &Keys, lease: i64, rev: i64) -> Step {
    Step {
        when: vec![Cmp::Created(keys.entry(lease), rev)],
        then: vec![
            Op::Delete(keys.entry(lease)),
            Op::Get(keys.queue(), Read::Oldest),
        ],
        otherwise: vec![Op::Get(keys.queue(), Read::Oldest)],
    }
}

/// The queue read: who holds the lock, for a client that found it does not.
pub(super) fn look(keys: &Keys) -> Step {
    Step {
        then: vec![Op::Get(keys.queue(), Read::Oldest)],
        ..Step::default()
    }
}

/// A forced release: the holder's entry `holder` deleted while it holds its token (its create
/// revision), the entries `waiting` behind it deleted too (each if still the one read), and
/// `BASE/fence` put. The delete's revision is the fence: larger than the removed holder's token,
/// and smaller than every token given after, since a waiter deleted queues again with a new
/// entry (one kept would hold the lock with a token older than the fence).
pub(super) fn force(
    keys: &Keys,
    holder: (String, i64),
    waiting: Vec<(String, i64)>,
    record: i64,
) -> Step {
    let mut then = vec![Op::Delete(holder.0.clone())];
    then.extend(waiting.into_iter().map(|(key, rev)| {
        Op::Txn(Box::new(Step {
            when: vec![Cmp::Created(key.clone(), rev)],
            then: vec![Op::Delete(key)],
            otherwise: vec![],
        }))
    }));
    then.push(put(keys.fence(), holder.1.to_string(), record));
    Step {
        when: vec![Cmp::Created(holder.0, holder.1)],
        then,
        otherwise: vec![],
    }
}

/// A waiter let in: its run's record, written while its entry holds its token.
pub(super) fn record_start(keys: &Keys, lease: i64, fence: i64, run: String, record: i64) -> Step {
    Step {
        when: vec![Cmp::Created(keys.entry(lease), fence)],
        then: vec![put(keys.run(lease), run, record)],
        otherwise: vec![],
    }
}

/// A run's end, recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct End {
    /// The run's record as it ended.
    pub run: String,
    /// Its outcome's label.
    pub outcome: String,
    pub succeeded: bool,
    /// The name's record lease.
    pub record: i64,
}

/// A release: while the entry of `lease` holds its token `rev`, the entry deleted, the run's
/// end recorded (its key, the summary) and counted.
pub(super) fn release(keys: &Keys, lease: i64, rev: i64, end: End) -> Step {
    let mut then = vec![
        Op::Delete(keys.entry(lease)),
        put(keys.run(lease), end.run.clone(), end.record),
        put(keys.last_ended(), end.run.clone(), end.record),
    ];
    if end.succeeded {
        then.push(put(keys.last_success(), end.run, end.record));
    }
    then.push(put(keys.count(&end.outcome), ONE, end.record));
    Step {
        when: vec![Cmp::Created(keys.entry(lease), rev)],
        then,
        // Not ours any more: who holds it says whether it is gone or another's.
        otherwise: vec![Op::Get(keys.queue(), Read::Oldest)],
    }
}

/// One count of `label`, or one taken back (`up` false).
pub(super) fn count(keys: &Keys, label: &str, up: bool, record: i64) -> Step {
    let key = match up {
        true => keys.count(label),
        false => keys.uncount(label),
    };
    Step {
        then: vec![put(key, ONE, record)],
        ..Step::default()
    }
}

/// A run's record `key` rewritten as `value` and copied to the summary, if it is unchanged
/// since it was read at `mod_rev` (None: read as absent).
pub(super) fn rewrite_run(
    keys: &Keys,
    key: String,
    mod_rev: Option<i64>,
    value: String,
    record: i64,
) -> Step {
    let unchanged = match mod_rev {
        Some(rev) => Cmp::Modified(key.clone(), rev),
        None => Cmp::Created(key.clone(), 0),
    };
    Step {
        when: vec![unchanged],
        then: vec![
            put(key, value.clone(), record),
            put(keys.last_ended(), value, record),
        ],
        otherwise: vec![],
    }
}

/// The old runs deleted, and the record's keys that another lease or none holds (a 0.3
/// client writes without one) attached to the record lease. Attaching a key is a put, which
/// adds one to its version: a counter's is taken back in the same transaction.
pub(super) fn tidy(keys: &Keys, old: Vec<String>, strays: Vec<String>, record: i64) -> Step {
    let counts = keys.counts();
    let mut then: Vec<Op> = old.into_iter().map(Op::Delete).collect();
    for key in strays {
        if let Some(label) = key.strip_prefix(&counts) {
            then.push(put(keys.uncount(label), ONE, record));
        }
        then.push(Op::Adopt { key, lease: record });
    }
    Step {
        then,
        ..Step::default()
    }
}

impl From<&Step> for Txn {
    fn from(step: &Step) -> Txn {
        let ops = |ops: &[Op]| ops.iter().map(TxnOp::from).collect::<Vec<_>>();
        let mut txn = Txn::new();
        if !step.when.is_empty() {
            txn = txn.when(step.when.iter().map(Compare::from).collect::<Vec<_>>());
        }
        txn = txn.and_then(ops(&step.then));
        if !step.otherwise.is_empty() {
            txn = txn.or_else(ops(&step.otherwise));
        }
        txn
    }
}

impl From<&Cmp> for Compare {
    fn from(cmp: &Cmp) -> Compare {
        match cmp {
            Cmp::Created(key, rev) => Compare::create_revision(key.clone(), CompareOp::Equal, *rev),
            Cmp::Modified(key, rev) => Compare::mod_revision(key.clone(), CompareOp::Equal, *rev),
            Cmp::NoneUnder(prefix) => {
                Compare::version(prefix.clone(), CompareOp::Equal, 0).with_prefix()
            }
        }
    }
}

impl From<&Op> for TxnOp {
    fn from(op: &Op) -> TxnOp {
        let leased = |lease: i64| match lease {
            0 => PutOptions::new(),
            lease => PutOptions::new().with_lease(lease),
        };
        match op {
            Op::Put { key, value, lease } => {
                TxnOp::put(key.clone(), value.clone(), Some(leased(*lease)))
            }
            Op::Adopt { key, lease } => TxnOp::put(
                key.clone(),
                Vec::new(),
                Some(leased(*lease).with_ignore_value()),
            ),
            Op::Delete(key) => TxnOp::delete(key.clone(), None),
            Op::Get(key, Read::Key) => TxnOp::get(key.clone(), None),
            Op::Get(prefix, Read::Oldest) => TxnOp::get(
                prefix.clone(),
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Ascend),
                ),
            ),
            Op::Get(prefix, Read::Newest(n)) => TxnOp::get(
                prefix.clone(),
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_limit(*n),
                ),
            ),
            Op::Txn(step) => TxnOp::txn(Txn::from(step.as_ref())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::new("p:", "k")
    }

    /// Every key a step writes, and the lease it writes it with.
    fn written(step: &Step) -> Vec<(String, i64)> {
        fn walk(ops: &[Op], out: &mut Vec<(String, i64)>) {
            for op in ops {
                match op {
                    Op::Put { key, lease, .. } | Op::Adopt { key, lease } => {
                        out.push((key.clone(), *lease))
                    }
                    Op::Txn(step) => {
                        walk(&step.then, out);
                        walk(&step.otherwise, out);
                    }
                    Op::Delete(_) | Op::Get(..) => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&step.then, &mut out);
        walk(&step.otherwise, &mut out);
        out
    }

    #[test]
    fn a_take_alone_queues_and_records_in_one_request() {
        let k = keys();
        let fast = take(
            &k,
            Join::Fast {
                lease: 7,
                entry: "e".into(),
                run: "r".into(),
                record: 9,
            },
        );
        assert_eq!(fast.when, [Cmp::NoneUnder("p:{k}/q/".into())]);
        assert_eq!(
            fast.then[..2],
            [
                put(k.entry(7), "e", 7),
                put("p:{k}/run/0000000000000007".into(), "r", 9)
            ]
        );
        // Someone queued: the entry only if absent, never the record.
        assert_eq!(
            written(&take(
                &k,
                Join::Queue {
                    lease: 7,
                    entry: "e".into()
                }
            )),
            [(k.entry(7), 7)]
        );
        assert_eq!(
            fast.otherwise[0],
            take(
                &k,
                Join::Queue {
                    lease: 7,
                    entry: "e".into()
                }
            )
            .then[0]
        );
        let look = take(&k, Join::Look);
        assert!(look.when.is_empty() && written(&look).is_empty());
        assert_eq!(look.then, reads(&k));
    }

    #[test]
    fn every_key_written_has_a_lease() {
        let k = keys();
        let end = End {
            run: "r".into(),
            outcome: "success".into(),
            succeeded: true,
            record: 9,
        };
        let steps = [
            take(
                &k,
                Join::Fast {
                    lease: 7,
                    entry: "e".into(),
                    run: "r".into(),
                    record: 9,
                },
            ),
            record_start(&k, 7, 41, "r".into(), 9),
            release(&k, 7, 41, end),
            count(&k, "busy", true, 9),
            count(&k, "vanished", false, 9),
            force(&k, (k.entry(7), 41), vec![], 9),
            kept(&k, 1000, 9),
            rewrite_run(&k, k.run(3), Some(50), "v".into(), 9),
            tidy(&k, vec![k.run(1)], vec![k.count("busy")], 9),
        ];
        for step in &steps {
            for (key, lease) in written(step) {
                let expected = if key.starts_with(&k.queue()) { 7 } else { 9 };
                assert_eq!(lease, expected, "{key} in {step:?}");
            }
        }
    }

    #[test]
    fn a_release_is_guarded_by_the_token_and_counts_once() {
        let k = keys();
        let end = |succeeded| End {
            run: "r".into(),
            outcome: if succeeded { "success" } else { "failed" }.into(),
            succeeded,
            record: 9,
        };
        let ok = release(&k, 7, 41, end(true));
        assert_eq!(ok.when, [Cmp::Created(k.entry(7), 41)]);
        assert_eq!(ok.then[0], Op::Delete(k.entry(7)));
        assert_eq!(ok.otherwise, [Op::Get(k.queue(), Read::Oldest)]);
        let keys_written: Vec<String> = written(&ok).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys_written,
            [
                k.run(7),
                k.last_ended(),
                k.last_success(),
                k.count("success")
            ]
        );
        let failed = release(&k, 7, 41, end(false));
        assert!(
            !written(&failed)
                .iter()
                .any(|(key, _)| *key == k.last_success())
        );
        assert_eq!(
            count(&k, "vanished", false, 9).then,
            [put(k.uncount("vanished"), ONE, 9)]
        );
    }

    #[test]
    fn a_rewrite_compares_what_was_read() {
        let k = keys();
        assert_eq!(
            rewrite_run(&k, k.run(3), Some(50), "v".into(), 9).when,
            [Cmp::Modified(k.run(3), 50)]
        );
        assert_eq!(
            rewrite_run(&k, k.run(3), None, "v".into(), 9).when,
            [Cmp::Created(k.run(3), 0)]
        );
        assert_eq!(give_up(&k, 7, 41).then[0], Op::Delete(k.entry(7)));
    }

    #[test]
    fn a_forced_release_sends_the_waiters_back_and_leaves_the_fence() {
        let k = keys();
        let step = force(&k, (k.entry(7), 41), vec![(k.entry(8), 43)], 9);
        assert_eq!(step.when, [Cmp::Created(k.entry(7), 41)]);
        assert_eq!(step.then[0], Op::Delete(k.entry(7)));
        let Op::Txn(waiter) = &step.then[1] else {
            panic!("{step:?}")
        };
        assert_eq!(waiter.when, [Cmp::Created(k.entry(8), 43)]);
        assert_eq!(waiter.then, [Op::Delete(k.entry(8))]);
        assert_eq!(written(&step), [(k.fence(), 9)]);
        assert!(step.otherwise.is_empty());
    }

    #[test]
    fn a_counter_adopted_is_not_counted_again() {
        let k = keys();
        let adopt = |key: String| Op::Adopt { key, lease: 9 };
        assert_eq!(
            tidy(&k, vec![k.run(1)], vec![k.last_ended(), k.count("busy")], 9).then,
            [
                Op::Delete(k.run(1)),
                adopt(k.last_ended()),
                put(k.uncount("busy"), ONE, 9),
                adopt(k.count("busy")),
            ]
        );
    }
}
