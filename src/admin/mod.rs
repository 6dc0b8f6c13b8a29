//! The admin subcommands: `status` and `list` read locks, `history` and `check` the record of
//! their runs, `release --force` breaks one.
//!
//! Each subcommand fetches what it shows through `lock` (one server, or every node of a
//! quorum), then hands it to [`render`] for text or JSON. Results go to stdout (they are what
//! was asked for); errors to stderr as everywhere else.
//!
//! May use `lock`, `transport`, `report`, `error` and `exit`; nothing above (the command line
//! builds a [`Servers`] and calls in).

mod forced;
mod history;
mod list;
mod release;
mod render;
mod runs;
mod status;

pub use history::{check, history, unknown};
pub use list::list;
pub use release::release;
pub use status::status;

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{Class, classified};
use crate::lock::{Failure, Inspected, Keys, LockInfo, SingleRedis, WAKE_LINGER};
use crate::transport::endpoint::{Endpoint, Target};

/// Where the locks live: the servers (several make a quorum) and the key prefix.
#[derive(Debug)]
pub struct Servers {
    pub endpoints: Vec<Endpoint>,
    pub prefix: String,
}

/// Fine when a majority of `total` nodes answered; else exit 69 saying that `doing` failed.
pub(crate) fn need_majority(answered: usize, total: usize, doing: &str) -> anyhow::Result<()> {
    if answered > total / 2 {
        return Ok(());
    }
    Err(classified(
        Class::Unavailable,
        format!(
            "{doing} on a majority: {} of {total} nodes did not answer",
            total - answered
        ),
    ))
}

/// The time limit of each admin request.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn unavailable(failure: Failure) -> anyhow::Error {
    classified(Class::Unavailable, failure.to_string())
}

/// Why a lock could not be read on a node.
#[derive(Debug)]
pub(crate) enum Unread {
    /// Redis could not be used.
    Failed(Failure),
    /// The lock key is a Redis key of another type, which redlock did not make.
    Foreign {
        redis_key: String,
        redis_type: String,
    },
}

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unread::Failed(failure) => failure.fmt(f),
            Unread::Foreign {
                redis_key,
                redis_type,
            } => write!(
                f,
                "its key {} is a Redis {redis_type} that redlock did not make (`redlock release \
                 --force` on this key removes it)",
                render::field(redis_key)
            ),
        }
    }
}

impl From<Unread> for anyhow::Error {
    /// Exit 69: Redis answered, but not with a lock redlock can read.
    fn from(unread: Unread) -> Self {
        classified(Class::Unavailable, unread.to_string())
    }
}

/// The lock `node` looks at, read in one script; a counter of 0 is looked at again (the script
/// reads a word redlock did not write there as 0; a key of another kind its guard names).
pub(crate) fn read(node: &mut SingleRedis) -> Result<LockInfo, Unread> {
    match node.inspect(TIMEOUT).map_err(Unread::Failed)? {
        Inspected::Lock(mut info) => {
            if info.fence == 0 {
                info.foreign_fence = node.foreign_fence(TIMEOUT).ok().flatten();
            }
            Ok(*info)
        }
        Inspected::Foreign {
            redis_key,
            redis_type,
        } => Err(Unread::Foreign {
            redis_key,
            redis_type,
        }),
    }
}

/// What a quorum says of a lock: the state a majority of its nodes agree on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A majority holds the same token.
    Held { token: String, nodes: usize },
    /// A majority answered that it is free.
    Free { nodes: usize },
    /// No majority agrees (a hand-over in progress, a broken lock, nodes unanswered); `held`
    /// nodes hold some token.
    Split { held: usize },
}

