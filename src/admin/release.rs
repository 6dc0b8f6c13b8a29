//! `redlock release --force`: break a lock on one server or on every node of a quorum.

use anyhow::Context;

use crate::admin::forced::{failed_json, forced_json, forced_text};
use crate::admin::{TIMEOUT, unavailable};
use crate::error::{Class, classified};
use crate::exit;
use crate::lock::Backend;
use crate::report;
use crate::report::json::{self, Object};

/// `redlock release --force`: delete the lock whoever holds it and advance the fencing counter.
///
/// The command line checks `--force` first; this breaks the lock whoever holds it, unless
/// `token` is given and the lock holds another. A lock held by several (a semaphore, shared
/// holders) loses one holder: the one `token` names, or the only one; with several holders and
/// no `token` nothing is removed and it exits 64 (removing them all would stop jobs nobody
/// named; `status` shows the tokens).
/// With `json`, one JSON object on stdout: what was done (one server), or `per_node` (a quorum).
pub(crate) fn release(
    backend: &dyn Backend,
    key: &str,
    token: Option<&str>,
    json: bool,
) -> anyhow::Result<i32> {
    report::set_key(key);
    let names = backend.nodes();
    let (quorum, nodes) = (names.len() > 1, names.len());
    let mut code = 0;
    let mut failed = 0;
    // Held by several and no --token: which holder to remove is the operator's to say.
    let mut refused = None;
    let mut objects = Vec::new();
    // On a quorum every node is released, one after another; a node that fails does not stop
    // the others, and its failure decides the status once all were tried.
    for (index, endpoint_name) in names.into_iter().enumerate() {
        let node = if quorum {
            format!("{endpoint_name}: ")
        } else {
            String::new()
        };
        let forced = match backend.node(index).force_release(key, token, TIMEOUT) {
            Ok(forced) => forced,
            Err(failure) => {
                let err = Err::<(), _>(unavailable(failure))
                    .with_context(|| format!("cannot release lock '{key}'"))
                    .unwrap_err();
                if !quorum {
                    return Err(err);
                }
                report::error(format!("{err:#}"));
                objects.push(failed_json(&endpoint_name, key, &format!("{err:#}")));
                failed += 1;
                continue;
            }
        };
        let (text, status) = forced_text(&node, key, &forced);
        if json {
            objects.push(forced_json(quorum.then_some(&endpoint_name), key, &forced));
        } else if quorum || status != exit::USAGE {
            report::stdout(text.as_bytes())?;
        }
        if status == exit::USAGE {
            refused = Some(text.trim_end().to_owned());
        }
        code = code.max(status);
    }
    if json {
        let text = match objects.as_slice() {
            [one] if !quorum => one.clone(),
            _ => Object::new()
                .str("key", key)
                .raw("per_node", &json::array(objects))
                .finish(),
        };
        report::stdout(format!("{text}\n").as_bytes())?;
    }
    if let Some(why) = refused {
        let why = if quorum {
            format!("lock '{key}' is held by several on some nodes; nothing removed there")
        } else {
            why
        };
        return Err(classified(Class::Usage, why));
    }
    if failed > 0 {
        return Err(classified(
            Class::Unavailable,
            format!("lock '{key}' was not released on {failed} of {nodes} nodes"),
        ));
    }
    Ok(code)
}
