//! The admin subcommands: `status` and `list` read locks, `release --force` breaks one.
//!
//! Results go to stdout (they are what was asked for); errors to stderr as everywhere else.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::Context;

use crate::cli::{ListArgs, ReleaseArgs, StatusArgs};
use crate::endpoint::{Endpoint, Target};
use crate::error::{Class, classified};
use crate::json::{self, Object};
use crate::lock::{Failure, Forced, Holder, Keys, LockInfo, SingleRedis, WAKE_LINGER};
use crate::say;

/// The time limit of each admin request.
const TIMEOUT: Duration = Duration::from_secs(5);

fn unavailable(failure: crate::lock::Failure) -> anyhow::Error {
    classified(Class::Unavailable, failure.to_string())
}

/// `redlock status`: print the lock's state; exit 0 whether it is free or held.
pub fn status(args: &StatusArgs) -> anyhow::Result<i32> {
    crate::say::set_key(&args.key);
    let mut endpoints = args.conn.endpoints()?;
    if endpoints.len() > 1 {
        return quorum_status(args, endpoints);
    }
    let keys = Keys::new(&args.conn.prefix, &args.key);
    let mut redis = SingleRedis::new(endpoints.remove(0), keys, false, WAKE_LINGER);
    let info = redis
        .inspect(TIMEOUT)
        .map_err(unavailable)
        .with_context(|| format!("cannot read lock '{}'", args.key))?;
    let text = if args.json {
        format!("{}\n", info_json(&args.key, &info))
    } else {
        info_text(&args.key, &info)
    };
    say::stdout(text.as_bytes())?;
    Ok(0)
}

/// What a quorum says of a lock: the state a majority of its nodes agree on.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A majority holds the same token.
    Held { token: String, nodes: usize },
    /// A majority answered that it is free.
    Free { nodes: usize },
    /// No majority agrees (a hand-over in progress, a broken lock, nodes unanswered); `held`
    /// nodes hold some token.
    Split { held: usize },
}

fn verdict(infos: &[Option<&LockInfo>]) -> Verdict {
    let majority = infos.len() / 2 + 1;
    let free = infos
        .iter()
        .filter(|i| i.is_some_and(|i| i.held.is_none()))
        .count();
    if free >= majority {
        return Verdict::Free { nodes: free };
    }
    let tokens: Vec<&str> = infos
        .iter()
        .filter_map(|i| i.and_then(|i| i.held.as_ref()).map(|(t, _)| t.as_str()))
        .collect();
    for &token in &tokens {
        let nodes = tokens.iter().filter(|&&t| t == token).count();
        if nodes >= majority {
            return Verdict::Held {
                token: token.to_owned(),
                nodes,
            };
        }
    }
    Verdict::Split { held: tokens.len() }
}

/// `redlock status` over a quorum: every node read at once, the verdict of the majority first,
/// then each node's view, its lines prefixed with the node. A node that does not answer is a
/// `redlock:` line on stderr; fewer than a majority answering is exit 69.
fn quorum_status(args: &StatusArgs, endpoints: Vec<Endpoint>) -> anyhow::Result<i32> {
    let key = &args.key;
    let total = endpoints.len();
    let results = read_nodes(&endpoints, &args.conn.prefix, key);
    let infos: Vec<Option<&LockInfo>> = results.iter().map(|(_, r)| r.as_ref().ok()).collect();
    let answered = infos.iter().filter(|i| i.is_some()).count();
    let verdict = verdict(&infos);
    for (node, result) in &results {
        if let Err(failure) = result {
            say::error(format!("{node}: cannot read lock '{key}': {failure}"));
        }
    }
    let text = if args.json {
        format!("{}\n", quorum_json(key, &verdict, &results))
    } else {
        let mut out = match &verdict {
            Verdict::Held { token, nodes } => format!(
                "lock '{key}' is held on {nodes} of {total} nodes (a majority), token {token}\n"
            ),
            Verdict::Free { nodes } => {
                format!("lock '{key}' is free on {nodes} of {total} nodes (a majority)\n")
            }
            Verdict::Split { held } => {
                format!(
                    "lock '{key}' has no majority on {total} nodes: held on {held}, free on {}, unanswered on {}\n",
                    answered - held,
                    total - answered
                )
            }
        };
        for (node, result) in &results {
            if let Ok(info) = result {
                for line in info_text(key, info).lines() {
                    out.push_str(&format!("{node}: {line}\n"));
                }
            }
        }
        out
    };
    say::stdout(text.as_bytes())?;
    if answered < total / 2 + 1 {
        return Err(classified(
            Class::Unavailable,
            format!(
                "cannot read lock '{key}' on a majority: {} of {total} nodes did not answer",
                total - answered
            ),
        ));
    }
    Ok(0)
}

