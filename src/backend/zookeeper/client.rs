//! The session with a ZooKeeper ensemble, blocking: zookeeper-client on a current-thread
//! runtime driven by a thread of its own, made when the first request is (in the lease thread,
//! after the watchdog's fork; in an admin command's). The client's task runs all along, as
//! ZooKeeper's clients do: it pings when idle, so a member that hangs or goes silent is found
//! out within the connection's timeout (a quarter of the session's) and left for another,
//! with the session, while the lease still runs.
//!
//! The session is kept only while the run keeps its lease: until a session timeout after the
//! last request that was answered was sent (a waiter's wait keeps it too), when a task of the
//! runtime ends it. So a run that stops renewing (its lease thread stuck) gives the lock up when
//! its lease would have ended on any backend, and not later; the close deletes its entry at
//! once. A session the server ended (expired) is forgotten, and the next request makes a new
//! one.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};
use zookeeper_client::{Client, Error, TlsOptions};

use super::probe::{self, Found};
use crate::backend::Tls;
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
    /// The TLS options as given (`zks://`) and the members (`host:port`), for handshakes of
    /// redlock's own that tell why none could be reached (`probe`).
    pub probe: (Option<Tls>, Vec<String>),
}

/// How long a session's close is awaited at most: one round trip to a member that is well. The
/// close deletes the run's ephemeral nodes at once; one that is not answered ends when the
/// session times out, as it does when the run is killed.
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// Until when the session is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Until(tokio::time::Instant),
    /// While a waiter waits.
    Always,
}

