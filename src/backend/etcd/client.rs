//! The connection to an etcd cluster: one gRPC client per member (etcd-client, on a
//! current-thread tokio runtime of this connection's own), one member asked at a time, and the
//! next one asked when it does not answer in time.
//!
//! etcd-client balances requests over every endpoint it is given, a hung one included: a
//! frozen member would keep getting a share of the requests, and each would wait out its time
//! limit. Here each member has a client of its own, and a request that a member does not
//! answer (or answers that it has no leader) is made again on the next member within what is
//! left of its deadline, so that a dead or frozen member costs one request's share, not the
//! run. Every request carries `require_leader`: a member cut off from the others answers at
//! once that it has no leader instead of hanging.
//!
//! The runtime is `backend::blocking`'s: futures run only inside [`Conn::run`], which blocks.

use std::future::Future;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, Error};

use crate::backend::blocking::Blocking;
use crate::lock::{Failure, Reason};

/// How the members are reached: their addresses, TLS, and the user to log in as.
#[derive(Clone)]
pub(crate) struct Members {
    /// `host:port` of each member, as given.
    pub addrs: Vec<String>,
    /// `https` with `etcds://`, else `http`.
    pub scheme: &'static str,
    pub options: ConnectOptions,
}

/// A connection to the cluster: the client of each member it has spoken to, and the member
/// asked first.
pub(crate) struct Conn {
    members: Members,
    clients: Vec<Option<Client>>,
    /// Which members have answered a request on this connection. Such a port speaks etcd's
    /// protocol: a connection to it that breaks later is the member going away.
    answered: Vec<bool>,
    current: usize,
    /// What the command needs on the prefix, for the advice when etcd refuses it.
    access: Access,
    runtime: Blocking,
}

/// What a command needs of the user's role on the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The monitoring commands (`status`, `list`, `history`, `check`): they only read.
    Read,
    /// `run` and `release --force`.
    ReadWrite,
}

impl Access {
    /// The permission `etcdctl role grant-permission` takes for it.
    fn permission(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "readwrite",
        }
    }
}

/// The least time one member is given before the next is asked, when there is more than one.
const MIN_SHARE: Duration = Duration::from_millis(20);

impl Conn {
    pub(crate) fn new(members: Members, access: Access) -> Self {
        let runtime = Blocking::new();
        let clients = members.addrs.iter().map(|_| None).collect();
        let answered = vec![false; members.addrs.len()];
        Self {
            members,
            clients,
            answered,
            current: 0,
            access,
            runtime,
        }
    }

    /// From now on the command writes (a forced release): etcd's refusal advises readwrite.
    pub(crate) fn writes(&mut self) {
        self.access = Access::ReadWrite;
    }

    /// Whether the members are reached over TLS.
    pub(crate) fn tls(&self) -> bool {
        self.members.scheme == "https"
    }

    /// The member asked first now, as `host:port`.
    pub(crate) fn member(&self) -> &str {
        &self.members.addrs[self.current]
    }

    /// Run `future` on this connection's runtime until it ends or `deadline` passes (None).
    pub(crate) fn block_on<T>(
        &self,
        deadline: Instant,
        future: impl Future<Output = T>,
    ) -> Option<T> {
        self.runtime.block_on(deadline, future)
    }