pub(crate) fn verdict(infos: &[Option<&LockInfo>]) -> Verdict {
    let majority = infos.len() / 2 + 1;
    let free = infos
        .iter()
        .filter(|i| i.is_some_and(|i| !i.is_held()))
        .count();
    if free >= majority {
        return Verdict::Free { nodes: free };
    }
    // Several holders on a node (a semaphore run against it alone) agree only on the same set.
    let tokens: Vec<String> = infos
        .iter()
        .filter_map(|i| i.and_then(LockInfo::owner))
        .collect();
    for token in &tokens {
        let nodes = tokens.iter().filter(|t| *t == token).count();
        if nodes >= majority {
            return Verdict::Held {
                token: token.clone(),
                nodes,
            };
        }
    }
    Verdict::Split { held: tokens.len() }
}

/// The names of the lock keys under `prefix` on `endpoint` (every master of a Cluster).
pub(crate) fn lock_names(endpoint: &Endpoint, prefix: &str) -> Result<BTreeSet<String>, Failure> {
    let nodes = match &endpoint.target {
        Target::Cluster { .. } => {
            crate::transport::cluster::masters(endpoint, Instant::now() + TIMEOUT)?
                .into_iter()
                .map(|(host, port)| endpoint.pinned(&host, port))
                .collect()
        }
        _ => vec![endpoint.clone()],
    };
    let pattern = Keys::scan_pattern(prefix);
    let mut found = BTreeSet::new();
    for node in nodes {
        let mut scanner = SingleRedis::new(node, Keys::new(prefix, ""), false, WAKE_LINGER);
        let mut walk = ScanWalk::new(MAX_SCANS);
        let mut cursor = 0;
        loop {
            let (next, keys) = scanner.scan(cursor, &pattern, TIMEOUT)?;
            // SCAN may return a key more than once; the set keeps one of each.
            found.extend(keys.into_iter().filter_map(|k| Keys::name_of(prefix, &k)));
            match walk.next(next) {
                Ok(Some(next)) => cursor = next,
                Ok(None) => break,
                Err(why) => {
                    return Err(Failure::Refused(
                        format!(
                            "Redis at {} {why}: not a Redis redlock can list",
                            scanner.endpoint()
                        )
                        .into(),
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// The most SCAN calls `list` makes on one node: with `COUNT 1000`, a keyspace of about a
/// billion keys. A real Redis ends its SCAN long before; a server that does not is refused.
const MAX_SCANS: usize = 1_000_000;

/// A SCAN's cursors so far on one node, to end a walk that a server would keep going for
/// ever: a cursor it already returned, or too many calls. Redis never returns a cursor twice
/// in one walk: its cursor, read with the bits reversed, only grows (a table that grows or
/// shrinks between calls included; on a Cluster node each slot's walk follows the last's).
struct ScanWalk {
    seen: std::collections::HashSet<u64>,
    calls: usize,
    limit: usize,
}

impl ScanWalk {
    fn new(limit: usize) -> Self {
        Self {
            seen: std::collections::HashSet::new(),
            calls: 0,
            limit,
        }
    }

    /// After a call answered with cursor `next`: the cursor of the next call, None when the
    /// walk is done (0), or why it must end.
    fn next(&mut self, next: u64) -> Result<Option<u64>, String> {
        self.calls += 1;
        if next == 0 {
            return Ok(None);
        }
        if !self.seen.insert(next) {
            return Err(format!("returned SCAN cursor {next} again"));
        }
        if self.calls >= self.limit {
            return Err(format!("kept the SCAN going past {} calls", self.limit));
        }
        Ok(Some(next))
    }
}

/// What each node of a quorum says of the lock `name`, read on all of them at once.
pub(crate) fn read_nodes(
    endpoints: &[Endpoint],
    prefix: &str,
    name: &str,
) -> Vec<(String, Result<LockInfo, Unread>)> {
    on_nodes(endpoints, prefix, name, read, Unread::Failed)
}

/// `request` for the lock `name` on every node at once, each over a connection of its own: each
/// node's name and answer (a request that panicked is `failed` of a refusal).
pub(crate) fn on_nodes<T: Send, E: Send>(
    endpoints: &[Endpoint],
    prefix: &str,
    name: &str,
    request: impl Fn(&mut SingleRedis) -> Result<T, E> + Sync,
    failed: impl Fn(Failure) -> E,
) -> Vec<(String, Result<T, E>)> {
    let request = &request;
    std::thread::scope(|s| {
        let reads: Vec<_> = endpoints
            .iter()
            .map(|endpoint| {
                let keys = Keys::new(prefix, name);
                let mut node = SingleRedis::new(endpoint.clone(), keys, false, WAKE_LINGER);
                (endpoint.to_string(), s.spawn(move || request(&mut node)))
            })
            .collect();
        reads
            .into_iter()
            .map(|(node, read)| {
                let result = read
                    .join()
                    .unwrap_or_else(|_| Err(failed(Failure::Refused("the read failed".into()))));
                (node, result)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_ends_at_cursor_0_and_a_cursor_returned_again_or_too_many_calls_end_it() {
        // (the cursors the server returns, the walk's limit, the cursors asked for next and
        // how it ended)
        type Row = (
            &'static [u64],
            usize,
            &'static [u64],
            Result<(), &'static str>,
        );
        let rows: Vec<Row> = vec![
            (&[0], 10, &[], Ok(())),
            (&[4, 2, 6, 0], 10, &[4, 2, 6], Ok(())),
            (&[1, 1], 10, &[1], Err("returned SCAN cursor 1 again")),
            (&[4, 2, 4], 10, &[4, 2], Err("returned SCAN cursor 4 again")),
            (
                &[1, 2, 3],
                3,
                &[1, 2],
                Err("kept the SCAN going past 3 calls"),
            ),
            // The last call allowed may still end the walk.
            (&[1, 2, 0], 3, &[1, 2], Ok(())),
        ];
        for (answers, limit, asked_want, ended_want) in rows {
            let mut walk = ScanWalk::new(limit);
            let mut asked = Vec::new();
            let mut ended = Err(String::from("the server ran out of answers"));
            for &answer in answers {
                match walk.next(answer) {
                    Ok(Some(next)) => asked.push(next),
                    Ok(None) => {
                        ended = Ok(());
                        break;
                    }
                    Err(why) => {
                        ended = Err(why);
                        break;
                    }
                }
            }
            assert_eq!(
                (
                    asked.as_slice(),
                    ended.as_ref().copied().map_err(String::as_str)
                ),
                (asked_want, ended_want),
                "{answers:?} limit {limit}"
            );
        }
    }

    fn info(token: Option<&str>) -> LockInfo {
        LockInfo {
            redis_key: "redlock:{q}".into(),
            fence: 1,
            foreign_fence: None,
            held: token.map(|t| (t.to_owned(), None)),
            holder: None,
            several: None,
            done: None,
            queue: None,
            waiting: 0,
            runs: Default::default(),
        }
    }

    #[test]
    fn the_verdict_is_what_a_majority_agrees_on() {
        let (a, b, free) = (info(Some("a")), info(Some("b")), info(None));
        let held = |token: &str, nodes| Verdict::Held {
            token: token.into(),
            nodes,
        };
        assert_eq!(verdict(&[Some(&a), Some(&a), Some(&a)]), held("a", 3));
        assert_eq!(verdict(&[Some(&a), None, Some(&a)]), held("a", 2));
        assert_eq!(
            verdict(&[Some(&free), Some(&a), Some(&free)]),
            Verdict::Free { nodes: 2 }
        );
        // A hand-over half done, two owners, or too few answers: no majority.
        assert_eq!(
            verdict(&[Some(&a), Some(&b), Some(&free)]),
            Verdict::Split { held: 2 }
        );
        assert_eq!(verdict(&[Some(&a), None, None]), Verdict::Split { held: 1 });
        assert_eq!(
            verdict(&[Some(&a), Some(&a), Some(&b), Some(&free)]),
            Verdict::Split { held: 3 }
        );
        assert_eq!(
            verdict(&[Some(&a), Some(&a), Some(&a), Some(&b), None]),
            held("a", 3)
        );
    }
}
