//! The session with a ZooKeeper ensemble, blocking: zookeeper-client on `backend::blocking`'s
//! current-thread runtime, made in the thread that uses it (the lease thread, after the
//! watchdog's fork; an admin command's). The client's own task (its pings, its reconnects to
//! another member, watch events) runs only while a request or a wait blocks on the runtime,
//! so the session's life on the server counts from redlock's own requests: a run that stops
//! renewing (its lease thread stuck) lets its session end a session timeout later, as a lease
//! that is not renewed ends on every backend.
//!
//! A session is made on the first request and kept; one the server ended (expired) is
//! forgotten, and the next request makes a new one. Closing it (the run's end) deletes its
//! ephemeral nodes at once.

use std::future::Future;
use std::time::{Duration, Instant};

use zookeeper_client::{Client, Error, TlsOptions};

use crate::backend::blocking::Blocking;
use crate::lock::{Failure, Reason};

/// Where the ensemble is and how to log in, as the URL gave it.
#[derive(Clone)]
pub(crate) struct Ensemble {
    /// `host:port,host:port/chroot`: zookeeper-client's connect string.
    pub connect: String,
    /// The URL as shown: scheme, members and chroot, no credentials.
    pub shown: String,
    /// Digest authentication: the user and the password.
    pub digest: Option<(String, String)>,
    /// `zks://`: TLS to every member.
    pub tls: Option<TlsOptions>,
}

/// How long a session's close is awaited at most: one round trip to a member that is well. The
/// close deletes the run's ephemeral nodes at once; one that is not answered ends when the
/// session times out, as it does when the run is killed.
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// The connection of one run (or one admin command) to the ensemble.
pub(crate) struct Conn {
    ensemble: Ensemble,
    /// The session timeout asked for: the lease (`--ttl`) for a run.
    timeout: Duration,
    runtime: Blocking,
    client: Option<Client>,
    /// How many sessions were made: an ephemeral node made in an earlier one is gone.
    sessions: u64,
    /// When the client last ran (a request or a wait on the runtime).
    ran: Instant,
}

impl Conn {
    pub(crate) fn new(ensemble: Ensemble, timeout: Duration) -> Self {
        Self {
            ensemble,
            timeout,
            runtime: Blocking::new(),
            client: None,
            sessions: 0,
            ran: Instant::now(),
        }
    }

    /// The ensemble as messages name it.
    pub(crate) fn shown(&self) -> &str {
        &self.ensemble.shown
    }

    /// Which session the requests are made in: the count of sessions made so far (0: none
    /// yet). A node made in an earlier one is gone if it was ephemeral.
    pub(crate) fn session(&self) -> u64 {
        self.sessions
    }

