//! `redlock release --force`: break a lock on one server or on every node of a quorum.

use anyhow::Context;

use crate::admin::render::{failed_json, forced_json, forced_text};
use crate::admin::{Servers, TIMEOUT, unavailable};
use crate::error::{Class, classified};
use crate::exit;
use crate::lock::{Keys, SingleRedis, WAKE_LINGER};
use crate::report;
use crate::report::json::{self, Object};

/// `redlock release --force`: delete the lock whoever holds it and advance the fencing counter.
///
/// The command line checks `--force` first; this breaks the lock whoever holds it, unless
/// `token` is given and the lock holds another.
/// With `json`, one JSON object on stdout: what was done (one server), or `per_node` (a quorum).
pub fn release(
    servers: Servers,
    key: &str,
    token: Option<&str>,
    json: bool,
) -> anyhow::Result<i32> {
    report::set_key(key);
    let Servers { endpoints, prefix } = servers;
    let (quorum, nodes) = (endpoints.len() > 1, endpoints.len());
    let mut code = 0;
    let mut failed = 0;
    let mut objects = Vec::new();
    // On a quorum every node is released, one after another; a node that fails does not stop
    // the others, and its failure decides the status once all were tried.
    for endpoint in endpoints {
        let endpoint_name = endpoint.to_string();
        let node = if quorum {
            format!("{endpoint}: ")
        } else {
            String::new()
        };
        let keys = Keys::new(&prefix, key);
        let mut redis = SingleRedis::new(endpoint, keys, false, WAKE_LINGER);
        let forced = match redis.force_release(token, TIMEOUT) {
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
        let (text, left_alone) = forced_text(&node, key, &forced);
        if json {
            objects.push(forced_json(quorum.then_some(&endpoint_name), key, &forced));
        } else {
            report::stdout(text.as_bytes())?;
        }
        if left_alone {
            code = exit::CONFLICT;
        }
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
    if failed > 0 {
        return Err(classified(
            Class::Unavailable,
            format!("lock '{key}' was not released on {failed} of {nodes} nodes"),
        ));
    }
    Ok(code)
}
