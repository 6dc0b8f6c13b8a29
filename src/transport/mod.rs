//! The connection to the server that holds a lock: the one Redis, the master the sentinels
//! name, or the Cluster node that owns the lock's hash slot; found again after a failover (a
//! dropped connection, READONLY, the sentinels naming another master) or a slot move (MOVED,
//! ASK). Every step of a request — sentinel lookup, connect, redirects — fits in one deadline.
//! Also what a URL means (`endpoint`), how it is shown (`redact`), and, when a first request
//! fails in a way that says little, what kind of server answered (`diagnose`).
//!
//! May use the redis crate and `report`; nothing else of redlock's. The transport error,
//! [`Failure`], lives here and every layer above passes it on.

pub mod cluster;
mod diagnose;
pub mod endpoint;
pub mod redact;
pub mod sentinel;

use std::fmt;
use std::time::{Duration, Instant};

use redis::{ConnectionInfo, RedisError, RedisResult};

use endpoint::{Endpoint, Target};

/// Why a request failed.
#[derive(Debug)]
pub enum Failure {
    /// No answer: connection refused, dropped, or timed out. Worth retrying.
    Unreachable(String),
    /// Redis answered with an error (credentials, permissions, read-only replica, ...).
    Refused(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(m) | Failure::Refused(m) => f.write_str(m),
        }
    }
}

/// The most MOVED / ASK redirects one request follows (a slot moves once; more is a loop).
const MAX_HOPS: u32 = 5;
/// How old the sentinels' word on the master may be before a request asks them again. Renewals
/// and releases thus go to the master the sentinels name now, not to a demoted one that still
/// accepts writes until it is reconfigured.
pub const SENTINEL_RECHECK: Duration = Duration::from_millis(100);

/// An open connection to one data node.
pub(crate) struct Node {
    pub conn: redis::Connection,
    /// How it was reached, for telling what answered when the first request fails.
    info: ConnectionInfo,
    /// `host:port` (or the socket path), for messages.
    pub addr: String,
    /// The address the sentinels named for it (Sentinel only).
    named: Option<(String, u16)>,
    verified: Instant,
    /// No request has been answered on this connection yet.
    pub fresh: bool,
}

/// The way to the node that holds one lock, over one connection re-opened as needed.
pub(crate) struct Connection {
    endpoint: Endpoint,
    node: Option<Node>,
    /// Where the lock's slot lives, as the last MOVED said (Cluster).
    owner: Option<(String, u16)>,
    /// The sentinel that answered last, and its connection.
    sentinel: Option<(usize, redis::Connection)>,
}

impl Connection {
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            node: None,
            owner: None,
            sentinel: None,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Send one request with `send` to the node that holds the lock, within `deadline`:
    /// following MOVED and ASK, and dropping the connection after any I/O failure or a
    /// READONLY reply so that the next request finds the master again.
    pub fn request<T>(
        &mut self,
        deadline: Instant,
        mut send: impl FnMut(&mut Node) -> RedisResult<T>,
    ) -> Result<T, Failure> {
        let mut hops = 0;
        let mut ask: Option<(String, u16)> = None;
        loop {
            let left = time_left(deadline, &self.endpoint)?;
            let result = if let Some((host, port)) = ask.take() {
                // The slot is being migrated: this one request goes to the importing node.
                let mut node = self.open_at(&host, port, deadline)?;
                let r = redis::cmd("ASKING")
                    .exec(&mut node.conn)
                    .and_then(|()| send(&mut node));
                r.map_err(|e| (node.addr, e, None))
            } else {
                let node = self.node(deadline)?;
                timeouts(node, left)?;
                let r = send(node);
                if r.is_ok() {
                    node.fresh = false;
                }
                let first = node.fresh.then(|| node.info.clone());
                r.map_err(|e| (node.addr.clone(), e, first))
            };
            let (addr, err, first) = match result {
                Ok(value) => return Ok(value),
                Err(failed) => failed,
            };
            let clustered = matches!(self.endpoint.target, Target::Cluster { .. });
            match cluster::redirect(&err) {
                Some(_) if !clustered => {
                    return Err(Failure::Refused(format!(
                        "Redis at {addr} is a Cluster node that does not serve the lock's slot; \
                         use a redis+cluster:// URL"
                    )));
                }
                Some((moved, to)) if hops < MAX_HOPS => {
                    hops += 1;
                    if moved {
                        crate::report!(
                            2,
                            "moved" { "node" => node_name(&to.0, to.1) },
                            "the lock's slot is served by {}; following it",
                            node_name(&to.0, to.1)
                        );
                        self.owner = Some(to);
                        self.node = None;
                    } else {
                        ask = Some(to);
                    }
                    continue;
                }
                _ => {}
            }
            return Err(self.failed(&addr, err, first));
        }
    }

