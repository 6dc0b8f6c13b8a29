//! How the admin subcommands show what they found: text for people, JSON for programs.

use std::time::{Duration, UNIX_EPOCH};

use crate::admin::runs;
use crate::admin::{Unread, Verdict};
use crate::lock::record::Summary;
use crate::lock::{Fence, HeldAs, Holder, Kind, LockInfo, Place, Several};
use crate::report;
use crate::report::json::{self, Object};

/// `status` over a quorum as text: the majority's verdict, then each node's view, its lines
/// prefixed with the node.
pub(crate) fn quorum_text(
    key: &str,
    verdict: &Verdict,
    results: &[(String, Result<LockInfo, Unread>)],
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
    results: &[(String, Result<LockInfo, Unread>)],
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
    let summaries: Vec<&Summary> = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|info| &info.runs))
        .collect();
    let obj = Object::new()
        .str("key", name)
        .str("state", state)
        .raw("token", &token)
        .int("agreeing", agreeing as u64)
        .int("nodes", results.len() as u64)
        .int("answered", answered as u64)
        .raw("per_node", &json::array(per_node));
    runs::summary_fields(obj, &runs::quorum_summary(&summaries)).finish()
}

/// How a lock is held, for people: several holders' kind, or what is at its key instead.
pub(crate) fn held_as_text(held_as: &HeldAs) -> String {
    match held_as {
        HeldAs::Kind(Kind::Exclusive) => "an exclusive lock".to_owned(),
        HeldAs::Kind(Kind::Limit(n)) => format!("a semaphore, --limit {n}"),
        HeldAs::Kind(Kind::Shared) => "shared, --shared".to_owned(),
        HeldAs::Unknown(text) if text.is_empty() => "how they hold it is not recorded".to_owned(),
        HeldAs::Unknown(text) => {
            format!(
                "held as '{}', which this redlock does not know",
                field(text)
            )
        }
        HeldAs::Foreign(what) => format!("{what} that redlock did not make"),
    }
}

/// One line of `list` for a held lock: name, lease left (the last lease of several),
/// fencing counter, waiters, holder (or token; several: how they hold it and each of them),
/// and `extra` (a quorum's node count) as a last field.
pub(crate) fn list_line(name: &str, info: &LockInfo, extra: Option<&str>) -> String {
    let (ttl, holders) = match (&info.held, &info.several) {
        (Some((token, ttl)), _) => (
            *ttl,
            info.holder
                .as_ref()
                .map_or_else(|| format!("token {token}"), holder_text),
        ),
        (None, Some(several)) => {
            let each: Vec<String> = several
                .places
                .iter()
                .map(|p| {
                    p.holder
                        .as_ref()
                        .map_or_else(|| format!("token {}", p.token), holder_text)
                })
                .collect();
            (
                several.ttl,
                format!("{}: {}", several_text(several), each.join("; ")),
            )
        }
        (None, None) => return String::new(),
    };
    let extra = extra.map_or_else(String::new, |e| format!("\t{e}"));
    format!(
        "{}\t{}\tfence {}\t{} waiting\t{}{extra}\n",
        field(name),
        expiry_text(ttl),
        match &info.fence {
            Fence::Unreadable(_) => "unknown".to_owned(),
            Fence::Counter(fence) => fence.to_string(),
        },
        info.waiters(),
        field(&holders)
    )
}

