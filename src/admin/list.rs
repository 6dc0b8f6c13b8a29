//! `redlock list`: the held locks under a prefix, from one server or every node of a quorum.

use std::collections::BTreeSet;

use anyhow::Context;

use crate::admin::render::{info_json, list_line, quorum_json};
use crate::admin::{TIMEOUT, Unread, Verdict, need_majority, read, unavailable, verdict};
use crate::lock::Fence;
use crate::lock::{Backend, Failure, Inspected, LockInfo, Node, Reason};
use crate::report;

/// `redlock list`: every held lock under the prefix, as the backend finds their names
/// ([`crate::lock::Node::names`]). Over a quorum, every node is scanned and each lock read on
/// all of them.
/// How many locks one request of `list` reads: a few hundred KiB of replies at most, well
/// within the reply bound, and 10,000 locks in 100 round trips instead of 10,000.
const BATCH: usize = 100;

pub(crate) fn list(backend: &dyn Backend, json: bool) -> anyhow::Result<i32> {
    if backend.capabilities().quorum {
        return quorum_list(backend, json);
    }
    let mut node = backend.node(0);
    let found = node
        .names(TIMEOUT)
        .map_err(unavailable)
        .context("cannot list locks")?;
    let mut locks = Vec::new();
    // A held lock that could not be read: said on stderr, the others listed, and the exit
    // status says the listing is not whole.
    let mut unread = false;
    let found: Vec<String> = found.into_iter().collect();
    for batch in found.chunks(BATCH) {
        // A batch that the server answered wrongly as a whole (a reply past the bound breaks
        // the connection) is read lock by lock, which says which lock it was; one it did not
        // answer at all is the end of the listing, after one time limit, not one a lock.
        let read_at_once = match node.inspect_each(batch, json, TIMEOUT) {
            Ok(read) => read,
            Err(failure @ Failure::Unreachable(_)) => {
                return Err(unavailable(failure)).context("cannot list locks");
            }
            Err(_) => vec![None; batch.len()],
        };
        for (name, inspected) in batch.iter().zip(read_at_once) {
            let info = match inspected {
                Some(Inspected::Lock(info)) if info.fence != Fence::Counter(0) => Ok(*info),
                // A foreign key, a foreign counter, or a reply that was not a lock's (an error,
                // another node's slot): read alone, which says what it is.
                _ => read(node.as_mut(), name),
            };
            match info {
                Ok(info) if info.is_held() => locks.push((name, info)),
                // Released since the names were read, or a key of another kind that looks like a lock.
                Ok(_) | Err(Unread::Foreign { .. }) => {}
                // The server answered, but not with a lock redlock can read (a reply past the cap, an
                // error): said, never left out in silence; the other locks are listed all the same.
                Err(Unread::Failed(failure @ Failure::Refused(_))) => {
                    unread = true;
                    report::error(format!(
                        "cannot read lock '{}': {failure}",
                        crate::admin::render::field(name)
                    ));
                }
                Err(Unread::Failed(failure)) => {
                    return Err(unavailable(failure)).context("cannot list locks");
                }
            }
        }
    }
    let mut text = String::new();
    if json {
        text = format!(
            "{}\n",
            report::json::array(locks.iter().map(|(name, info)| info_json(name, info)))
        );
    } else {
        for (name, info) in &locks {
            text += &list_line(name, info, None);
        }
    }
    report::stdout(text.as_bytes())?;
    Ok(if unread { crate::exit::UNAVAILABLE } else { 0 })
}

