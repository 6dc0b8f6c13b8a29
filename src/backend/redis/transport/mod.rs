//! The connection to the server that holds a lock: the one Redis, the master the sentinels
//! name, or the Cluster node that owns the lock's hash slot; found again after a failover (a
//! dropped connection, READONLY, the sentinels naming another master) or a slot move (MOVED,
//! ASK). Every step of a request — sentinel lookup, connect, set-up, redirects — fits in one
//! deadline, and no reply larger than redlock needs is read (`link`: redlock's own connection,
//! `tls`: its rustls set-up; `dial`: opening one and setting it up). Only a master may hold
//! a lock (`role`: ROLE in the set-up).
//! Also what a URL means (`endpoint`; the parameters each scheme takes: `url`), how it is shown
//! (`redact`), and, when a first request fails in a way that says little, what kind of server
//! answered (`diagnose`).
//!
//! May use the redis crate, rustls, `report` and `backend::url` (a URL's text, cut as every
//! backend cuts it); nothing else of redlock's. The transport
//! error, [`Failure`] (`failure`), lives here and every layer above passes it on.

pub mod cluster;
mod confirm;
mod diagnose;
mod dial;
pub mod endpoint;
mod failure;
pub(crate) mod link;
pub mod redact;
mod role;
pub mod sentinel;
pub(crate) mod tls;
pub(crate) mod url;

use std::time::{Duration, Instant};

use redis::{ConnectionInfo, RedisError, RedisResult};

pub use crate::lock::{Failure, Reason};
use dial::connect;
pub(crate) use dial::{Peer, connect_to, connect_to_sentinel};
use endpoint::{Endpoint, Target};
pub(crate) use failure::{classify, is_denied};
use link::Ask;
pub(crate) use link::Link;
pub(crate) use role::Identity;
use role::Named;

/// The most MOVED / ASK redirects one request follows (a slot moves once; more is a loop).
const MAX_HOPS: u32 = 5;
/// How old the sentinels' word on the master may be before a request asks them again. Renewals
/// and releases thus go to the master the sentinels name now, not to a demoted one that still
/// accepts writes until it is reconfigured.
pub const SENTINEL_RECHECK: Duration = Duration::from_millis(100);

/// An open connection to one data node.
pub(crate) struct Node {
    pub conn: Link,
    /// How it was reached, for telling what answered when the first request fails.
    info: ConnectionInfo,
    /// `host:port` (or the socket path), for messages.
    pub addr: String,
    /// The address the sentinels named for it (Sentinel only).
    named: Option<(String, u16)>,
    verified: Instant,
    /// No request has been answered on this connection yet.
    pub fresh: bool,
    /// Which server it reaches, when the connection was asked to find out.
    identity: Option<Identity>,
}

/// The way to the node that holds one lock, over one connection re-opened as needed.
pub(crate) struct Connection {
    endpoint: Endpoint,
    node: Option<Node>,
    /// Where the lock's slot lives, as the last MOVED said (Cluster).
    owner: Option<(String, u16)>,
    /// The sentinel that answered last, and its connection.
    sentinel: Option<(usize, Link)>,
    /// The last request reached a node and got no reply redlock could read (cut off, timed
    /// out, too large, unreadable): it may have been carried out.
    unanswered: bool,
    /// The owner a MOVED named could not be reached, and why: a seed that sends the request
    /// there again (its master just died, no failover yet) is not the node to blame.
    owner_down: Option<((String, u16), String)>,
    /// Ask each new data-node connection which server it reaches ([`Connection::identify`]).
    identify: bool,
    /// Every sentinel of the URL, asked at once ([`Connection::confirm_master`]).
    panel: Option<confirm::Panel>,
    /// The master a majority of the sentinels named last, and when.
    confirmed: Option<((String, u16), Instant)>,
}

/// A request that failed on a node: its address, the error, whether a reply was refused as
/// too large, and how the node was reached when this was its connection's first request.
struct Failed {
    addr: String,
    err: RedisError,
    oversized: bool,
    first: Option<ConnectionInfo>,
}

