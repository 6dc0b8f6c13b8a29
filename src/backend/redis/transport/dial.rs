//! Opening a connection to one of an endpoint's nodes or sentinels within a deadline: the
//! link and its set-up, a master's role and the server's identity asked in the same round
//! trip, and a failure that says little explained by asking what answered (`diagnose`).

use std::time::Instant;

use redis::{ConnectionInfo, RedisError};

use super::endpoint::Endpoint;
use super::link::{Ask, Link};
use super::role::{self, Identity, Named, Role};
use super::{Failure, Node, classify, diagnose, failure, time_left_at};

/// A new connection to `info` (one of `endpoint`'s nodes), set up (AUTH, SELECT) within
/// `deadline`; with a role (who named the server), only to a master (ROLE in the same round
/// trip, before anything is written to the server), what a replica means depending on who
/// named it; and asking which server it is when `ask` says so (INFO server, in that round
/// trip too).
pub(super) fn connect(
    endpoint: &Endpoint,
    info: ConnectionInfo,
    addr: String,
    deadline: Instant,
    (role, ask): (Option<Named>, Ask),
) -> Result<Node, Failure> {
    open_link(endpoint, info, addr, deadline, (role, ask), Peer::Node)
}

/// What a connection reaches: a data node, or one of a Sentinel endpoint's sentinels (which
/// changes what a failure to reach it means, and the URL to suggest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    Node,
    Sentinel,
}

/// [`connect`], to a data node or to a sentinel.
fn open_link(
    endpoint: &Endpoint,
    info: ConnectionInfo,
    addr: String,
    deadline: Instant,
    (role, ask): (Option<Named>, Ask),
    peer: Peer,
) -> Result<Node, Failure> {
    time_left_at(deadline, &addr)?;
    let tls = endpoint.tls_config().map_err(|e| {
        Failure::Refused(format!("cannot use TLS with Redis at {addr}: {e}").into())
    })?;
    let explain = |err: RedisError| {
        let failure = classify(&addr, err.clone());
        let reached = diagnose::Reached {
            endpoint,
            info: &info,
            addr: &addr,
            peer,
        };
        diagnose::explain(&reached, &err, failure)
    };
    let (conn, answers) = Link::open(&info, tls, deadline, ask).map_err(|opening| {
        match (opening.oversized, &opening.said) {
            (true, _) => failure::too_large(&addr, opening.error),
            (false, Some(said)) => failure::turned_away(&addr, said, opening.error),
            (false, None) => explain(opening.error),
        }
    })?;
    if let (Some(named), Some(reply)) = (role, answers.role) {
        // ROLE is the first command a server without a password requirement sees.
        let role = Role::of(reply).map_err(explain)?;
        role::admit(role, &addr, named)?;
    }
    let identity = answers.identity.map(|reply| Identity::of(&reply));
    if let Some(Identity::Unknown(why)) = &identity {
        crate::report!(
            1,
            IdentityUnchecked { "node" => addr },
            "could not ask Redis at {addr} which server it is ({why}); not checked whether \
             another node of the quorum is the same server"
        );
    }
    Ok(Node {
        conn,
        info,
        addr,
        named: None,
        verified: Instant::now(),
        fresh: true,
        identity,
    })
}

/// A connection opened within `deadline` to `info`, one of `endpoint`'s nodes or sentinels,
/// for one-off use (sentinels, CLUSTER SLOTS); its requests end by `deadline` too.
pub(crate) fn connect_to(
    endpoint: &Endpoint,
    info: ConnectionInfo,
    addr: &str,
    deadline: Instant,
) -> Result<Link, Failure> {
    let mut node = connect(
        endpoint,
        info,
        addr.to_owned(),
        deadline,
        (None, Ask::default()),
    )?;
    node.conn.set_deadline(deadline);
    Ok(node.conn)
}

/// [`connect_to`] the sentinel at `host:port` of `endpoint` (named `addr` in messages).
pub(crate) fn connect_to_sentinel(
    endpoint: &Endpoint,
    host: &str,
    port: u16,
    addr: &str,
    deadline: Instant,
) -> Result<Link, Failure> {
    let info = endpoint.sentinel(host, port);
    let mut node = open_link(
        endpoint,
        info,
        addr.to_owned(),
        deadline,
        (None, Ask::default()),
        Peer::Sentinel,
    )?;
    node.conn.set_deadline(deadline);
    Ok(node.conn)
}
