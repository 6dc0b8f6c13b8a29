//! How the admin subcommands show what they found: text for people, JSON for programs.

use std::time::{Duration, UNIX_EPOCH};

use crate::admin::Verdict;
use crate::lock::{Failure, Forced, Holder, LockInfo};
use crate::report::json::{self, Object};

/// `status` over a quorum as text: the majority's verdict, then each node's view, its lines
/// prefixed with the node.
pub(crate) fn quorum_text(
    key: &str,
    verdict: &Verdict,
    results: &[(String, Result<LockInfo, Failure>)],
) -> String {
    let total = results.len();
    let answered = results.iter().filter(|(_, r)| r.is_ok()).count();
    let key = &field(key);
    let mut out = match verdict {
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
    for (node, result) in results {
        if let Ok(info) = result {
            for line in info_text(key, info).lines() {
                out.push_str(&format!("{node}: {line}\n"));
            }
        }
    }
    out
}

/// The JSON object of a lock on a quorum: the verdict, and each node's status object or error.
pub(crate) fn quorum_json(
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

/// What a forced release did on one node (`node` prefixes the line), and whether it left the
/// lock alone because another token holds it.
pub(crate) fn forced_text(node: &str, key: &str, forced: &Forced) -> (String, bool) {
    let key = &field(key);
    match forced {
        Forced::Free { fence, cleared: 0 } => (
            format!("{node}lock '{key}' is free; nothing released (fencing counter {fence})\n"),
            false,
        ),
        Forced::Free { fence, cleared } => (
            format!(
                "{node}lock '{key}' is free; cleared its --fair queue of {cleared} waiter(s) \
                 (live ones join it again at their next attempt; fencing counter {fence})\n"
            ),
            false,
        ),
        Forced::Other { token, fence } => (
            format!(
                "{node}lock '{key}' is held by token {token}, not the one given; left alone (fencing counter {fence})\n"
            ),
            true,
        ),
        Forced::Removed {
            token,
            fence,
            holder,
        } => {
            let whose = holder
                .as_ref()
                .map_or_else(|| "an unknown holder".to_owned(), holder_text);
            (
                format!(
                    "{node}released lock '{key}' held by {whose}, token {token}; fencing counter now {fence}\n"
                ),
                false,
            )
        }
    }
}

/// One line of `list` for a held lock: name, lease left, fencing counter, holder (or token),
/// and `extra` (a quorum's node count) as a last field.
pub(crate) fn list_line(name: &str, info: &LockInfo, extra: Option<&str>) -> String {
    let Some((token, ttl)) = &info.held else {
        return String::new();
    };
    let holder = info
        .holder
        .as_ref()
        .map_or_else(|| format!("token {token}"), holder_text);
    let extra = extra.map_or_else(String::new, |e| format!("\t{e}"));
    format!(
        "{}\t{}\tfence {}\t{}{extra}\n",
        field(name),
        expiry_text(*ttl),
        info.fence,
        field(&holder)
    )
}

/// `text` as one tab-separated field of one line: a backslash, tab, newline or other control
/// character is written as an escape (`\\`, `\t`, `\n`, `\u{1b}`), so `cut -f1` and
/// `while read` see one lock a line whatever its name holds.
pub(crate) fn field(text: &str) -> String {
    if !text.chars().any(|c| c == '\\' || c.is_control()) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c == '\\' || c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// What `release --force` did on one node, as a JSON object (`node` when on a quorum).
pub(crate) fn forced_json(node: Option<&str>, key: &str, forced: &Forced) -> String {
    let mut obj = Object::new().str("key", key);
    if let Some(node) = node {
        obj = obj.str("node", node);
    }
    let cleared = match forced {
        Forced::Free { cleared, .. } => *cleared,
        _ => 0,
    };
    let (result, token, fence, holder) = match forced {
        Forced::Free { fence, .. } => ("free", None, *fence, None),
        Forced::Other { token, fence } => ("other_token", Some(token), *fence, None),
        Forced::Removed {
            token,
            fence,
            holder,
        } => ("released", Some(token), *fence, holder.as_ref()),
    };
    obj = obj.str("result", result);
    obj = match token {
        Some(token) => obj.str("token", token),
        None => obj.raw("token", "null"),
    };
    obj.int("fence", fence)
        .int("queue_cleared", cleared)
        .raw(
            "holder",
            &holder.map_or_else(|| "null".to_owned(), holder_json),
        )
        .raw("error", "null")
        .finish()
}

/// A node of a quorum where `release --force` failed, as a JSON object.
pub(crate) fn failed_json(node: &str, key: &str, error: &str) -> String {
    Object::new()
        .str("key", key)
        .str("node", node)
        .str("result", "error")
        .raw("token", "null")
        .raw("fence", "null")
        .raw("holder", "null")
        .str("error", error)
        .finish()
}

fn holder_json(h: &Holder) -> String {
    Object::new()
        .str("host", &h.host)
        .int("pid", h.pid)
        .str("command", &h.command)
        .int("started", h.started)
        .finish()
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

pub(crate) fn info_text(name: &str, info: &LockInfo) -> String {
    let mut out = String::new();
    let state = if info.held.is_some() { "held" } else { "free" };
    out.push_str(&format!(
        "lock '{}' ({}) is {state}\n",
        field(name),
        field(&info.keys.lock)
    ));
    if let Some((token, ttl)) = &info.held {
        if let Some(h) = &info.holder {
            out.push_str(&format!("  holder:   {} pid {}\n", h.host, h.pid));
            out.push_str(&format!("  command:  {}\n", field(&h.command)));
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
    if let Some((waiters, oldest)) = info.queue {
        out.push_str(&format!(
            "  fair queue: {waiters} waiting, the oldest for {}\n",
            humantime::format_duration(Duration::from_secs(oldest.as_secs()))
        ));
    }
    out
}

fn ms(d: Duration) -> i128 {
    d.as_millis() as i128
}

pub(crate) fn info_json(name: &str, info: &LockInfo) -> String {
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
        Some(h) => obj.raw("holder", &holder_json(h)),
        None => obj.raw("holder", "null"),
    };
    let (ago, left) = match info.done {
        Some((ago, left)) => (Some(ms(ago)), left.map(ms)),
        None => (None, None),
    };
    obj.opt_int("last_success_ms_ago", ago)
        .opt_int("min_interval_left_ms", left)
        .int("fair_queue", info.queue.map_or(0, |(n, _)| n))
        .opt_int(
            "fair_queue_oldest_ms",
            info.queue.map(|(_, oldest)| ms(oldest)),
        )
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_stay_on_one_line() {
        assert_eq!(field("nightly backup"), "nightly backup");
        assert_eq!(field("a\tb\nc\\d\u{1b}"), "a\\tb\\nc\\\\d\\u{1b}");
        assert_eq!(field("é{ü}"), "é{ü}");
    }
}