impl Connection {
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            node: None,
            owner: None,
            sentinel: None,
            unanswered: false,
            owner_down: None,
            identify: false,
            panel: None,
            confirmed: None,
        }
    }

    /// Sentinel only: go on only if a majority of the sentinels given in the URL name one
    /// master now, and follow it if it is not the one the connection reaches. Asked of all the
    /// sentinels at once, within `deadline`. Called before a take and
    /// before each renewal; a lock on any other kind of endpoint has nothing to confirm.
    pub fn confirm_master(&mut self, deadline: Instant) -> Result<(), Failure> {
        let Target::Sentinel { sentinels, .. } = &self.endpoint.target else {
            return Ok(());
        };
        self.unanswered = false;
        let count = sentinels.len();
        let panel = self.panel.get_or_insert_with(|| confirm::Panel::new(count));
        // Half the time left when a connection is open (the request needs the rest). Without
        // one, all of it, and what explaining a sentinel's failure takes, as the lookup does.
        let now = Instant::now();
        let open = self.node.is_some();
        let share = if open { 2 } else { 1 };
        let until = now + deadline.saturating_duration_since(now) / share;
        let (named, votes) = panel.majority(&self.endpoint, until, !open)?;
        crate::report!(
            2,
            "the sentinels confirm {} as the master ({votes} of {count} agree; {} µs)",
            node_name(&named.0, named.1),
            now.elapsed().as_micros()
        );
        if let Some(node) = &mut self.node {
            if node.named.as_ref() == Some(&named) {
                node.verified = Instant::now();
            } else {
                crate::report!(
                    1,
                    MasterChanged { "master" => node_name(&named.0, named.1) },
                    "the sentinels name a new master, {}; following it",
                    node_name(&named.0, named.1)
                );
                self.node = None;
            }
        }
        self.confirmed = Some((named, Instant::now()));
        Ok(())
    }

    /// From now on, ask each new connection's server which server it is (INFO server's
    /// `run_id`, in the set-up's round trip): a quorum's nodes must be told apart.
    pub fn identify(&mut self) {
        self.identify = true;
    }

    /// Which server the lock's node is ([`Connection::identify`] asked), connecting to it
    /// first, within `deadline`, if no connection is open; None when not asked.
    pub fn identity(&mut self, deadline: Instant) -> Result<Option<Identity>, Failure> {
        let node = self.node(deadline)?;
        Ok(node.identity.clone())
    }

    /// [`Connection::identity`] of the connection open now, without any I/O; None when none is.
    pub fn open_identity(&self) -> Option<Option<Identity>> {
        self.node.as_ref().map(|node| node.identity.clone())
    }

    /// Whether the last request may have been carried out although its reply never came: it
    /// reached a node and got no reply redlock could read.
    pub fn unanswered(&self) -> bool {
        self.unanswered
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Send one request with `send` to the node that holds the lock, within `deadline`:
    /// following MOVED and ASK, and dropping the connection after any I/O failure or a
    /// READONLY reply so that the next request finds the master again. Every read and write of
    /// the request (of a new connection's set-up too) ends by `deadline`, and a reply larger
    /// than [`link::MAX_REPLY`] is refused rather than read.
    pub fn request<T>(
        &mut self,
        deadline: Instant,
        mut send: impl FnMut(&mut Node) -> RedisResult<T>,
    ) -> Result<T, Failure> {
        let mut hops = 0;
        let mut ask: Option<(String, u16)> = None;
        self.unanswered = false;
        loop {
            time_left(deadline, &self.endpoint)?;
            let Failed {
                addr,
                err,
                oversized,
                first,
            } = match self.attempt(ask.take(), deadline, &mut send)? {
                Ok(value) => return Ok(value),
                Err(failed) => failed,
            };
            // A server's error is an answer (a script that fails takes nothing: see guard.lua);
            // only a redirect, an answer, goes round again, so an Ok finds this still false.
            self.unanswered = oversized || err.code().is_none();
            if let Some(failure) = self.cut_short(&addr, &err, oversized) {
                return Err(failure);
            }
            let clustered = matches!(self.endpoint.target, Target::Cluster { .. });
            match cluster::redirect(&err) {
                Some(_) if !clustered => {
                    return Err(Failure::Refused(Reason::caused_by(
                        format!(
                            "Redis at {addr} is a Cluster node that does not serve the lock's \
                             slot; use a redis+cluster:// URL"
                        ),
                        err,
                    )));
                }
                Some((moved, to)) if hops < MAX_HOPS => {
                    hops += 1;
                    ask = self.follow(moved, to);
                }
                _ => return Err(self.failed(&addr, err, first)),
            }
        }
    }

    /// One try of a request: to the node importing the slot when `ask` says so (ASKING first,
    /// this request only), else to the node that holds the lock. Where it failed, how, and
    /// (`Err` outside) why no node could be reached.
    fn attempt<T>(
        &mut self,
        ask: Option<(String, u16)>,
        deadline: Instant,
        send: &mut impl FnMut(&mut Node) -> RedisResult<T>,
    ) -> Result<Result<T, Failed>, Failure> {
        if let Some((host, port)) = ask {
            // The slot is being migrated: this one request goes to the importing node.
            let mut node = self.open_at(&host, port, deadline, (None, Ask::default()))?;
            node.conn.set_deadline(deadline);
            let r = redis::cmd("ASKING")
                .exec(&mut node.conn)
                .and_then(|()| send(&mut node));
            let oversized = node.conn.oversized();
            return Ok(r.map_err(|err| Failed {
                addr: node.addr,
                err,
                oversized,
                first: None,
            }));
        }
        let node = self.node(deadline)?;
        node.conn.set_deadline(deadline);
        let r = send(node);
        if r.is_ok() {
            node.fresh = false;
        }
        let first = node.fresh.then(|| node.info.clone());
        let oversized = node.conn.oversized();
        let broken = !redis::ConnectionLike::is_open(&node.conn);
        let r = r.map_err(|err| Failed {
            addr: node.addr.clone(),
            err,
            oversized,
            first,
        });
        if broken {
            // Mid-reply or gone: never read from again.
            self.node = None;
        }
        Ok(r)
    }

    /// After a redirect to `to`: a MOVED slot is followed from now on; an ASK is for the next
    /// try only, which the answer is.
    fn follow(&mut self, moved: bool, to: (String, u16)) -> Option<(String, u16)> {
        if !moved {
            return Some(to);
        }
        crate::report!(
            2,
            Moved { "node" => node_name(&to.0, to.1) },
            "the lock's slot is served by {}; following it",
            node_name(&to.0, to.1)
        );
        self.owner = Some(to);
        self.node = None;
        None
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
                Failure::Unreachable(Reason::caused_by(
                    format!(
                        "Redis at {addr} is a replica now (a failover?); looking for the master again"
                    ),
                    err.clone(),
                ))
            }
            Some(code @ ("TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" | "LOADING")) => {
                return Failure::Unreachable(Reason::caused_by(
                    format!(
                        "Redis at {addr} cannot serve the lock right now ({code}: {})",
                        err.detail().unwrap_or("")
                    ),
                    err,
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
                let reached = diagnose::Reached {
                    endpoint: &self.endpoint,
                    info: &info,
                    addr,
                    peer: Peer::Node,
                };
                let explained = diagnose::explain(&reached, &err, failure);
                if let Failure::Refused(_) = explained {
                    self.forget();
                }
                explained
            }
            None => failure,
        }
    }

    /// A failure that ends a request at once: a reply too large, or a MOVED to the owner that
    /// just could not be reached.
    fn cut_short(&mut self, addr: &str, err: &RedisError, oversized: bool) -> Option<Failure> {
        if oversized {
            self.forget();
            return Some(failure::too_large(&addr, err.clone()));
        }
        self.owner_down(err)
    }

    /// A MOVED to the owner that just could not be reached: that failure, retryable (a failover
    /// promotes a replica in a few seconds).
    fn owner_down(&mut self, err: &RedisError) -> Option<Failure> {
        let (_, to) = cluster::redirect(err).filter(|(moved, _)| *moved)?;
        let (down, why) = self.owner_down.take()?;
        (down == to).then(|| Failure::Unreachable(why.into()))
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
                        MasterChanged { "master" => node_name(&host, port) },
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
                let ask = self.ask(Some(Named::Url));
                connect(&self.endpoint, info, addr, deadline, ask)
            }
            Target::Sentinel { .. } => {
                let (host, port) = match self.confirmed.take() {
                    Some((named, at)) if at.elapsed() <= SENTINEL_RECHECK => named,
                    _ => self.master(deadline)?,
                };
                // The sentinels' word can trail a failover: only a master may hold the lock
                // (ROLE, in the connection's set-up).
                let ask = self.ask(Some(Named::Sentinels));
                let mut node = self.open_at(&host, port, deadline, ask)?;
                node.named = Some((host, port));
                Ok(node)
            }
            Target::Cluster { seeds } => {
                // The owner if a MOVED named it, else any seed: a MOVED reply routes from there.
                // No ROLE: a Cluster replica answers MOVED to its master for every key.
                let mut last = None;
                self.owner_down = None;
                let nodes: Vec<_> = self.owner.iter().chain(seeds.iter()).collect();
                for (i, (host, port)) in nodes.iter().enumerate() {
                    // A share of the time left each, so one silent seed cannot use it all.
                    let until = share(deadline, nodes.len() - i);
                    match self.open_at(host, *port, until, self.ask(None)) {
                        Ok(node) => return Ok(node),
                        Err(failure) if i == 0 && self.owner.is_some() => {
                            self.owner_down = Some(((host.clone(), *port), failure.to_string()));
                            last = Some(failure);
                        }
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

    fn open_at(
        &self,
        host: &str,
        port: u16,
        deadline: Instant,
        ask: (Option<Named>, Ask),
    ) -> Result<Node, Failure> {
        let info = self.endpoint.node(host, port);
        connect(&self.endpoint, info, node_name(host, port), deadline, ask)
    }

    /// What a new connection to the lock's node asks in its set-up: its ROLE when `role` says
    /// who named it, and which server it is when [`Connection::identify`] asked.
    fn ask(&self, role: Option<Named>) -> (Option<Named>, Ask) {
        let ask = Ask {
            role: role.is_some(),
            identity: self.identify,
        };
        (role, ask)
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
        Err(Failure::Unreachable(
            format!("no answer from Redis at {at} in time").into(),
        ))
    } else {
        Ok(left)
    }
}

fn no_time(endpoint: &Endpoint) -> Failure {
    Failure::Unreachable(format!("no answer from Redis at {endpoint} in time").into())
}