    /// `request` on the session (made first when there is none), answered by `deadline`: the
    /// server's answer, or [`Error::Timeout`] when none came in time. A session the server
    /// ended is forgotten, so that the next request makes a new one; the caller decides what
    /// its end means ([`Error::SessionExpired`]).
    pub(crate) fn run<T, F, Fut>(&mut self, deadline: Instant, request: F) -> Result<T, Error>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut client = self.client(deadline)?;
        if self.ran.elapsed() > self.timeout / 2 {
            // The client's task has not run for a while: the first thing it does when it runs
            // is to find its connection silent for longer than its limit, drop it, and fail
            // what is under way (the request's answer may still come, and be lost). A read
            // takes that failure, not the request; the client connects again meanwhile, to
            // the same session if the server kept it, else to a new one.
            let _ = self.runtime.block_on(deadline, client.check_stat("/"));
            if client.state().is_terminated() {
                self.client = None;
                client = self.client(deadline)?;
            }
        }
        let answer = self
            .runtime
            .block_on(deadline, request(client))
            .unwrap_or(Err(Error::Timeout));
        self.ran = Instant::now();
        if matches!(answer, Err(Error::SessionExpired | Error::SessionMoved)) {
            self.client = None;
        }
        answer
    }

    /// The session's client, connected first when there is none.
    pub(crate) fn client(&mut self, deadline: Instant) -> Result<Client, Error> {
        if let Some(client) = &self.client {
            if !client.state().is_terminated() {
                return Ok(client.clone());
            }
            self.client = None;
        }
        let mut connector = Client::connector()
            .with_session_timeout(self.timeout)
            // Within 3/5 of the session timeout, so that zookeeper-client sets its connection's
            // timeout to this rather than to 2/5 of the session's: the runtime is driven only
            // while a request is under way, and a holder's requests are a third of the ttl
            // apart, which must not look like a silent connection when the next one is made.
            .with_connection_timeout(self.timeout * 3 / 5)
            // Each member once, rather than round and round until the session's timeout: a
            // connection refused everywhere is a failed attempt, which the lease retries.
            .with_fail_eagerly();
        if let Some((user, password)) = &self.ensemble.digest {
            connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
        }
        let connect = self.ensemble.connect.clone();
        let connecting = async {
            match self.ensemble.tls.clone() {
                Some(tls) => connector.with_tls(tls).secure_connect(&connect).await,
                None => connector.connect(&connect).await,
            }
        };
        let client = self
            .runtime
            .block_on(deadline, connecting)
            .unwrap_or(Err(Error::Timeout))?;
        self.client = Some(client.clone());
        self.sessions += 1;
        self.ran = Instant::now();
        Ok(client)
    }

    /// End the session (its ephemeral nodes deleted at once by the server), waiting for the
    /// close to be answered until `deadline` at most [`CLOSE_WAIT`] from now.
    pub(crate) fn close(&mut self, deadline: Instant) {
        let Some(client) = self.client.take() else {
            return;
        };
        let mut state = client.state_watcher();
        // The last handle dropped closes the session: the client's task sends the close.
        drop(client);
        let until = deadline.min(Instant::now() + CLOSE_WAIT);
        self.runtime.block_on(until, async {
            while !state.peek_state().is_terminated() {
                state.changed().await;
            }
        });
    }

    /// A failure of a request to the ensemble, from the client's error: no answer (worth
    /// trying again), or the ensemble's refusal.
    pub(crate) fn failure(&self, err: Error) -> Failure {
        let at = &self.ensemble.shown;
        match err {
            Error::Timeout => Failure::Unreachable(format!("no answer from ZooKeeper at {at} in time").into()),
            // zookeeper-client keeps no cause: over TLS, a handshake refused looks the same.
            Error::NoHosts if self.ensemble.tls.is_some() => Failure::Unreachable(
                format!(
                    "no member of ZooKeeper at {at} could be reached (each refused, did not answer, \
                     or failed the TLS handshake: check that --tls-ca-cert signed the members' \
                     certificates and that they name the URL's hosts)"
                )
                .into(),
            ),
            Error::NoHosts => Failure::Unreachable(
                format!("no member of ZooKeeper at {at} could be reached (each refused or did not answer)").into(),
            ),
            // zookeeper-client's own: a connection that went silent or failed (I/O).
            Error::Custom(_)
            | Error::ConnectionLoss
            | Error::ClientClosed
            | Error::SessionExpired
            | Error::SessionMoved
            | Error::Throttled
            | Error::NotReadOnly => Failure::Unreachable(Reason::caused_by(
                format!("ZooKeeper at {at} did not answer: {err}"),
                err,
            )),
            Error::AuthFailed => Failure::Refused(Reason::caused_by(
                format!("ZooKeeper at {at} refused the URL's user and password (digest authentication failed)"),
                err,
            )),
            Error::NoAuth => Failure::Refused(Reason::caused_by(
                format!(
                    "ZooKeeper at {at} refused: not authorized (the ACL of the lock's nodes, or of the \
                     folder they are made in, does not let this user in)"
                ),
                err,
            )),
            other => Failure::Refused(Reason::caused_by(
                format!("ZooKeeper at {at} refused the request: {other}"),
                other,
            )),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close(Instant::now() + CLOSE_WAIT);
    }
}