    /// `request` with a member's client, made again on the next member when one does not
    /// answer in time or cannot serve it (no leader, unreachable), until `deadline`. The
    /// request must be safe to make twice (a guarded transaction, a read, a keep-alive).
    pub(crate) fn run<T, F, Fut>(&mut self, deadline: Instant, request: F) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        self.run_on(deadline, true, request)
    }

    /// [`run`](Self::run); `asks`: `request` asks the member something (a member that answers
    /// it has spoken etcd's protocol), rather than only handing its client over.
    fn run_on<T, F, Fut>(&mut self, deadline: Instant, asks: bool, request: F) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let n = self.members.addrs.len();
        let mut last: Option<Failure> = None;
        let mut asked = 0;
        for tried in 0..n {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Each member not yet asked gets an equal share of what is left; the last all.
            let left = deadline - now;
            let share = if tried + 1 == n {
                left
            } else {
                (left / (n - tried) as u32).max(MIN_SHARE).min(left)
            };
            let until = now + share;
            asked += 1;
            match self.attempt(until, asks, &request) {
                Ok(value) => return Ok(value),
                Err(Attempt::Refused(failure)) => return Err(failure),
                Err(Attempt::Next(failure)) => {
                    last = Some(failure);
                    self.next_member();
                }
            }
        }
        let last = last.unwrap_or_else(|| {
            Failure::Unreachable(format!("no answer from etcd at {} in time", self.member()).into())
        });
        Err(if asked > 1 {
            last.reworded(|said| {
                format!("no member of etcd answered ({asked} asked; the last: {said})")
            })
        } else {
            last
        })
    }

    /// One request to the current member, connected first if need be.
    fn attempt<T, F, Fut>(&mut self, until: Instant, asks: bool, request: &F) -> Result<T, Attempt>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let at = self.member().to_owned();
        let client = match self.clients[self.current].clone() {
            Some(client) => client,
            None => {
                let url = format!("{}://{at}", self.members.scheme);
                let options = self.members.options.clone();
                let connected = self
                    .block_on(until, Client::connect([url], Some(options)))
                    .ok_or_else(|| Attempt::Next(late(&at)))?
                    .map_err(|err| self.judged(err))?;
                self.clients[self.current] = Some(connected.clone());
                connected
            }
        };
        match self.block_on(until, request(client)) {
            None => {
                // The connection may be wedged: the next request to this member connects anew.
                self.clients[self.current] = None;
                Err(Attempt::Next(late(&at)))
            }
            Some(Ok(value)) => {
                self.answered[self.current] |= asks;
                Ok(value)
            }
            Some(Err(err)) => {
                let judged = self.judged(err);
                if matches!(judged, Attempt::Next(_)) {
                    self.clients[self.current] = None;
                }
                Err(judged)
            }
        }
    }

    /// Ask the next member first from now on.
    pub(crate) fn next_member(&mut self) {
        self.current = (self.current + 1) % self.members.addrs.len();
    }

    /// The current member's client, connected within `until`, for a stream that outlives one
    /// request (a watch, the keep-alives).
    pub(crate) fn client(&mut self, until: Instant) -> Result<Client, Failure> {
        self.run_on(until, false, |client| async move { Ok(client) })
    }

    /// `request` on the current member's client, if it has one, waited for until `deadline`
    /// and no longer, and never made again on another member: for a request whose failure
    /// changes nothing (a lease revoked that ends by itself within its ttl anyway).
    pub(crate) fn ask_once<F, Fut>(&mut self, deadline: Instant, request: F)
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<(), Error>>,
    {
        if let Some(client) = self.clients[self.current].clone() {
            let _ = self.block_on(deadline, request(client));
        }
    }

    /// The current member's client is not to be used again (its stream failed).
    pub(crate) fn forget_member(&mut self) {
        self.clients[self.current] = None;
        self.next_member();
    }

    /// A failure of a stream (a watch, the keep-alives) on the current member.
    pub(crate) fn stream_failure(&self, err: Error) -> Failure {
        match self.judged(err) {
            Attempt::Next(failure) | Attempt::Refused(failure) => failure,
        }
    }

    /// An etcd-client error from the current member as a [`Failure`], and whether another
    /// member is worth asking.
    fn judged(&self, err: Error) -> Attempt {
        let member = Member {
            at: self.member(),
            tls: self.tls(),
            answered: self.answered[self.current],
            access: self.access,
        };
        judged(&member, err)
    }
}

/// The member an error came from, as [`judged`] needs it.
struct Member<'a> {
    /// `host:port`.
    at: &'a str,
    /// Reached over TLS.
    tls: bool,
    /// It has answered a request on this connection before.
    answered: bool,
    /// What the command needs on the prefix.
    access: Access,
}

