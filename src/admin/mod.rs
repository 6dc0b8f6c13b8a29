//! The admin subcommands: `status` and `list` read locks, `history` and `check` the record of
//! their runs, `release --force` breaks one.
//!
//! Each subcommand fetches what it shows through the backend's [`Node`]s (one server, or every
//! node of a quorum), then hands it to [`render`] for text or JSON. Results go to stdout (they
//! are what was asked for); errors to stderr as everywhere else.
//!
//! May use `lock`, `report`, `error` and `exit`; nothing above, and no backend (the command
//! line opens the backend and calls in).

mod forced;
mod history;
mod list;
mod release;
mod render;
mod runs;
mod status;

pub use history::unknown;
pub(crate) use history::{check, history};
pub(crate) use list::list;
pub(crate) use release::release;
pub(crate) use status::status;

use std::fmt;
use std::time::Duration;

use crate::error::{Class, classified};
use crate::lock::{Backend, Failure, Inspected, LockInfo, Node};

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
    /// The server could not be used, or answered with what redlock cannot read.
    Failed(Failure),
    /// The lock's key holds `what` (as the backend says it), which redlock did not make.
    Foreign { stored_key: String, what: String },
}

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unread::Failed(failure) => failure.fmt(f),
            Unread::Foreign { stored_key, what } => write!(
                f,
                "its key {} is {what} that redlock did not make (`redlock release \
                 --force` on this key removes it)",
                render::field(stored_key)
            ),
        }
    }
}

impl From<Unread> for anyhow::Error {
    /// Exit 69: the server answered, but not with a lock redlock can read.
    fn from(unread: Unread) -> Self {
        classified(Class::Unavailable, unread.to_string())
    }
}

/// Lock `name` as `node` holds it.
pub(crate) fn read(node: &mut dyn Node, name: &str) -> Result<LockInfo, Unread> {
    match node.inspect(name, TIMEOUT).map_err(Unread::Failed)? {
        Inspected::Lock(info) => Ok(*info),
        Inspected::Foreign { stored_key, what } => Err(Unread::Foreign { stored_key, what }),
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

/// What each node of a quorum says of the lock `name`, read on all of them at once.
pub(crate) fn read_nodes(
    backend: &dyn Backend,
    name: &str,
) -> Vec<(String, Result<LockInfo, Unread>)> {
    on_nodes(backend, |node| read(node, name), Unread::Failed)
}

/// `request` on every node of `backend` at once, each over a connection of its own: each
/// node's name and answer (a request that panicked is `failed` of a refusal).
pub(crate) fn on_nodes<T: Send, E: Send>(
    backend: &dyn Backend,
    request: impl Fn(&mut dyn Node) -> Result<T, E> + Sync,
    failed: impl Fn(Failure) -> E,
) -> Vec<(String, Result<T, E>)> {
    let request = &request;
    std::thread::scope(|s| {
        let reads: Vec<_> = backend
            .nodes()
            .into_iter()
            .enumerate()
            .map(|(index, name)| {
                let mut node = backend.node(index);
                (name, s.spawn(move || request(node.as_mut())))
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

    fn info(token: Option<&str>) -> LockInfo {
        LockInfo {
            stored_key: "redlock:{q}".into(),
            fence: crate::lock::Fence::Counter(1),
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