/// The JSON object of a lock on a quorum: the verdict, and each node's status object or error.
fn quorum_json(
    name: &str,
    verdict: &Verdict,
    results: &[(String, Result<LockInfo, Failure>)],
) -> String {
    let (state, token, agreeing) = match verdict {
        Verdict::Held { token, nodes } => ("held", json::string(token), *nodes),
        Verdict::Free { nodes } => ("free", "null".to_owned(), *nodes),
        Verdict::Split { .. } => ("split", "null".to_owned(), 0),
    };
    let answered = results.iter().filter(|(_, r)| r.is_ok()).count();
    let per_node = results.iter().map(|(node, result)| {
        let obj = Object::new().str("node", node);
        match result {
            Ok(info) => obj
                .raw("status", &info_json(name, info))
                .raw("error", "null"),
            Err(failure) => obj.raw("status", "null").str("error", &failure.to_string()),
        }
        .finish()
    });
    Object::new()
        .str("key", name)
        .str("state", state)
        .raw("token", &token)
        .int("agreeing", agreeing as u64)
        .int("nodes", results.len() as u64)
        .int("answered", answered as u64)
        .raw("per_node", &json::array(per_node))
        .finish()
}

/// `redlock list`: every held lock under the prefix (SCAN, never KEYS; on a Cluster, a SCAN on
/// every master). With several --url, every node is scanned and each lock read on all of them.
pub fn list(args: &ListArgs) -> anyhow::Result<i32> {
    let prefix = &args.conn.prefix;
    let mut endpoints = args.conn.endpoints()?;
    if endpoints.len() > 1 {
        return quorum_list(args, endpoints);
    }
    let endpoint = endpoints.remove(0);
    let found = lock_names(&endpoint, prefix)
        .map_err(unavailable)
        .context("cannot list locks")?;
    let mut redis = SingleRedis::new(endpoint, Keys::new(prefix, ""), false, WAKE_LINGER);
    let mut locks = Vec::new();
    for name in found {
        redis.set_keys(Keys::new(prefix, &name));
        match redis.inspect(TIMEOUT) {
            Ok(info) if info.held.is_some() => locks.push((name, info)),
            // Released since the SCAN, or a key of another kind that looks like a lock.
            Ok(_) | Err(crate::lock::Failure::Refused(_)) => {}
            Err(failure) => return Err(unavailable(failure)).context("cannot list locks"),
        }
    }
    let mut text = String::new();
    if args.json {
        text = format!(
            "{}\n",
            json::array(locks.iter().map(|(name, info)| info_json(name, info)))
        );
    } else {
        for (name, info) in &locks {
            text += &list_line(name, info, None);
        }
    }
    say::stdout(text.as_bytes())?;
    Ok(0)
}