/// What a failed attempt means for the next.
enum Attempt {
    /// Another member may answer: no answer, a connection lost, no leader.
    Next(Failure),
    /// The cluster answered no (credentials, permissions, a request it refuses): the same
    /// from any member.
    Refused(Failure),
}

fn late(at: &str) -> Failure {
    Failure::Unreachable(format!("no answer from etcd at {at} in time").into())
}

/// An etcd-client error as a [`Failure`], and whether another member is worth asking.
fn judged(member: &Member, err: Error) -> Attempt {
    let (at, tls) = (member.at, member.tls);
    // A connection that broke under the request, to a member that had spoken etcd's protocol
    // (a response under way, an answer before): the member went away, the port is right.
    match broke(&err) {
        Some(Broke::Answering) => return went_away(at, err),
        Some(Broke::Closed) if member.answered => return went_away(at, err),
        Some(Broke::Closed) | None => {}
    }
    // Beneath a failed connection is the I/O error that says why (refused, unreachable, a
    // TLS handshake that failed).
    let verdict = match (&err, io_cause(&err)) {
        (_, Some(io)) => Some(io_judged(at, tls, io)),
        (Error::GRpcStatus(status), None) => Some(status_judged(member, status)),
        _ => None,
    };
    match verdict {
        Some(Ok(refused)) => {
            return Attempt::Refused(Failure::Refused(Reason::caused_by(refused, err)));
        }
        Some(Err(next)) => {
            return Attempt::Next(Failure::Unreachable(Reason::caused_by(next, err)));
        }
        None => {}
    }
    match &err {
        Error::TransportError(_) | Error::IoError(_) | Error::LeaseKeepAliveError(_) => {
            Attempt::Next(Failure::Unreachable(Reason::caused_by(
                format!("cannot reach etcd at {at}: {}", chain(&err)),
                err,
            )))
        }
        _ => Attempt::Refused(Failure::Refused(Reason::caused_by(
            format!("etcd at {at}: {}", chain(&err)),
            err,
        ))),
    }
}

/// What a gRPC status from the member says: Err, a reason another member may serve the
/// request; Ok, the cluster's refusal, the same from any member.
fn status_judged(member: &Member, status: &tonic::Status) -> Result<String, String> {
    use tonic::Code;
    let (at, tls) = (member.at, member.tls);
    let said = crate::report::one_line(status.message());
    match status.code() {
        // Over TLS, a handshake that failed can end a request this way too, when the
        // member closed the connection before its alert was read.
        Code::Cancelled | Code::Unknown if tls => Err(format!(
            "etcd at {at} did not serve the request: {said} (over TLS: check \
             --tls-ca-cert, and give --tls-cert and --tls-key if the members ask for \
             a client certificate)"
        )),
        // A status made here from a broken HTTP/2 exchange (it has a cause; one etcd sent
        // has none): the member answered in something other than gRPC, or garbled it.
        Code::Internal | Code::Unknown if std::error::Error::source(status).is_some() => {
            Err(format!(
                "etcd at {at} did not answer in etcd's protocol, gRPC over HTTP/2 \
             ({said}): check that the port is an etcd member's client port"
            ))
        }
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Cancelled
        | Code::Aborted
        | Code::ResourceExhausted
        | Code::Unknown => Err(format!("etcd at {at} did not serve the request: {said}")),
        Code::Unauthenticated => Ok(format!("etcd at {at} refused the credentials ({said})")),
        Code::PermissionDenied => Ok(format!(
            "etcd at {at} does not let this user do what redlock needs: {said}; \
             grant the user's role {} on the prefix (docs/etcd.md)",
            member.access.permission()
        )),
        // Authentication is on, and the URL names no user.
        Code::InvalidArgument if status.message().contains("user name is empty") => Ok(format!(
            "etcd at {at} has authentication on: name a user in the URL \
             (etcd://USER@{at}) and give its password in REDLOCK_PASSWORD_FILE \
             (or --password-file) or REDLOCK_PASSWORD"
        )),
        _ => Ok(format!("etcd at {at} answered with an error: {said}")),
    }
}

