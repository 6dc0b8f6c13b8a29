//! Redis Sentinel: which master the sentinels name for a service (SENTINEL
//! GET-MASTER-ADDR-BY-NAME), asked by hand so that the lookup fits the caller's deadline.

use std::time::Instant;

use redis::{RedisError, Value};

use crate::backend::redis::transport::endpoint::{Endpoint, Target};
use crate::backend::redis::transport::{self, Failure, Link, classify, diagnose};

/// The master's address as the first sentinel that answers names it. `cached` keeps the
/// connection to the sentinel that answered last (tried first next time).
///
/// Refused when every sentinel that answered knows no such service (a typo in the URL);
/// Unreachable when none answered.
pub(crate) fn master(
    endpoint: &Endpoint,
    cached: &mut Option<(usize, Link)>,
    deadline: Instant,
) -> Result<(String, u16), Failure> {
    let Target::Sentinel {
        sentinels, service, ..
    } = &endpoint.target
    else {
        unreachable!("a sentinel lookup for a non-sentinel endpoint");
    };
    let mut last = None;
    let mut unknown = 0;
    let first = cached.as_ref().map_or(0, |(i, _)| *i);
    for (tried, i) in (0..sentinels.len())
        .map(|k| (first + k) % sentinels.len())
        .enumerate()
    {
        // A share of the time left each, so one silent sentinel cannot use it all.
        let until = transport::share(deadline, sentinels.len() - tried);
        let (host, port) = &sentinels[i];
        let at = format!("sentinel {}", transport::node_name(host, *port));
        if let Err(failure) = transport::time_left_at(until, &at) {
            keep(&mut last, failure);
            break;
        }
        let conn = match cached.take() {
            Some((j, conn)) if j == i => conn,
            _ => match transport::connect_to_sentinel(endpoint, host, *port, &at, until) {
                Ok(conn) => conn,
                Err(failure) => {
                    keep(&mut last, failure);
                    continue;
                }
            },
        };
        let mut conn = conn;
        conn.set_deadline(until);
        match ask(endpoint, (host, *port), service, &at, &mut conn) {
            Said::Named(addr) => {
                *cached = Some((i, conn));
                return Ok(addr);
            }
            Said::Unknown => {
                unknown += 1;
                *cached = Some((i, conn));
            }
            Said::Unexpected(failure) => last = Some(failure),
            Said::Failed(failure) => keep(&mut last, failure),
        }
    }
    Err(none_named(endpoint, service, unknown, last))
}

/// Why no sentinel named a master: a service that `unknown` of them do not know (a typo in the
/// URL), or else the `last` failure, or else silence.
fn none_named(
    endpoint: &Endpoint,
    service: &str,
    unknown: usize,
    last: Option<Failure>,
) -> Failure {
    if unknown > 0 {
        return unknown_service(service);
    }
    last.unwrap_or_else(|| {
        Failure::Unreachable(format!("no sentinel of {endpoint} answered in time").into())
    })
}

/// Sentinels that know no `service`: a typo in the URL, most likely.
pub(super) fn unknown_service(service: &str) -> Failure {
    Failure::Refused(
        format!(
            "the sentinels know no service '{service}' (check the name after the hosts in the URL)"
        )
        .into(),
    )
}

/// What one sentinel said of the service.
enum Said {
    /// Its master's address.
    Named((String, u16)),
    /// It knows no such service.
    Unknown,
    /// A reply that is no answer (its connection is not kept).
    Unexpected(Failure),
    /// An error (its connection is not kept).
    Failed(Failure),
}

/// One sentinel's answer to GET-MASTER-ADDR-BY-NAME `service`, on `conn`.
fn ask(
    endpoint: &Endpoint,
    (host, port): (&str, u16),
    service: &str,
    at: &str,
    conn: &mut Link,
) -> Said {
    let reply = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(service)
        .query::<Value>(conn);
    match reply {
        Ok(Value::Array(items)) => match address(&items) {
            Some(addr) => Said::Named(addr),
            None => Said::Unexpected(Failure::Refused(
                format!("unexpected reply from {at}: {items:?}").into(),
            )),
        },
        Ok(Value::Nil) => Said::Unknown,
        Ok(other) => Said::Unexpected(Failure::Refused(
            format!("unexpected reply from {at}: {other:?}").into(),
        )),
        Err(e) => Said::Failed(failed(endpoint, (host, port), at, e)),
    }
}

/// What a sentinel's error to the lookup means. NOAUTH with no password of the sentinels' own
/// given is not a wrong one: it says where the password goes.
pub(super) fn failed(
    endpoint: &Endpoint,
    (host, port): (&str, u16),
    at: &str,
    e: RedisError,
) -> Failure {
    if e.code() == Some("NOAUTH") && target_auth(endpoint).is_none() {
        let place = transport::node_name(host, port);
        return Failure::Refused(diagnose::sentinel_needs_password(&place).into());
    }
    classify(&at, e)
}

/// The sentinels' own credentials, if the URL gives any.
fn target_auth(endpoint: &Endpoint) -> Option<&(Option<String>, String)> {
    match &endpoint.target {
        Target::Sentinel { auth, .. } => auth.as_ref(),
        _ => None,
    }
}

/// Keep `failure` as the one to report, unless `last` says more: a sentinel that answered (or
/// was found to be the wrong kind: plain text behind `rediss+`) says more than one that could
/// not be reached, or ran out of time after it.
pub(super) fn keep(last: &mut Option<Failure>, failure: Failure) {
    if !matches!(
        (&*last, &failure),
        (Some(Failure::Refused(_)), Failure::Unreachable(_))
    ) {
        *last = Some(failure);
    }
}

/// `[host, port]` from GET-MASTER-ADDR-BY-NAME.
pub(super) fn address(items: &[Value]) -> Option<(String, u16)> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match items {
        [host, port] => Some((text(host)?, text(port)?.parse().ok()?)),
        _ => None,
    }
}
