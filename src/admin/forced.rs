//! What `release --force` did, as text and as JSON: one node's result, or a node that failed.

use crate::admin::render::{field, held_as_text, holder_json, holder_text, kind_fields};
use crate::exit;
use crate::lock::Foreign;
use crate::lock::{Forced, HeldAs, Holder, Kind};
use crate::report::json::Object;
use crate::report::shell_quote;

/// What a forced release did on one node (`node` prefixes the line), and the exit status it
/// asks for (0, or 75/64 when it left the lock alone).
pub(crate) fn forced_text(node: &str, key: &str, forced: &Forced) -> (String, i32) {
    let raw_key = key;
    let key = &field(key);
    match forced {
        Forced::Free { fence, cleared: 0 } => (
            format!("{node}lock '{key}' is free; nothing released (fencing counter {fence})\n"),
            0,
        ),
        Forced::Free { fence, cleared } => (
            format!(
                "{node}lock '{key}' is free; cleared its --fair queue of {cleared} waiter(s) \
                 (live ones join it again at their next attempt; fencing counter {fence})\n"
            ),
            0,
        ),
        Forced::Other { token, fence } => (
            format!(
                "{node}lock '{key}' is held by token {token}, not the one given; left alone (fencing counter {fence})\n"
            ),
            exit::CONFLICT,
        ),
        Forced::NotAHolder {
            held_as,
            holders,
            fence,
        } => (
            format!(
                "{node}lock '{key}' is held by {holders} ({}), none with the token given; left alone (fencing counter {fence})\n",
                held_as_text(held_as)
            ),
            exit::CONFLICT,
        ),
        Forced::Several {
            held_as,
            holders,
            fence,
        } => (
            format!(
                "{node}lock '{key}' is held by {holders} ({}); name the one to remove with --token (`redlock status --key {}` shows their tokens); left alone (fencing counter {fence})\n",
                held_as_text(held_as),
                field(&shell_quote(raw_key))
            ),
            exit::USAGE,
        ),
        Forced::Removed {
            token,
            fence,
            holder,
            held_as,
            left,
        } => (
            format!(
                "{node}{}, token {token}; fencing counter now {fence}\n",
                removed(key, holder.as_ref(), held_as, *left)
            ),
            0,
        ),
        Forced::Foreign {
            what,
            fence,
            removed,
        } => foreign_text(node, key, what, *fence, *removed),
        Forced::Unfenced {
            foreign,
            token,
            gone,
        } => unfenced_text(node, key, foreign, token.as_deref(), *gone),
    }
}

/// What a forced release did to a key at the lock's name that redlock did not make: removed
/// it, or (a token expected) left it alone.
fn foreign_text(node: &str, key: &str, what: &str, fence: i64, removed: bool) -> (String, i32) {
    if removed {
        let text = format!(
            "{node}removed lock '{key}': its key was {what} that redlock did not make; fencing counter now {fence}\n"
        );
        return (text, 0);
    }
    (
        format!(
            "{node}lock '{key}' is {what} that redlock did not make, held by no token; left alone (fencing counter {fence})\n"
        ),
        exit::CONFLICT,
    )
}

/// What a forced release stopped by a fencing counter redlock did not write did: the lock (or
/// the holder of `token`) `gone` now, or left as it was; the counter left alone either way.
fn unfenced_text(
    node: &str,
    key: &str,
    foreign: &Foreign,
    token: Option<&str>,
    gone: bool,
) -> (String, i32) {
    let Foreign { said, remedy } = foreign;
    if !gone {
        return (
            format!(
                "{node}left lock '{key}' alone: {said}, so nothing was removed ({remedy}, then \
                 release it again)\n"
            ),
            exit::UNAVAILABLE,
        );
    }
    let now = match token {
        Some(token) => format!(
            "lock '{key}' is not held by token {token} now (removed, or its holder had gone)"
        ),
        None => format!("lock '{key}' is free now"),
    };
    (
        format!("{node}{now}; {said}, so it was left alone, not advanced ({remedy})\n"),
        0,
    )
}

/// Whom `release --force` removed from the lock `key` (shown already), and what is left.
fn removed(key: &str, holder: Option<&Holder>, held_as: &HeldAs, left: u64) -> String {
    let whose = holder.map_or_else(
        || "an unknown holder".to_owned(),
        |h| field(&holder_text(h)),
    );
    if *held_as == HeldAs::Kind(Kind::Exclusive) {
        format!("released lock '{key}' held by {whose}")
    } else {
        format!(
            "removed {whose} from lock '{key}' ({}; {left} holder(s) left)",
            held_as_text(held_as)
        )
    }
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
        Forced::Free { fence, .. } => ("free", None, Some(*fence), None),
        Forced::Other { token, fence } => ("other_token", Some(token), Some(*fence), None),
        Forced::NotAHolder { fence, .. } => ("other_token", None, Some(*fence), None),
        Forced::Several { fence, .. } => ("several_holders", None, Some(*fence), None),
        Forced::Removed {
            token,
            fence,
            holder,
            ..
        } => ("released", Some(token), Some(*fence), holder.as_ref()),
        Forced::Foreign { fence, removed, .. } => (
            if *removed { "released" } else { "other_token" },
            None,
            Some(*fence),
            None,
        ),
        // The token asked for, when its holder is gone now (the release removed it before it
        // came to the counter, or it had ended already).
        Forced::Unfenced { gone, token, .. } => (
            if *gone {
                "free_unfenced"
            } else {
                "left_unfenced"
            },
            token.as_ref().filter(|_| *gone),
            None,
            None,
        ),
    };
    let exclusive = HeldAs::Kind(Kind::Exclusive);
    let (held_as, left) = match forced {
        Forced::Free { .. } => (None, None),
        Forced::Other { .. } => (Some(&exclusive), Some(1)),
        Forced::NotAHolder {
            held_as, holders, ..
        }
        | Forced::Several {
            held_as, holders, ..
        } => (Some(held_as), Some(*holders)),
        Forced::Removed { held_as, left, .. } => (Some(held_as), Some(*left)),
        Forced::Foreign { what, removed, .. } => {
            (Some(&HeldAs::Foreign(what.clone())), removed.then_some(0))
        }
        Forced::Unfenced { .. } => (None, None),
    };
    obj = obj.str("result", result);
    obj = match token {
        Some(token) => obj.str("token", token),
        None => obj.raw("token", "null"),
    };
    obj = obj
        .opt_int("fence", fence.map(i128::from))
        .int("queue_cleared", cleared)
        .raw(
            "holder",
            &holder.map_or_else(|| "null".to_owned(), holder_json),
        );
    if let Forced::Unfenced { foreign, .. } = forced {
        obj = obj.str("fence_problem", &foreign.said);
    }
    obj = kind_fields(obj, held_as);
    obj.opt_int("holders_left", left.map(i128::from))
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