    /// What a failed request means, dropping the connection when it cannot be trusted. `first`:
    /// how the node was reached, when this was the first request on its connection; then a
    /// failure that says little is explained by asking the server what it is.
    fn failed(&mut self, addr: &str, err: RedisError, first: Option<ConnectionInfo>) -> Failure {
        let direct = matches!(self.endpoint.target, Target::Direct);
        let explain = first.filter(|_| direct || err.code() != Some("READONLY"));
        let failure = match err.code() {
            // One server named directly is what it is: there is no master to look for.
            Some("READONLY") if !direct => {
                self.forget();
                Failure::Unreachable(format!(
                    "Redis at {addr} is a replica now (a failover?); looking for the master again"
                ))
            }
            Some(code @ ("TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" | "LOADING")) => {
                return Failure::Unreachable(format!(
                    "Redis at {addr} cannot serve the lock right now ({code}: {})",
                    err.detail().unwrap_or("")
                ));
            }
            _ => {
                let failure = classify(&addr, err.clone());
                if let Failure::Unreachable(_) = failure {
                    self.forget();
                }
                failure
            }
        };
        match explain {
            Some(info) => {
                let explained = diagnose::explain(&info, addr, &err, failure);
                if let Failure::Refused(_) = explained {
                    self.forget();
                }
                explained
            }
            None => failure,
        }
    }

    fn forget(&mut self) {
        self.node = None;
        self.owner = None;
    }

    /// The connection to the node that holds the lock, opened (found) first if needed.
    fn node(&mut self, deadline: Instant) -> Result<&mut Node, Failure> {
        if let (Target::Sentinel { .. }, Some(node)) = (&self.endpoint.target, &self.node)
            && node.verified.elapsed() > SENTINEL_RECHECK
        {
            let (named, addr) = (node.named.clone(), node.addr.clone());
            // Half the time left at most, so a silent sentinel leaves time for the request.
            let now = Instant::now();
            let ask_until = now + deadline.saturating_duration_since(now) / 2;
            match self.master(ask_until) {
                Ok((host, port)) if named.as_ref() != Some(&(host.clone(), port)) => {
                    crate::report!(
                        1,
                        "master_changed" { "master" => node_name(&host, port) },
                        "the sentinels name a new master, {}; following it",
                        node_name(&host, port)
                    );
                    self.node = None;
                }
                Ok(_) => {}
                // No sentinel answers: keep to the master we know (once demoted it answers
                // READONLY) rather than fail a renewal for want of the sentinels.
                Err(failure) => crate::report!(
                    2,
                    "could not ask the sentinels for the master ({failure}); keeping {addr}"
                ),
            }
            if let Some(node) = &mut self.node {
                node.verified = Instant::now();
            }
        }
        if self.node.is_none() {
            let node = self.open(deadline)?;
            self.node = Some(node);
        }
        Ok(self.node.as_mut().expect("just opened"))
    }

    fn open(&mut self, deadline: Instant) -> Result<Node, Failure> {
        match self.endpoint.target.clone() {
            Target::Direct => {
                let info = self.endpoint.info.clone();
                let addr = info.addr().to_string();
                connect(info, addr, deadline)
            }
            Target::Sentinel { .. } => {
                let (host, port) = self.master(deadline)?;
                let mut node = self.open_at(&host, port, deadline)?;
                timeouts(&mut node, time_left(deadline, &self.endpoint)?)?;
                // The sentinels' word can trail a failover: only a master may hold the lock.
                let role = redis::cmd("ROLE")
                    .query::<redis::Value>(&mut node.conn)
                    .map_err(|e| classify(&node.addr, e))?;
                if !sentinel::is_master(&role) {
                    return Err(Failure::Unreachable(format!(
                        "Redis at {} is not a master yet (a failover in progress?)",
                        node.addr
                    )));
                }
                node.named = Some((host, port));
                Ok(node)
            }
            Target::Cluster { seeds } => {
                // The owner if a MOVED named it, else any seed: a MOVED reply routes from there.
                let mut last = None;
                let nodes: Vec<_> = self.owner.iter().chain(seeds.iter()).collect();
                for (i, (host, port)) in nodes.iter().enumerate() {
                    // A share of the time left each, so one silent seed cannot use it all.
                    let until = share(deadline, nodes.len() - i);
                    match self.open_at(host, *port, until) {
                        Ok(node) => return Ok(node),
                        Err(failure) => last = Some(failure),
                    }
                    if Instant::now() >= deadline {
                        break;
                    }
                }
                Err(last.unwrap_or_else(|| no_time(&self.endpoint)))
            }
        }
    }

