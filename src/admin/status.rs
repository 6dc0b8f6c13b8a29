//! `redlock status`: one lock's state, from one server or every node of a quorum.

use anyhow::Context;

use crate::admin::render::{info_json, info_text, quorum_json, quorum_text};
use crate::admin::{Servers, need_majority, read, read_nodes, verdict};
use crate::lock::{Keys, LockInfo, Preflight, SingleRedis, WAKE_LINGER};
use crate::report;

/// `redlock status`: print the lock's state; exit 0 whether it is free or held.
pub fn status(servers: Servers, key: &str, json: bool) -> anyhow::Result<i32> {
    report::set_key(key);
    let Servers {
        mut endpoints,
        prefix,
    } = servers;
    if endpoints.len() > 1 {
        return quorum_status(&endpoints, &prefix, key, json);
    }
    let keys = Keys::new(&prefix, key);
    let mut redis = SingleRedis::new(endpoints.remove(0), keys, false, WAKE_LINGER)
        .with_preflight(Preflight::Always);
    let info = read(&mut redis)
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
fn quorum_status(
    endpoints: &[crate::transport::endpoint::Endpoint],
    prefix: &str,
    key: &str,
    json: bool,
) -> anyhow::Result<i32> {
    let total = endpoints.len();
    let results = read_nodes(endpoints, prefix, key);
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
