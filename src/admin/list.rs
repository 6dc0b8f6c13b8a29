//! `redlock list`: the held locks under a prefix, from one server or every node of a quorum.

use std::collections::BTreeSet;

use anyhow::Context;

use crate::admin::render::{info_json, list_line, quorum_json};
use crate::admin::{
    Servers, Unread, Verdict, lock_names, need_majority, read, read_nodes, unavailable, verdict,
};
use crate::lock::{Failure, Keys, LockInfo, SingleRedis, WAKE_LINGER};
use crate::report;
use crate::transport::endpoint::Endpoint;

/// `redlock list`: every held lock under the prefix (SCAN, never KEYS; on a Cluster, a SCAN on
/// every master). With several --url, every node is scanned and each lock read on all of them.
pub fn list(servers: Servers, json: bool) -> anyhow::Result<i32> {
    let Servers {
        mut endpoints,
        prefix,
    } = servers;
    let prefix = &prefix;
    if endpoints.len() > 1 {
        return quorum_list(endpoints, prefix, json);
    }
    let endpoint = endpoints.remove(0);
    let found = lock_names(&endpoint, prefix)
        .map_err(unavailable)
        .context("cannot list locks")?;
    let mut redis = SingleRedis::new(endpoint, Keys::new(prefix, ""), false, WAKE_LINGER);
    let mut locks = Vec::new();
    for name in found {
        redis.set_keys(Keys::new(prefix, &name));
        match read(&mut redis) {
            Ok(info) if info.is_held() => locks.push((name, info)),
            // Released since the SCAN, or a key of another kind that looks like a lock.
            Ok(_) | Err(Unread::Foreign { .. } | Unread::Failed(Failure::Refused(_))) => {}
            Err(Unread::Failed(failure)) => {
                return Err(unavailable(failure)).context("cannot list locks");
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
    Ok(0)
}

/// `redlock list` over a quorum: every node scanned, each lock found read on every node, and
/// the locks a majority holds listed with how many nodes hold them. A lock held on some nodes
/// where no majority agrees (two tokens, or nodes silent) is listed too, as such; one that a
/// majority finds free is free. A node that does not answer the scan is a stderr
/// line; fewer than a majority answering is exit 69.
fn quorum_list(endpoints: Vec<Endpoint>, prefix: &str, json: bool) -> anyhow::Result<i32> {
    let total = endpoints.len();
    let scans: Vec<_> = std::thread::scope(|s| {
        let scans: Vec<_> = endpoints
            .iter()
            .map(|endpoint| s.spawn(|| lock_names(endpoint, prefix)))
            .collect();
        scans.into_iter().map(|scan| scan.join()).collect()
    });
    let mut names = BTreeSet::new();
    let mut answered = 0;
    for (endpoint, scan) in endpoints.iter().zip(scans) {
        match scan {
            Ok(Ok(found)) => {
                answered += 1;
                names.extend(found);
            }
            Ok(Err(failure)) => report::error(format!("{endpoint}: cannot list locks: {failure}")),
            Err(_) => report::error(format!("{endpoint}: cannot list locks")),
        }
    }
    need_majority(answered, total, "cannot list locks")?;
    let mut text = String::new();
    let mut objects = Vec::new();
    for name in names {
        let results = read_nodes(&endpoints, prefix, &name);
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