/// `semaphore 2/3`, `shared by 2`: how many hold a lock held by several, and how.
fn several_text(several: &Several) -> String {
    let n = several.places.len();
    match several.kind() {
        Some(Kind::Limit(limit)) => format!("semaphore {n}/{limit}"),
        Some(Kind::Shared) => format!("shared by {n}"),
        _ => format!("{n} holders, {}", held_as_text(&several.held_as)),
    }
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

/// `kind` (`lock`, `semaphore`, `shared`; `set` when several holders did not record it, the
/// stored text when this redlock does not know it, `foreign` for a key redlock did not make;
/// null when free) and `limit` (a semaphore's N, else null).
pub(crate) fn kind_fields(obj: Object, held_as: Option<&HeldAs>) -> Object {
    let (kind, limit) = match held_as {
        None => (None, None),
        Some(HeldAs::Kind(Kind::Exclusive)) => (Some("lock"), None),
        Some(HeldAs::Kind(Kind::Limit(n))) => (Some("semaphore"), Some(*n)),
        Some(HeldAs::Kind(Kind::Shared)) => (Some("shared"), None),
        // Holders that recorded nothing are a set of holders, as JSON has always named them.
        Some(HeldAs::Unknown(text)) if text.is_empty() => (Some("set"), None),
        Some(HeldAs::Unknown(text)) => (Some(text.as_str()), None),
        Some(HeldAs::Foreign(_)) => (Some("foreign"), None),
    };
    let obj = match kind {
        Some(kind) => obj.str("kind", kind),
        None => obj.raw("kind", "null"),
    };
    obj.opt_int("limit", limit.map(i128::from))
}

pub(crate) fn holder_json(h: &Holder) -> String {
    Object::new()
        .str("host", &h.host)
        .int("pid", h.pid)
        .str("command", &h.command)
        .int("started", h.started)
        .finish()
}

pub(crate) fn holder_text(holder: &Holder) -> String {
    format!("{} pid {} ({})", holder.host, holder.pid, holder.command)
}

fn expiry_text(ttl: Option<Duration>) -> String {
    match ttl {
        Some(ttl) => format!("expires in {}", report::duration(ttl)),
        None => "no expiry".to_owned(),
    }
}

fn since(unix: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_secs(unix);
    let ago = std::time::SystemTime::now().duration_since(at).map_or_else(
        |_| "in the future".to_owned(),
        |d| format!("{} ago", report::duration(Duration::from_secs(d.as_secs()))),
    );
    format!("{} ({ago})", humantime::format_rfc3339_seconds(at))
}

/// `status` as text: the state, the holder (or each of several), the lease, the fencing
/// counter, the last success, the queue and the waiters.
pub(crate) fn info_text(name: &str, info: &LockInfo) -> String {
    let mut out = String::new();
    let state = match &info.several {
        Some(several) => match several.kind() {
            Some(Kind::Limit(n)) => {
                format!(
                    "held by {} of {n} (a semaphore, --limit {n})",
                    several.places.len()
                )
            }
            Some(Kind::Shared) => format!("held shared by {} (--shared)", several.places.len()),
            _ => format!(
                "held by {} ({})",
                several.places.len(),
                held_as_text(&several.held_as)
            ),
        },
        None if info.held.is_some() => "held".to_owned(),
        None => "free".to_owned(),
    };
    out.push_str(&format!(
        "lock '{}' ({}) is {state}\n",
        field(name),
        field(&info.stored_key)
    ));
    if let Some((token, ttl)) = &info.held {
        if let Some(h) = &info.holder {
            out.push_str(&format!("  holder:   {} pid {}\n", field(&h.host), h.pid));
            out.push_str(&format!("  command:  {}\n", field(&h.command)));
            out.push_str(&format!("  started:  {}\n", since(h.started)));
        } else {
            out.push_str("  holder:   unknown (no details stored with the lock)\n");
        }
        out.push_str(&format!("  lease:    {}\n", expiry_text(*ttl)));
        out.push_str(&format!("  token:    {token}\n"));
    }
    if let Some(several) = &info.several {
        for place in &several.places {
            out.push_str(&format!("  holder:   {}\n", place_text(place)));
        }
        out.push_str(&format!(
            "  lease:    {} (the last of them)\n",
            expiry_text(several.ttl)
        ));
    }
    out.push_str(&match &info.fence {
        Fence::Unreadable(foreign) => format!(
            "  fencing:  unknown: {} ({})\n",
            foreign.said, foreign.remedy
        ),
        Fence::Counter(fence) => format!("  fencing:  {fence}\n"),
    });
    out.push_str(&runs::summary_text(&info.runs, info.done));
    if let Some((waiters, oldest)) = info.queue {
        out.push_str(&format!(
            "  fair queue: {waiters} waiting, the oldest for {}\n",
            report::duration(Duration::from_secs(oldest.as_secs()))
        ));
    }
    let queued = info.queue.map_or(0, |(n, _)| n);
    out.push_str(&match info.waiters() {
        0 => "  waiters:  none\n".to_owned(),
        n if queued > 0 => {
            format!("  waiters:  {n} ({queued} of them in the first-come-first-served queue)\n")
        }
        n => format!("  waiters:  {n}\n"),
    });
    out
}

/// One of several holders on one line: who, for how long, its lease, its token, its command.
fn place_text(place: &Place) -> String {
    let secs = |d: Duration| report::duration(Duration::from_secs(d.as_secs()));
    let who = place.holder.as_ref().map_or_else(
        || "unknown (no details stored)".to_owned(),
        |h| format!("{} pid {}", field(&h.host), h.pid),
    );
    let age = place
        .age
        .map_or_else(String::new, |age| format!(", for {}", secs(age)));
    let command = place
        .holder
        .as_ref()
        .map_or_else(String::new, |h| format!(": {}", field(&h.command)));
    format!(
        "{who}{age}, lease {} left, token {}{command}",
        report::duration(place.lease),
        place.token
    )
}

fn ms(d: Duration) -> i128 {
    d.as_millis() as i128
}

/// `status` as one JSON object. `holders` lists every holder, the exclusive one too; `token`,
/// `ttl_ms` and `holder` keep describing the exclusive holder (`ttl_ms`: the last lease of
/// several).
pub(crate) fn info_json(name: &str, info: &LockInfo) -> String {
    let mut obj = Object::new()
        .str("key", name)
        .str("server_key", &info.stored_key)
        .str("state", if info.is_held() { "held" } else { "free" });
    obj = match &info.fence {
        // 0 would read as a counter: none can be read.
        Fence::Unreadable(foreign) => obj.raw("fence", "null").str("fence_problem", &foreign.said),
        Fence::Counter(fence) => obj.int("fence", *fence),
    };
    match (&info.held, &info.several) {
        (Some((token, ttl)), _) => {
            obj = obj.str("token", token).opt_int("ttl_ms", ttl.map(ms));
        }
        (None, Some(several)) => {
            obj = obj
                .raw("token", "null")
                .opt_int("ttl_ms", several.ttl.map(ms));
        }
        (None, None) => obj = obj.raw("token", "null").raw("ttl_ms", "null"),
    }
    obj = match &info.holder {
        Some(h) => obj.raw("holder", &holder_json(h)),
        None => obj.raw("holder", "null"),
    };
    let exclusive = HeldAs::Kind(Kind::Exclusive);
    let held_as = match (&info.held, &info.several) {
        (Some(_), _) => Some(&exclusive),
        (None, Some(several)) => Some(&several.held_as),
        (None, None) => None,
    };
    obj = kind_fields(obj, held_as);
    let holders: Vec<String> = match (&info.held, &info.several) {
        (Some((token, ttl)), _) => vec![place_json(token, *ttl, info.holder.as_ref(), None)],
        (None, Some(several)) => several
            .places
            .iter()
            .map(|p| place_json(&p.token, Some(p.lease), p.holder.as_ref(), p.age))
            .collect(),
        (None, None) => Vec::new(),
    };
    obj = obj.raw("holders", &json::array(holders));
    let (ago, left) = match info.done {
        Some((ago, left)) => (Some(ms(ago)), left.map(ms)),
        None => (None, None),
    };
    let obj = obj
        .opt_int("min_interval_success_ms_ago", ago)
        .opt_int("min_interval_left_ms", left)
        .int("fair_queue", info.queue.map_or(0, |(n, _)| n))
        .opt_int(
            "fair_queue_oldest_ms",
            info.queue.map(|(_, oldest)| ms(oldest)),
        )
        .int("waiting", info.waiters());
    runs::summary_fields(obj, &info.runs).finish()
}

/// One holder in `status --json`'s `holders`.
fn place_json(
    token: &str,
    ttl: Option<Duration>,
    holder: Option<&Holder>,
    age: Option<Duration>,
) -> String {
    let obj = Object::new()
        .str("token", token)
        .opt_int("ttl_ms", ttl.map(ms));
    let obj = match holder {
        Some(h) => obj
            .str("host", &h.host)
            .int("pid", h.pid)
            .str("command", &h.command)
            .int("started", h.started),
        None => obj
            .raw("host", "null")
            .raw("pid", "null")
            .raw("command", "null")
            .raw("started", "null"),
    };
    obj.opt_int("age_ms", age.map(ms)).finish()
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