/// What an I/O error beneath a request says: Ok, a refusal no retry mends (a TLS handshake
/// that failed); Err, a reason another member may answer.
fn io_judged(at: &str, tls: bool, io: &std::io::Error) -> Result<String, String> {
    // The handshake failed: no retry makes a certificate right. rustls's own error where it
    // is still there; some layers keep only its words.
    if io.kind() == std::io::ErrorKind::InvalidData {
        return Ok(
            match io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
                Some(tls) => crate::backend::tls::refusal("etcd", at, tls),
                None => format!(
                    "the TLS handshake with etcd at {at} failed ({io}): check --tls-ca-cert, and \
                 give --tls-cert and --tls-key if the members ask for a client certificate"
                ),
            },
        );
    }
    let closed = matches!(
        io.kind(),
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
    );
    Err(match (closed, tls) {
        // Closed under the first request: what a TLS member does to a plain client, and to
        // a TLS one without the client certificate it asks for.
        (true, false) => format!(
            "cannot reach etcd at {at}: it closed the connection at once ({io}); if it is \
             a TLS port, use etcds://"
        ),
        (true, true) => format!(
            "cannot reach etcd at {at}: it closed the TLS connection at once ({io}): a \
             plain-text port (use etcd://), or members that ask for a client certificate \
             (give --tls-cert and --tls-key)"
        ),
        (false, _) => format!("cannot reach etcd at {at}: {io}"),
    })
}

/// How a connection ended under a request, told from the error's types (never its words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broke {
    /// The member had begun to answer in HTTP/2 and then went: a response cut short, or a
    /// GOAWAY it sent as it shut down.
    Answering,
    /// Closed or reset under the request, or before the request could be sent: a member that
    /// went away, or a port that never spoke HTTP/2 (a TLS port, a proxy with nothing behind).
    Closed,
}

/// Whether `err` is a connection that ended under the request, and how.
fn broke(err: &Error) -> Option<Broke> {
    let mut found = None;
    let mut source = root(err);
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            // hyper passes HTTP/2's I/O errors on as its own, but for a response's body, which
            // the member had begun to send. A GOAWAY without an error is a server's goodbye.
            let goodbye =
                h2.is_go_away() && h2.is_remote() && h2.reason() == Some(h2::Reason::NO_ERROR);
            return if h2.is_io() || goodbye {
                Some(Broke::Answering)
            } else {
                // An HTTP/2 protocol error: something else than etcd answered.
                None
            };
        }
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>()
            && (hyper.is_canceled() || hyper.is_closed())
        {
            found = Some(Broke::Closed);
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof
            ) {
                found = Some(Broke::Closed);
            }
        }
        source = cause.source();
    }
    found
}

/// The member at `at` closed the connection under a request: it stopped or restarted.
fn went_away(at: &str, err: Error) -> Attempt {
    Attempt::Next(Failure::Unreachable(Reason::caused_by(
        format!(
            "etcd at {at} closed the connection mid-request (the member stopped or restarted?)"
        ),
        err,
    )))
}

/// Where the causes of `err` begin: etcd-client's error does not name its cause, and a gRPC
/// status's is the status's own.
fn root(err: &Error) -> Option<&(dyn std::error::Error + 'static)> {
    match err {
        Error::GRpcStatus(status) => Some(status),
        Error::TransportError(transport) => Some(transport),
        Error::IoError(io) => Some(io),
        other => Some(other),
    }
}

/// The I/O error beneath `err`, if it comes from one.
fn io_cause(err: &Error) -> Option<&std::io::Error> {
    let mut source = root(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = cause.source();
    }
    None
}

/// An error and its causes, as one line (tonic's transport error says little on its own).
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut said = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !said.contains(&text) {
            said = format!("{said}: {text}");
        }
        source = cause.source();
    }
    crate::report::one_line(&said)
}