/// `redlock release --force`: delete the lock whoever holds it and advance the fencing counter.
pub fn release(args: &ReleaseArgs) -> anyhow::Result<i32> {
    crate::say::set_key(&args.key);
    if !args.force {
        return Err(classified(
            Class::Usage,
            format!(
                "refusing to release lock '{}' without --force: it breaks the holder's lock \
                 (see: redlock status --key {})",
                args.key,
                crate::lock::shell_quote(&args.key)
            ),
        ));
    }
    let endpoints = args.conn.endpoints()?;
    let (quorum, nodes) = (endpoints.len() > 1, endpoints.len());
    let mut code = 0;
    let mut failed = 0;
    // On a quorum every node is released, one after another; a node that fails does not stop
    // the others, and its failure decides the status once all were tried.
    for endpoint in endpoints {
        let node = if quorum {
            format!("{endpoint}: ")
        } else {
            String::new()
        };
        let keys = Keys::new(&args.conn.prefix, &args.key);
        let mut redis = SingleRedis::new(endpoint, keys, false, WAKE_LINGER);
        let forced = match redis.force_release(args.token.as_deref(), TIMEOUT) {
            Ok(forced) => forced,
            Err(failure) => {
                let err = Err::<(), _>(unavailable(failure))
                    .with_context(|| format!("cannot release lock '{}'", args.key))
                    .unwrap_err();
                if !quorum {
                    return Err(err);
                }
                crate::say::error(format!("{err:#}"));
                failed += 1;
                continue;
            }
        };
        code = code.max(forced_text(&node, &args.key, forced)?);
    }
    if failed > 0 {
        return Err(classified(
            Class::Unavailable,
            format!(
                "lock '{}' was not released on {failed} of {nodes} nodes",
                args.key
            ),
        ));
    }
    Ok(code)
}