/// `redlock list` over a quorum: every node scanned, each lock found read on every node, and
/// the locks a majority holds listed with how many nodes hold them. A lock held on some nodes
/// where no majority agrees (two tokens, or nodes silent) is listed too, as such; one that a
/// majority finds free is free. A node that does not answer the scan (or stops answering the
/// reads) is a stderr line; fewer than a majority answering the scan is exit 69.
///
/// The nodes are scanned at once, then read at once, each over one connection that reads every
/// lock in turn, and a node that does not answer once is not asked again (see [`read_each`]):
/// a silent node costs one request timeout (two, if it falls silent between the scan and the
/// reads), however many locks there are.
fn quorum_list(backend: &dyn Backend, json: bool) -> anyhow::Result<i32> {
    let endpoints = backend.nodes();
    let total = endpoints.len();
    let scans = scan_everywhere(backend);
    let mut names = BTreeSet::new();
    let mut answered = 0;
    for (endpoint, scan) in endpoints.iter().zip(&scans) {
        match scan {
            Ok(found) => {
                answered += 1;
                names.extend(found.iter().cloned());
            }
            Err(failure) => report::error(format!("{endpoint}: cannot list locks: {failure}")),
        }
    }
    need_majority(answered, total, "cannot list locks")?;
    let names: Vec<String> = names.into_iter().collect();
    let mut reads: Vec<_> = read_everywhere(backend, &scans, &names)
        .into_iter()
        .map(Vec::into_iter)
        .collect();
    let mut text = String::new();
    let mut objects = Vec::new();
    for name in names {
        let results: Vec<(String, Result<LockInfo, Unread>)> = endpoints
            .iter()
            .zip(&mut reads)
            .map(|(endpoint, reads)| (endpoint.to_string(), reads.next().expect("one a name")))
            .collect();
        let infos: Vec<Option<&LockInfo>> = results.iter().map(|(_, r)| r.as_ref().ok()).collect();
        let verdict = verdict(&infos);
        if matches!(verdict, Verdict::Free { .. } | Verdict::Split { held: 0 }) {
            continue;
        }
        if json {
            objects.push(quorum_json(&name, &verdict, &results));
            continue;
        }
        // The line of the first node holding the majority's token (or any token, split).
        let shown = results.iter().find_map(|(_, r)| {
            let info = r.as_ref().ok()?;
            let token = info.owner()?;
            match &verdict {
                Verdict::Held { token: t, .. } if *t != token => None,
                _ => Some(info),
            }
        });
        let Some(info) = shown else { continue };
        let on = match &verdict {
            Verdict::Held { nodes, .. } => format!("on {nodes} of {total} nodes"),
            Verdict::Split { held } => format!("no majority: held on {held} of {total} nodes"),
            Verdict::Free { .. } => unreachable!("free locks are skipped above"),
        };
        text += &list_line(&name, info, Some(&on));
    }
    if json {
        text = format!("{}\n", report::json::array(objects.into_iter()));
    }
    report::stdout(text.as_bytes())?;
    Ok(0)
}

/// The lock names under the prefix on every node, scanned at once.
fn scan_everywhere(backend: &dyn Backend) -> Vec<Result<BTreeSet<String>, Failure>> {
    std::thread::scope(|s| {
        let scans: Vec<_> = (0..backend.nodes().len())
            .map(|index| s.spawn(move || backend.node(index).names(TIMEOUT)))
            .collect();
        scans
            .into_iter()
            .map(|scan| {
                scan.join()
                    .unwrap_or_else(|_| Err(Failure::Refused("the scan failed".into())))
            })
            .collect()
    })
}

/// Every lock of `names` read on every node at once, the node's answers in the order of
/// `names`. A node whose scan got no answer is not asked: its answers are that failure.
fn read_everywhere(
    backend: &dyn Backend,
    scans: &[Result<BTreeSet<String>, Failure>],
    names: &[String],
) -> Vec<Vec<Result<LockInfo, Unread>>> {
    std::thread::scope(|s| {
        let reads: Vec<_> = backend
            .nodes()
            .into_iter()
            .enumerate()
            .zip(scans)
            .map(|((index, name), scan)| match scan {
                Err(silent @ Failure::Unreachable(_)) => Err(silent.to_string()),
                _ => Ok(s.spawn(move || read_names(backend.node(index).as_mut(), &name, names))),
            })
            .collect();
        reads
            .into_iter()
            .map(|read| match read {
                Ok(read) => read
                    .join()
                    .unwrap_or_else(|_| not_asked(names, "the read failed", Failure::Refused)),
                Err(silent) => not_asked(names, &silent, Failure::Unreachable),
            })
            .collect()
    })
}