    fn open_at(&self, host: &str, port: u16, deadline: Instant) -> Result<Node, Failure> {
        let info = self.endpoint.node(host, port);
        connect(info, node_name(host, port), deadline)
    }

    /// The master's address, as a sentinel names it now.
    fn master(&mut self, deadline: Instant) -> Result<(String, u16), Failure> {
        sentinel::master(&self.endpoint, &mut self.sentinel, deadline)
    }
}

/// The deadline for one of `remaining` tries that share the time left until `deadline`.
pub(crate) fn share(deadline: Instant, remaining: usize) -> Instant {
    let now = Instant::now();
    let parts = u32::try_from(remaining.max(1)).unwrap_or(u32::MAX);
    now + deadline.saturating_duration_since(now) / parts
}

/// `host:port` as messages show it.
pub(crate) fn node_name(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A new connection, set up (AUTH, SELECT) within `deadline`.
fn connect(info: ConnectionInfo, addr: String, deadline: Instant) -> Result<Node, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Failure::Unreachable(format!(
            "no answer from Redis at {addr} in time"
        )));
    }
    let conn = redis::Client::open(info.clone())
        .and_then(|client| client.get_connection_with_timeout(left))
        .map_err(|e| {
            let failure = classify(&addr, e.clone());
            diagnose::explain(&info, &addr, &e, failure)
        })?;
    Ok(Node {
        conn,
        info,
        addr,
        named: None,
        verified: Instant::now(),
        fresh: true,
    })
}

/// A connection opened within `deadline` to `info`, for one-off use (sentinels, SCAN per node).
pub(crate) fn connect_to(
    info: ConnectionInfo,
    addr: &str,
    deadline: Instant,
) -> Result<redis::Connection, Failure> {
    let mut node = connect(info, addr.to_owned(), deadline)?;
    timeouts(&mut node, time_left_at(deadline, addr)?)?;
    Ok(node.conn)
}

/// Set the connection's I/O time limits to `left`.
pub(crate) fn timeouts(node: &mut Node, left: Duration) -> Result<(), Failure> {
    set_timeouts(&node.conn, left).map_err(|e| classify(&node.addr, e))
}

pub(crate) fn set_timeouts(conn: &redis::Connection, left: Duration) -> RedisResult<()> {
    let left = left.max(Duration::from_millis(1));
    conn.set_read_timeout(Some(left))?;
    conn.set_write_timeout(Some(left))
}

fn time_left(deadline: Instant, endpoint: &Endpoint) -> Result<Duration, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(no_time(endpoint))
    } else {
        Ok(left)
    }
}

pub(crate) fn time_left_at(deadline: Instant, at: &str) -> Result<Duration, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(Failure::Unreachable(format!(
            "no answer from Redis at {at} in time"
        )))
    } else {
        Ok(left)
    }
}

fn no_time(endpoint: &Endpoint) -> Failure {
    Failure::Unreachable(format!("no answer from Redis at {endpoint} in time"))
}

/// A failed request as a [`Failure`], naming where it went.
pub(crate) fn classify(at: &dyn fmt::Display, err: RedisError) -> Failure {
    // A read timeout surfaces as EAGAIN, sometimes wrapped (during a TLS handshake, say).
    let text = err.to_string();
    if err.is_timeout() || text.contains("Resource temporarily unavailable") {
        Failure::Unreachable(format!("no answer from Redis at {at} in time"))
    } else if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
        Failure::Unreachable(format!("cannot reach Redis at {at}: {text}"))
    } else if err.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
    {
        Failure::Refused(format!(
            "Redis at {at} refused the credentials (wrong password or user name)"
        ))
    } else {
        Failure::Refused(format!("Redis at {at} answered with an error: {text}"))
    }
}