/// The names of the lock keys under `prefix` on `endpoint` (every master of a Cluster).
fn lock_names(endpoint: &Endpoint, prefix: &str) -> Result<BTreeSet<String>, Failure> {
    let nodes = match &endpoint.target {
        Target::Cluster { .. } => crate::cluster::masters(endpoint, Instant::now() + TIMEOUT)?
            .into_iter()
            .map(|(host, port)| endpoint.pinned(&host, port))
            .collect(),
        _ => vec![endpoint.clone()],
    };
    let pattern = format!("{}{{*}}", glob_escape(prefix));
    let mut found = BTreeSet::new();
    for node in nodes {
        let mut scanner = SingleRedis::new(node, Keys::new(prefix, ""), false, WAKE_LINGER);
        let mut cursor = 0;
        loop {
            let (next, keys) = scanner.scan(cursor, &pattern, TIMEOUT)?;
            // SCAN may return a key more than once; the set keeps one of each.
            found.extend(keys.into_iter().filter_map(|k| lock_name(prefix, &k)));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(found)
}

/// What each node of a quorum says of the lock `name`, read on all of them at once.
fn read_nodes(
    endpoints: &[Endpoint],
    prefix: &str,
    name: &str,
) -> Vec<(String, Result<LockInfo, Failure>)> {
    std::thread::scope(|s| {
        let reads: Vec<_> = endpoints
            .iter()
            .map(|endpoint| {
                let keys = Keys::new(prefix, name);
                let mut node = SingleRedis::new(endpoint.clone(), keys, false, WAKE_LINGER);
                (endpoint.to_string(), s.spawn(move || node.inspect(TIMEOUT)))
            })
            .collect();
        reads
            .into_iter()
            .map(|(node, read)| {
                let result = read
                    .join()
                    .unwrap_or_else(|_| Err(Failure::Refused("the read failed".into())));
                (node, result)
            })
            .collect()
    })
}

/// `redlock list` over a quorum: every node scanned, each lock found read on every node, and
/// the locks a majority holds listed with how many nodes hold them. A lock held on some nodes
/// where no majority agrees (two tokens, or nodes silent) is listed too, as such; one that a
/// majority finds free is free. A node that does not answer the scan is a stderr
/// line; fewer than a majority answering is exit 69.
fn quorum_list(args: &ListArgs, endpoints: Vec<Endpoint>) -> anyhow::Result<i32> {
    let prefix = &args.conn.prefix;
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
            Ok(Err(failure)) => say::error(format!("{endpoint}: cannot list locks: {failure}")),
            Err(_) => say::error(format!("{endpoint}: cannot list locks")),
        }
    }
    if answered < total / 2 + 1 {
        return Err(classified(
            Class::Unavailable,
            format!(
                "cannot list locks on a majority: {} of {total} nodes did not answer",
                total - answered
            ),
        ));
    }
    let mut text = String::new();
    let mut objects = Vec::new();
    for name in names {
        let results = read_nodes(&endpoints, prefix, &name);
        let infos: Vec<Option<&LockInfo>> = results.iter().map(|(_, r)| r.as_ref().ok()).collect();
        let verdict = verdict(&infos);
        if matches!(verdict, Verdict::Free { .. } | Verdict::Split { held: 0 }) {
            continue;
        }
        if args.json {
            objects.push(quorum_json(&name, &verdict, &results));
            continue;
        }
        // The line of the first node holding the majority's token (or any token, split).
        let shown = results.iter().find_map(|(_, r)| {
            let info = r.as_ref().ok()?;
            let (token, _) = info.held.as_ref()?;
            match &verdict {
                Verdict::Held { token: t, .. } if t != token => None,
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
    if args.json {
        text = format!("{}\n", json::array(objects.into_iter()));
    }
    say::stdout(text.as_bytes())?;
    Ok(0)
}

/// Print what a forced release did on one node (`node` prefixes the line); the exit status.
fn forced_text(node: &str, key: &str, forced: Forced) -> anyhow::Result<i32> {
    let mut code = 0;
    let text = match forced {
        Forced::Free { fence } => {
            format!("{node}lock '{key}' is free; nothing released (fencing counter {fence})\n")
        }
        Forced::Other { token, fence } => {
            code = crate::exit::CONFLICT;
            format!(
                "{node}lock '{key}' is held by token {token}, not the one given; left alone (fencing counter {fence})\n"
            )
        }
        Forced::Removed {
            token,
            fence,
            holder,
        } => {
            let whose = holder
                .as_ref()
                .map_or_else(|| "an unknown holder".to_owned(), holder_text);
            format!(
                "{node}released lock '{key}' held by {whose}, token {token}; fencing counter now {fence}\n"
            )
        }
    };
    say::stdout(text.as_bytes())?;
    Ok(code)
}

/// The lock name of `key` (`PREFIX{NAME}`), or None for keys that are not lock keys.
fn lock_name(prefix: &str, key: &[u8]) -> Option<String> {
    let key = std::str::from_utf8(key).ok()?;
    let name = key
        .strip_prefix(prefix)?
        .strip_prefix('{')?
        .strip_suffix('}')?;
    (!name.is_empty() && !name.starts_with('}')).then(|| name.to_owned())
}

/// `text` with the glob characters SCAN MATCH knows escaped.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One line of `list` for a held lock: name, lease left, fencing counter, holder (or token),
/// and `extra` (a quorum's node count) as a last field.
fn list_line(name: &str, info: &LockInfo, extra: Option<&str>) -> String {
    let Some((token, ttl)) = &info.held else {
        return String::new();
    };
    let holder = info
        .holder
        .as_ref()
        .map_or_else(|| format!("token {token}"), holder_text);
    let extra = extra.map_or_else(String::new, |e| format!("\t{e}"));
    format!(
        "{name}\t{}\tfence {}\t{holder}{extra}\n",
        expiry_text(*ttl),
        info.fence
    )
}

fn holder_text(holder: &Holder) -> String {
    format!("{} pid {} ({})", holder.host, holder.pid, holder.command)
}

fn expiry_text(ttl: Option<Duration>) -> String {
    match ttl {
        Some(ttl) => format!("expires in {}", humantime::format_duration(ttl)),
        None => "no expiry".to_owned(),
    }
}

fn since(unix: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_secs(unix);
    let ago = std::time::SystemTime::now().duration_since(at).map_or_else(
        |_| "in the future".to_owned(),
        |d| {
            format!(
                "{} ago",
                humantime::format_duration(Duration::from_secs(d.as_secs()))
            )
        },
    );
    format!("{} ({ago})", humantime::format_rfc3339_seconds(at))
}

fn info_text(name: &str, info: &LockInfo) -> String {
    let mut out = String::new();
    let state = if info.held.is_some() { "held" } else { "free" };
    out.push_str(&format!("lock '{name}' ({}) is {state}\n", info.keys.lock));
    if let Some((token, ttl)) = &info.held {
        if let Some(h) = &info.holder {
            out.push_str(&format!("  holder:   {} pid {}\n", h.host, h.pid));
            out.push_str(&format!("  command:  {}\n", h.command));
            out.push_str(&format!("  started:  {}\n", since(h.started)));
        } else {
            out.push_str("  holder:   unknown (no details stored with the lock)\n");
        }
        out.push_str(&format!("  lease:    {}\n", expiry_text(*ttl)));
        out.push_str(&format!("  token:    {token}\n"));
    }
    out.push_str(&format!("  fencing:  {}\n", info.fence));
    if let Some((ago, left)) = info.done {
        let ago = humantime::format_duration(Duration::from_secs(ago.as_secs()));
        let left = left.map_or_else(String::new, |l| {
            format!(
                "; --min-interval runs skip for another {}",
                humantime::format_duration(Duration::from_secs(l.as_secs()))
            )
        });
        out.push_str(&format!("  last success: {ago} ago{left}\n"));
    }
    out
}

fn ms(d: Duration) -> i128 {
    d.as_millis() as i128
}

fn info_json(name: &str, info: &LockInfo) -> String {
    let mut obj = Object::new()
        .str("key", name)
        .str("redis_key", &info.keys.lock)
        .str("state", if info.held.is_some() { "held" } else { "free" })
        .int("fence", info.fence);
    match &info.held {
        Some((token, ttl)) => {
            obj = obj.str("token", token).opt_int("ttl_ms", ttl.map(ms));
        }
        None => obj = obj.raw("token", "null").raw("ttl_ms", "null"),
    }
    obj = match &info.holder {
        Some(h) => obj.raw(
            "holder",
            &Object::new()
                .str("host", &h.host)
                .int("pid", h.pid)
                .str("command", &h.command)
                .int("started", h.started)
                .finish(),
        ),
        None => obj.raw("holder", "null"),
    };
    let (ago, left) = match info.done {
        Some((ago, left)) => (Some(ms(ago)), left.map(ms)),
        None => (None, None),
    };
    obj.opt_int("last_success_ms_ago", ago)
        .opt_int("min_interval_left_ms", left)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(token: Option<&str>) -> LockInfo {
        LockInfo {
            keys: Keys::new("redlock:", "q"),
            fence: 1,
            held: token.map(|t| (t.to_owned(), None)),
            holder: None,
            done: None,
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

    #[test]
    fn only_lock_keys_are_locks() {
        let p = "redlock:";
        assert_eq!(lock_name(p, b"redlock:{a}"), Some("a".into()));
        assert_eq!(lock_name(p, b"redlock:{a}b}"), Some("a}b".into()));
        for other in [
            &b"redlock:{a}:fence"[..],
            b"redlock:{a}:wake",
            b"redlock:{a}:wake:0f4c",
            b"redlock:{a}:holder",
            b"redlock:{a}:done",
            b"redlock:{}",
            b"other:{a}",
            b"redlock:{\xff}",
        ] {
            assert_eq!(lock_name(p, other), None, "{other:?}");
        }
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape("redlock:"), "redlock:");
    }
}
