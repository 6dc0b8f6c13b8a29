//! `redlock status`: one lock's state, from one server or every node of a quorum.

use anyhow::Context;

use crate::admin::render::{info_json, info_text, quorum_json, quorum_text};
use crate::admin::{need_majority, read, read_nodes, verdict};
use crate::lock::{Backend, LockInfo};
use crate::report;

/// `redlock status`: print the lock's state; exit 0 whether it is free or held.
pub(crate) fn status(backend: &dyn Backend, key: &str, json: bool) -> anyhow::Result<i32> {
    report::set_key(key);
    if backend.capabilities().quorum {
        return quorum_status(backend, key, json);
    }
    let info = read(backend.node(0).as_mut(), key)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("cannot read lock '{key}'"))?;
    let text = if json {
        format!("{}\n", info_json(key, &info))
    } else {
        info_text(key, &info)
    };
    report::stdout(text.as_bytes())?;
    Ok(0)
}

/// `redlock status` over a quorum: every node read at once, the verdict of the majority first,
/// then each node's view. A node that does not answer is a `redlock:` line on stderr; fewer
/// than a majority answering is exit 69.
fn quorum_status(backend: &dyn Backend, key: &str, json: bool) -> anyhow::Result<i32> {
    let total = backend.nodes().len();
    let results = read_nodes(backend, key);
    let infos: Vec<Option<&LockInfo>> = results.iter().map(|(_, r)| r.as_ref().ok()).collect();
    let answered = infos.iter().filter(|i| i.is_some()).count();
    let verdict = verdict(&infos);
    for (node, result) in &results {
        if let Err(failure) = result {
            report::error(format!("{node}: cannot read lock '{key}': {failure}"));
        }
    }
    let text = if json {
        format!("{}\n", quorum_json(key, &verdict, &results))
    } else {
        quorum_text(key, &verdict, &results)
    };
    report::stdout(text.as_bytes())?;
    need_majority(answered, total, &format!("cannot read lock '{key}'"))?;
    Ok(0)
}