/// The runtime's thread, and what ends it.
struct Runtime {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Runtime {
    fn start() -> Runtime {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("zookeeper".into())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .expect("a thread for the ZooKeeper session");
        Runtime {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Run `future` until it ends or `deadline` passes (None).
    fn block_on<T>(&self, deadline: Instant, future: impl Future<Output = T>) -> Option<T> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.handle
            .block_on(async { tokio::time::timeout(left, future).await.ok() })
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The connection of one run (or one admin command) to the ensemble.
pub(crate) struct Conn {
    ensemble: Ensemble,
    /// The session timeout asked for: the lease (`--ttl`) for a run.
    timeout: Duration,
    runtime: Option<Runtime>,
    /// The session's client; the keeper takes it (and so ends the session) when it is no longer
    /// kept.
    client: Arc<Mutex<Option<Client>>>,
    /// Until when the session is kept, as the keeper reads it.
    keep: watch::Sender<Keep>,
    /// How many sessions were made: an ephemeral node made in an earlier one is gone.
    sessions: u64,
    /// Once a connect reached no member: why, as redlock's own handshakes with the members
    /// found.
    unreached: Option<Found>,
}

impl Conn {
    pub(crate) fn new(ensemble: Ensemble, timeout: Duration) -> Self {
        Self {
            ensemble,
            timeout,
            runtime: None,
            client: Arc::new(Mutex::new(None)),
            keep: watch::channel(Keep::Always).0,
            sessions: 0,
            unreached: None,
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

    fn runtime(&mut self) -> &Runtime {
        self.runtime.get_or_insert_with(Runtime::start)
    }

    /// `request` on the session (made first when there is none), answered by `deadline`: the
    /// server's answer, or [`Error::Timeout`] when none came in time. An answer keeps the
    /// session a session timeout from when the request was sent. A session the server ended is
    /// forgotten, so that the next request makes a new one; the caller decides what its end
    /// means ([`Error::SessionExpired`]).
    pub(crate) fn run<T, F, Fut>(&mut self, deadline: Instant, request: F) -> Result<T, Error>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let sent = tokio::time::Instant::now();
        let client = self.client(deadline)?;
        let answer = self
            .runtime()
            .block_on(deadline, request(client))
            .unwrap_or(Err(Error::Timeout));
        match &answer {
            Err(Error::SessionExpired | Error::SessionMoved) => self.forget(),
            Err(Error::Timeout | Error::ConnectionLoss | Error::Custom(_)) => {}
            _ => self.keep(Keep::Until(sent + self.timeout)),
        }
        answer
    }

    /// `wait` (a waiter's wait on a watch, made with `client`), the session kept meanwhile and
    /// a session timeout after; None when `deadline` came first.
    pub(crate) fn wait<T, F, Fut>(&mut self, deadline: Instant, wait: F) -> Result<T, Error>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let client = self.client(deadline)?;
        self.keep(Keep::Always);
        let answer = self
            .runtime()
            .block_on(deadline, wait(client))
            .unwrap_or(Err(Error::Timeout));
        self.keep(Keep::Until(tokio::time::Instant::now() + self.timeout));
        if matches!(answer, Err(Error::SessionExpired | Error::SessionMoved)) {
            self.forget();
        }
        answer
    }

    fn keep(&self, keep: Keep) {
        self.keep.send_replace(keep);
    }

    fn forget(&self) {
        self.client.lock().unwrap().take();
    }

    /// The session's client, connected first when there is none (or the last one ended).
    pub(crate) fn client(&mut self, deadline: Instant) -> Result<Client, Error> {
        if let Some(client) = self.client.lock().unwrap().as_ref()
            && !client.state().is_terminated()
        {
            return Ok(client.clone());
        }
        self.forget();
        let mut connector = Client::connector()
            .with_session_timeout(self.timeout)
            // A quarter of the session's, at most 2 s: a member that goes silent (frozen, cut off) is left
            // for another after that long without an answer to the client's pings, and so is one
            // that takes no connection, in time for the renewals that follow. zookeeper-client's
            // own default is two fifths, ZooKeeper's Java client's two thirds; a run's renewals
            // are a third apart, and a frozen leader keeps its followers (and so every member)
            // from serving for its ensemble's syncLimit on top.
            // At most 2 s: it is also how long a member that takes the connection and never
            // answers holds up the next (a take has 5 s at most for its attempt).
            .with_connection_timeout((self.timeout / 4).min(Duration::from_secs(2)))
            // Each member once, rather than round and round until the session's timeout: a
            // connection refused everywhere is a failed attempt, which the lease retries.
            .with_fail_eagerly();
        if let Some((user, password)) = &self.ensemble.digest {
            connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
        }
        let connect = self.ensemble.connect.clone();
        let tls = self.ensemble.tls.clone();
        let (slot, keep) = (Arc::clone(&self.client), self.keep.subscribe());
        let sent = tokio::time::Instant::now();
        let timeout = self.timeout;
        let connected = self.runtime().block_on(deadline, async move {
            let client = match tls {
                Some(tls) => connector.with_tls(tls).secure_connect(&connect).await,
                None => connector.connect(&connect).await,
            }?;
            *slot.lock().unwrap() = Some(client.clone());
            tokio::spawn(keeper(slot, keep, client.session_id()));
            Ok::<_, Error>(client)
        });
        let client = match connected.unwrap_or(Err(Error::Timeout)) {
            Ok(client) => client,
            Err(Error::NoHosts) => {
                // zookeeper-client keeps no cause: handshakes of redlock's own tell a certificate
                // problem or a port of the other kind from a member that is down. Once per
                // connection.
                if self.unreached.is_none() {
                    let (tls, hosts) = &self.ensemble.probe;
                    self.unreached = Some(probe::why(
                        tls.as_ref(),
                        hosts,
                        &self.ensemble.shown,
                        deadline,
                    ));
                }
                return Err(Error::NoHosts);
            }
            Err(err) => return Err(err),
        };
        self.sessions += 1;
        self.keep(Keep::Until(sent + timeout));
        Ok(client)
    }

    /// End the session (its ephemeral nodes deleted at once by the server), waiting for the
    /// close to be answered until `deadline` at most [`CLOSE_WAIT`] from now.
    pub(crate) fn close(&mut self, deadline: Instant) {
        let Some(client) = self.client.lock().unwrap().take() else {
            return;
        };
        let mut state = client.state_watcher();
        // The last handle dropped closes the session: the client's task sends the close.
        drop(client);
        let until = deadline.min(Instant::now() + CLOSE_WAIT);
        self.runtime().block_on(until, async {
            while !state.peek_state().is_terminated() {
                state.changed().await;
            }
        });
    }

    /// The refusal when the URL's chroot is not there: a run would make nothing under it, and
    /// an admin command would read every lock as free.
    pub(crate) fn no_chroot(&self) -> Failure {
        Failure::Refused(
            format!(
                "ZooKeeper at {} has no node for the URL's chroot: make it first (zkCli.sh \
                 create PATH), or give a URL without one",
                self.ensemble.shown
            )
            .into(),
        )
    }

    /// After a read found no node where a lock's (or the folder of its prefix) would be: Err
    /// when that is because the chroot itself is not there (it is "/" to the chrooted client).
    pub(crate) fn chroot_exists(&mut self, deadline: Instant) -> Result<(), Failure> {
        match self.run(deadline, |c| async move { c.check_stat("/").await }) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(self.no_chroot()),
            Err(err) => Err(self.failure(err)),
        }
    }

    /// A failure of a request to the ensemble, from the client's error: no answer (worth
    /// trying again), or the ensemble's refusal.
    pub(crate) fn failure(&self, err: Error) -> Failure {
        let at = &self.ensemble.shown;
        match err {
            // No session: the attempt's time ran out while members were tried, each silent one
            // holding it up for the connection's timeout.
            Error::Timeout if self.client.lock().unwrap().is_none() => Failure::Unreachable(
                format!(
                    "no member of ZooKeeper at {at} answered in time: a member that takes the \
                     connection and says nothing holds each attempt up to a quarter of --ttl \
                     (at most 2 s) before the next is tried (--wait tries again)"
                )
                .into(),
            ),
            Error::Timeout => Failure::Unreachable(format!("no answer from ZooKeeper at {at} in time").into()),
            Error::NoHosts => match &self.unreached {
                // No retry makes a certificate or a scheme right.
                Some(Found::Refusal(why)) => Failure::Refused(why.clone().into()),
                Some(Found::Unreachable(why)) => Failure::Unreachable(why.clone().into()),
                // zookeeper-client keeps no cause: over TLS, a handshake refused looks the same.
                _ if self.ensemble.tls.is_some() => Failure::Unreachable(
                    format!(
                        "no member of ZooKeeper at {at} could be reached (each refused, did not answer, \
                         or failed the TLS handshake: check that --tls-ca-cert signed the members' \
                         certificates, that they name the URL's hosts, and that the port is their \
                         secureClientPort; members ask for a client certificate unless \
                         ssl.clientAuth=none: give --tls-cert and --tls-key)"
                    )
                    .into(),
                ),
                _ => Failure::Unreachable(
                    format!("no member of ZooKeeper at {at} could be reached (each refused or did not answer)").into(),
                ),
            },
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

/// Ends session `id` (drops its client, whose last handle's drop closes it) once `keep` says
/// it is kept no longer; ends with the connection's owner, or when another session replaced it.
async fn keeper(
    slot: Arc<Mutex<Option<Client>>>,
    mut keep: watch::Receiver<Keep>,
    id: zookeeper_client::SessionId,
) {
    loop {
        let until = *keep.borrow_and_update();
        match until {
            Keep::Always => {
                if keep.changed().await.is_err() {
                    return;
                }
            }
            Keep::Until(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {
                        let mut slot = slot.lock().unwrap();
                        if slot.as_ref().is_some_and(|c| c.session_id() == id) {
                            slot.take();
                        }
                        return;
                    }
                    changed = keep.changed() => if changed.is_err() {
                        return;
                    },
                }
            }
        }
    }
}
