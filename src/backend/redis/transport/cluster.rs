//! Redis Cluster: reading MOVED / ASK redirects, and the masters that `redlock list` scans.
//!
//! A lock's keys all carry its `{NAME}` hash tag, so one lock lives on one node: redlock talks
//! to that node alone, learning where it is from the first MOVED reply (see [`crate::transport`]).

use std::time::Instant;

use redis::{RedisError, Value};

use crate::backend::redis::transport::endpoint::{Endpoint, Target};
use crate::backend::redis::transport::{self, Failure, classify};

/// `Some((true, to))` for MOVED, `Some((false, to))` for ASK, else None.
pub(crate) fn redirect(err: &RedisError) -> Option<(bool, (String, u16))> {
    let moved = match err.code()? {
        "MOVED" => true,
        "ASK" => false,
        _ => return None,
    };
    let (addr, _slot) = err.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((moved, (host.to_owned(), port.parse().ok()?)))
}

/// Every master of the cluster (from CLUSTER SLOTS, asked of the first seed that answers).
pub(crate) fn masters(
    endpoint: &Endpoint,
    deadline: Instant,
) -> Result<Vec<(String, u16)>, Failure> {
    let Target::Cluster { seeds } = &endpoint.target else {
        unreachable!("cluster masters of a non-cluster endpoint");
    };
    let mut last = None;
    for (host, port) in seeds {
        let at = transport::node_name(host, *port);
        let reply = transport::connect_to(endpoint, endpoint.node(host, *port), &at, deadline)
            .and_then(|mut conn| {
                match redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut conn) {
                    // A server with cluster support disabled ("ERR This instance has cluster
                    // support disabled") is one node that serves every slot, as `run` finds
                    // it (it never answers MOVED): every lock is there.
                    Err(e) if e.code() == Some("ERR") => Ok(None),
                    other => other.map(Some).map_err(|e| classify(&at, e)),
                }
            });
        match reply {
            Ok(None) => return Ok(vec![(host.clone(), *port)]),
            Ok(Some(Value::Array(ranges))) => {
                let mut out: Vec<(String, u16)> = Vec::new();
                for range in &ranges {
                    let Value::Array(fields) = range else {
                        continue;
                    };
                    let Some(Value::Array(master)) = fields.get(2) else {
                        continue;
                    };
                    let name = match master.first() {
                        Some(Value::BulkString(b)) if !b.is_empty() => {
                            String::from_utf8_lossy(b).into_owned()
                        }
                        // An empty host means "the node you asked".
                        _ => host.clone(),
                    };
                    let Some(Value::Int(p)) = master.get(1) else {
                        continue;
                    };
                    let node = (name, *p as u16);
                    if !out.contains(&node) {
                        out.push(node);
                    }
                }
                return Ok(out);
            }
            Ok(Some(other)) => {
                last = Some(Failure::Refused(
                    format!("unexpected reply to CLUSTER SLOTS from {at}: {other:?}").into(),
                ))
            }
            Err(failure) => last = Some(failure),
        }
    }
    Err(last
        .unwrap_or_else(|| Failure::Unreachable(format!("no node of {endpoint} answered").into())))
}