/// Each of `names` unread, for `why`.
fn not_asked(
    names: &[String],
    why: &str,
    failure: fn(Reason) -> Failure,
) -> Vec<Result<LockInfo, Unread>> {
    names
        .iter()
        .map(|_| Err(Unread::Failed(failure(why.into()))))
        .collect()
}

/// The locks `names` read in turn on `node` (named `endpoint`), over one connection; a note on
/// stderr when the node stops answering.
fn read_names(
    node: &mut dyn Node,
    endpoint: &str,
    names: &[String],
) -> Vec<Result<LockInfo, Unread>> {
    let reads = read_each(names, |name| read(node, name));
    let silent = reads
        .iter()
        .zip(names)
        .enumerate()
        .find_map(|(i, (r, name))| match r {
            Err(Unread::Failed(failure @ Failure::Unreachable(_))) => Some((i, name, failure)),
            _ => None,
        });
    for (r, name) in reads.iter().zip(names) {
        if let Err(Unread::Failed(failure @ Failure::Refused(_))) = r {
            report::error(format!(
                "{endpoint}: cannot read lock '{}': {failure}",
                crate::admin::render::field(name)
            ));
        }
    }
    if let Some((i, name, failure)) = silent {
        let rest = names.len() - i - 1;
        let not_again = match rest {
            0 => String::new(),
            1 => "; not asked about the other lock".to_owned(),
            n => format!("; not asked about the {n} other locks"),
        };
        report::error(format!(
            "{endpoint}: cannot read lock '{}': {failure}{not_again}",
            crate::admin::render::field(name)
        ));
    }
    reads
}

/// `read` of each of `names` in turn, until one gets no answer: that failure then stands for
/// the rest, which are not asked. A node that did not answer once in a command is not asked
/// again, so that a silent node costs one request timeout, not one per lock; an error the
/// node answered with (a key of another kind) is that lock's alone.
fn read_each<T>(
    names: &[String],
    mut read: impl FnMut(&str) -> Result<T, Unread>,
) -> Vec<Result<T, Unread>> {
    let mut silent: Option<String> = None;
    names
        .iter()
        .map(|name| {
            if let Some(why) = &silent {
                return Err(Unread::Failed(Failure::Unreachable(why.as_str().into())));
            }
            let result = read(name);
            if let Err(Unread::Failed(failure @ Failure::Unreachable(_))) = &result {
                silent = Some(failure.to_string());
            }
            result
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_does_not_answer_once_is_not_asked_again() {
        let names: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        // (what the node answers for each lock it is asked about, the locks asked, the results)
        let silent = || Err(Unread::Failed(Failure::Unreachable("no answer".into())));
        let foreign = || {
            Err(Unread::Foreign {
                stored_key: "k".into(),
                what: "hash".into(),
            })
        };
        type Answer = fn() -> Result<u32, Unread>;
        let rows: Vec<(Vec<Answer>, &str, &str)> = vec![
            (vec![|| Ok(1); 5], "abcde", "11111"),
            (vec![silent], "a", "-----"),
            (vec![|| Ok(1), || Ok(1), silent], "abc", "11---"),
            // An error answered is that lock's: the node is asked about the next one.
            (vec![|| Ok(1), foreign, || Ok(1), silent], "abcd", "1f1--"),
            (
                vec![|| Ok(1), || Ok(1), || Ok(1), || Ok(1), silent],
                "abcde",
                "1111-",
            ),
        ];
        for (answers, asked_want, results_want) in rows {
            let mut asked = String::new();
            let mut answers = answers.into_iter();
            let results = read_each(&names, |name| {
                asked += name;
                answers.next().expect("asked once too often")()
            });
            let results: String = results
                .iter()
                .map(|r| match r {
                    Ok(_) => '1',
                    Err(Unread::Foreign { .. }) => 'f',
                    Err(failure @ Unread::Failed(Failure::Unreachable(_))) => {
                        assert_eq!(failure.to_string(), "no answer");
                        '-'
                    }
                    Err(Unread::Failed(Failure::Refused(_))) => 'r',
                    Err(Unread::Failed(Failure::Unacknowledged(_))) => 'u',
                })
                .collect();
            assert_eq!(
                (asked.as_str(), results.as_str()),
                (asked_want, results_want)
            );
        }
    }
}
