//! The admin subcommands: `status` and `list` read locks, `release --force` breaks one.
//!
//! Results go to stdout (they are what was asked for); errors to stderr as everywhere else.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::Context;

use crate::cli::{ListArgs, ReleaseArgs, StatusArgs};
use crate::endpoint::Target;
use crate::error::{Class, classified};
use crate::json::{self, Object};
use crate::lock::{Forced, Holder, Keys, LockInfo, SingleRedis, WAKE_LINGER};
use crate::say;

/// The time limit of each admin request.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The one Redis `what` reads: several URLs (a quorum) are a usage error, since one node's
/// view is not the lock's.
fn redis(conn: &crate::cli::ConnArgs, name: &str, what: &str) -> anyhow::Result<SingleRedis> {
    let endpoint = conn.endpoint(what)?;
    let keys = Keys::new(&conn.prefix, name);
    Ok(SingleRedis::new(endpoint, keys, false, WAKE_LINGER))
}

fn unavailable(failure: crate::lock::Failure) -> anyhow::Error {
    classified(Class::Unavailable, failure.to_string())
}

/// `redlock status`: print the lock's state; exit 0 whether it is free or held.
pub fn status(args: &StatusArgs) -> anyhow::Result<i32> {
    crate::say::set_key(&args.key);
    let mut redis = redis(&args.conn, &args.key, "status")?;
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

/// `redlock list`: every held lock under the prefix, found with SCAN (on a Cluster, a SCAN on
/// every master).
pub fn list(args: &ListArgs) -> anyhow::Result<i32> {
    let prefix = &args.conn.prefix;
    let mut redis = redis(&args.conn, "", "list")?;
    let endpoint = args.conn.endpoint("list")?;
    let nodes = match &endpoint.target {
        Target::Cluster { .. } => crate::cluster::masters(&endpoint, Instant::now() + TIMEOUT)
            .map_err(unavailable)
            .context("cannot list locks")?
            .into_iter()
            .map(|(host, port)| endpoint.pinned(&host, port))
            .collect(),
        _ => vec![endpoint],
    };
    let pattern = format!("{}{{*}}", glob_escape(prefix));
    let mut found = BTreeSet::new();
    for node in nodes {
        let mut scanner = SingleRedis::new(node, Keys::new(prefix, ""), false, WAKE_LINGER);
        let mut cursor = 0;
        loop {
            let (next, keys) = scanner
                .scan(cursor, &pattern, TIMEOUT)
                .map_err(unavailable)
                .context("cannot list locks")?;
            // SCAN may return a key more than once; the set keeps one of each.
            found.extend(keys.into_iter().filter_map(|k| lock_name(prefix, &k)));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
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
            let (token, ttl) = info.held.as_ref().expect("held");
            let holder = info
                .holder
                .as_ref()
                .map_or_else(|| format!("token {token}"), holder_text);
            text += &format!(
                "{}\t{}\tfence {}\t{holder}\n",
                name,
                expiry_text(*ttl),
                info.fence
            );
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
