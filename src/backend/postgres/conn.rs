//! The connection to PostgreSQL: tokio-postgres on a current-thread runtime of this
//! connection's own, each request bounded by its deadline (a frozen server costs a request its
//! time, and the connection, never the thread), and the notifications the server sends (`LISTEN`)
//! gathered as they come.
//!
//! The runtime is made when the connection is, in the thread that uses it (the lease thread,
//! started after the watchdog's fork; an admin command's), and has no worker threads: futures
//! run only inside a request, which blocks. The task that drives the connection runs then too,
//! and passes each notification on.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Row, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls::Settled;
use crate::backend::blocking::Blocking;
use crate::lock::{Failure, Reason};

/// How to reach the server: libpq's settings, TLS, how messages name it, redlock's schema.
#[derive(Clone)]
pub(crate) struct Server {
    pub config: Config,
    /// None: no TLS (`sslmode=disable`, or a unix socket).
    pub tls: Option<Settled>,
    /// As messages name it: `postgres://HOST:PORT/DB`, no credentials.
    pub shown: String,
    /// The schema of redlock's tables and functions, quoted: `"redlock"`.
    pub schema: String,
}

/// One connection, made on first use and again after a failure.
pub(crate) struct Conn {
    server: Server,
    runtime: Blocking,
    live: Option<Live>,
}

struct Live {
    client: Client,
    /// Notifications, as the connection's task receives them; closed when the connection ends.
    notes: mpsc::UnboundedReceiver<String>,
    /// The channels this session listens on.
    listening: Vec<String>,
}

/// How a wait for a notification ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Heard {
    /// A notification came on one of the channels listened on.
    Notified,
    /// Cut short by the interrupt.
    Interrupted,
    /// Nothing came within the time.
    Nothing,
}

impl Conn {
    pub(crate) fn new(server: Server) -> Self {
        let runtime = Blocking::new();
        Self {
            server,
            runtime,
            live: None,
        }
    }

    /// The server, as messages name it.
    pub(crate) fn shown(&self) -> &str {
        &self.server.shown
    }

    /// The schema of redlock's tables, quoted.
    pub(crate) fn schema(&self) -> &str {
        &self.server.schema
    }

    /// Run `future` on this connection's runtime until it ends or `deadline` passes (None).
    fn block_on<T>(&self, deadline: Instant, future: impl Future<Output = T>) -> Option<T> {
        self.runtime.block_on(deadline, future)
    }

    /// The connection, made within `deadline` if there is none.
    fn live(&mut self, deadline: Instant) -> Result<(), Failure> {
        if self.live.as_ref().is_some_and(|l| l.client.is_closed()) {
            self.live = None;
        }
        if self.live.is_none() {
            let config = self.server.config.clone();
            let tls = self.server.tls.clone();
            let made = self
                .block_on(deadline, async move {
                    match tls {
                        Some(tls) => {
                            connect(&config, MakeRustlsConnect::new((*tls.config).clone())).await
                        }
                        None => connect(&config, NoTls).await,
                    }
                })
                .ok_or_else(|| self.late())?
                .map_err(|err| self.connect_failure(err))?;
            self.live = Some(made);
        }
        Ok(())
    }

    fn late(&self) -> Failure {
        Failure::Unreachable(
            format!("no answer from PostgreSQL at {} in time", self.shown()).into(),
        )
    }

    /// The rows `sql` returns with `params` (each with its type), within `deadline`: one round
    /// trip, no statement prepared apart (which a transaction-mode pooler would lose). The
    /// connection is given up when the answer does not come in time or the connection failed.
    pub(crate) fn query(
        &mut self,
        deadline: Instant,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, Failure> {
        self.live(deadline)?;
        let Self { runtime, live, .. } = self;
        let client = &live.as_ref().expect("connected above").client;
        let answer = runtime.block_on(deadline, client.query_typed(sql, params));
        self.answered(answer)
    }

    /// A request's answer (None: not in time). The connection is given up unless the server
    /// answered, with rows or with an error of its own.
    fn answered<T>(
        &mut self,
        answer: Option<Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Failure> {
        match answer {
            None => {
                self.live = None;
                Err(self.late())
            }
            Some(Ok(value)) => Ok(value),
            Some(Err(err)) => {
                if err.as_db_error().is_none() {
                    self.live = None;
                }
                Err(self.failure(err))
            }
        }
    }

    /// Run the statements of `sql` (the simple protocol: several statements, one
    /// transaction), within `deadline`.
    pub(crate) fn batch(&mut self, deadline: Instant, sql: &str) -> Result<(), Failure> {
        self.live(deadline)?;
        let Self { runtime, live, .. } = self;
        let client = &live.as_ref().expect("connected above").client;
        let answer = runtime.block_on(deadline, client.batch_execute(sql));
        self.answered(answer)
    }

    /// Listen on `channel` from now on (once per session), within `deadline`. True if this
    /// session did not listen on it before: what was sent on it until now was not heard.
    pub(crate) fn listen(&mut self, channel: &str, deadline: Instant) -> Result<bool, Failure> {
        if self
            .live
            .as_ref()
            .is_some_and(|l| l.listening.iter().any(|c| c == channel))
        {
            return Ok(false);
        }
        // A channel redlock names (`redlock_` and hex digits), quoted all the same.
        let sql = format!("LISTEN \"{}\"", channel.replace('"', "\"\""));
        self.query(deadline, &sql, &[])?;
        if let Some(live) = &mut self.live {
            live.listening.push(channel.to_owned());
        }
        Ok(true)
    }

    /// Wait up to `hold` for a notification on the channels listened on, or `interrupt`; the
    /// connection given up (a failure) if it ends, or when `limit` passes first.
    pub(crate) fn heard(
        &mut self,
        hold: Duration,
        limit: Instant,
        interrupt: &Notify,
    ) -> Result<Heard, Failure> {
        self.live(limit)?;
        let Self { runtime, live, .. } = self;
        let notes = &mut live.as_mut().expect("connected above").notes;
        // What came before the wait counts: a release while the waiter was between requests.
        let mut pending = false;
        while notes.try_recv().is_ok() {
            pending = true;
        }
        if pending {
            return Ok(Heard::Notified);
        }
        let waited = async {
            tokio::select! {
                note = notes.recv() => note.map(|_| Heard::Notified),
                () = interrupt.notified() => Some(Heard::Interrupted),
                () = tokio::time::sleep(hold) => Some(Heard::Nothing),
            }
        };
        let answer = runtime.block_on(limit, waited);
        match answer {
            Some(Some(heard)) => Ok(heard),
            // The connection ended (its task dropped the sender).
            Some(None) => {
                self.live = None;
                Err(Failure::Unreachable(
                    format!("PostgreSQL at {} closed the connection", self.shown()).into(),
                ))
            }
            None => {
                self.live = None;
                Err(self.late())
            }
        }
    }

    /// A failure to connect: as any request's, except that a server that asks for a password
    /// when none was given is told apart (no retry gives one), by the error's kind: neither
    /// the server's nor the network's.
    fn connect_failure(&self, err: tokio_postgres::Error) -> Failure {
        if let (Some(rustls::Error::InvalidCertificate(refused)), Some(tls)) =
            (rustls_error(&err), &self.server.tls)
        {
            // No retry makes the certificate another: said at once, in words.
            let said = super::tls::said(refused, &tls.trust);
            return Failure::Refused(Reason::caused_by(
                format!("TLS with PostgreSQL at {} failed: {said}", self.shown()),
                err,
            ));
        }
        let io = std::error::Error::source(&err).is_some_and(|s| s.is::<std::io::Error>());
        if self.server.config.get_password().is_none()
            && err.as_db_error().is_none()
            && !io
            && !err.is_closed()
        {
            return Failure::Refused(Reason::caused_by(
                format!(
                    "PostgreSQL at {} asks for a password, and none was given: put it in \
                     --password-file or REDLOCK_PASSWORD_FILE, REDLOCK_PASSWORD, PGPASSWORD or \
                     ~/.pgpass",
                    self.shown()
                ),
                err,
            ));
        }
        if err
            .as_db_error()
            .is_some_and(|db| *db.code() == SqlState::PROTOCOL_VIOLATION)
        {
            let said = err
                .as_db_error()
                .map(|db| bounded(db.message()))
                .unwrap_or_default();
            return Failure::Refused(Reason::caused_by(
                format!(
                    "{} refused the session redlock asks for ({said}): a pooler in front of \
                     PostgreSQL (PgBouncer) does that; point redlock at PostgreSQL itself (a \
                     transaction-mode pool loses the LISTEN its waiters are woken by)",
                    self.shown()
                ),
                err,
            ));
        }
        self.failure(err)
    }

    /// A failure of a request: an error the server answered with is [`Failure::Refused`],
    /// except those that pass (a server shutting down or starting, a lost connection); the
    /// tables or functions missing say to run `redlock init`.
    fn failure(&self, err: tokio_postgres::Error) -> Failure {
        let at = self.shown();
        let Some(db) = err.as_db_error() else {
            let message = if err.is_closed() {
                format!("PostgreSQL at {at} closed the connection")
            } else {
                format!("cannot reach PostgreSQL at {at}: {}", describe(&err))
            };
            return Failure::Unreachable(Reason::caused_by(message, err));
        };
        let code = db.code();
        let message = bounded(db.message());
        if *code == SqlState::UNDEFINED_FUNCTION
            || *code == SqlState::UNDEFINED_TABLE
            || *code == SqlState::INVALID_SCHEMA_NAME
        {
            return Failure::Refused(Reason::caused_by(
                format!(
                    "PostgreSQL at {at} has no redlock tables in schema {} ({message}): create \
                     them with `redlock init --url ...`, or ask a DBA to apply `redlock init \
                     --print`",
                    self.schema()
                ),
                err,
            ));
        }
        // Passing states: the server shutting down, starting up, or out of connections for
        // the moment; a transaction rolled back by a conflict with another, or after waiting
        // `lock_timeout` for a lock another held.
        let passing = [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::QUERY_CANCELED,
        ];
        let said = format!("PostgreSQL at {at} answered: {message}");
        if passing.contains(code) {
            Failure::Unreachable(Reason::caused_by(said, err))
        } else {
            Failure::Refused(Reason::caused_by(said, err))
        }
    }
}

/// Whether `failure` is the server's answer that a column or function a statement names does
/// not exist: tables an older redlock made, which this redlock's `init` brings up to date.
pub(super) fn older_tables(failure: &Failure) -> bool {
    std::error::Error::source(failure)
        .and_then(|source| source.downcast_ref::<tokio_postgres::Error>())
        .and_then(tokio_postgres::Error::code)
        .is_some_and(|code| {
            *code == SqlState::UNDEFINED_COLUMN || *code == SqlState::UNDEFINED_FUNCTION
        })
}

/// Whether `failure` is the server's answer that this transaction was rolled back for another's
/// sake (a deadlock, a serialization failure, or a lock held by another for longer than
/// `lock_timeout`): the same statements may pass when tried again.
pub(super) fn rolled_back_for_another(failure: &Failure) -> bool {
    std::error::Error::source(failure)
        .and_then(|source| source.downcast_ref::<tokio_postgres::Error>())
        .and_then(tokio_postgres::Error::code)
        .is_some_and(|code| {
            *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::LOCK_NOT_AVAILABLE
        })
}

/// What the server said, as one line of at most 500 characters (a function replaced by hand can
/// answer anything, of any length).
fn bounded(said: &str) -> String {
    let line = crate::report::one_line(said);
    match line.char_indices().nth(500) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// Column `name` of `row`, as a `T` (an `Option` where it may be NULL); a value this redlock
/// cannot read (a function replaced by hand, or of another version) is a refusal, never a
/// panic.
pub(super) fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    name: &str,
) -> Result<T, Failure> {
    row.try_get(name).map_err(|err| {
        Failure::Refused(Reason::caused_by(
            format!(
                "PostgreSQL answered what this redlock cannot read (column {name}): apply this \
                 redlock's `redlock init`"
            ),
            err,
        ))
    })
}

/// An error of the connection, as one line: its cause's words where it has one (the I/O
/// error, TLS), never the password.
fn describe(err: &tokio_postgres::Error) -> String {
    let mut said = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        said = cause.to_string();
        source = cause.source();
    }
    crate::report::one_line(&said)
}

/// The rustls error beneath a connection's error, if TLS failed: tokio-rustls hands it over
/// inside an I/O error.
fn rustls_error(err: &tokio_postgres::Error) -> Option<&rustls::Error> {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let inner = cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        let found = match inner {
            Some(inner) => inner.downcast_ref::<rustls::Error>(),
            None => cause.downcast_ref::<rustls::Error>(),
        };
        if found.is_some() {
            return found;
        }
        source = cause.source();
    }
    None
}

/// Connect, and drive the connection in a task that passes each notification on.
async fn connect<T>(config: &Config, tls: T) -> Result<Live, tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = config.connect(tls).await?;
    let (tx, notes) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) => {
                    let _ = tx.send(note.channel().to_owned());
                }
                // A notice (the server's warnings) is not for the user of a lock.
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            }
        }
    });
    Ok(Live {
        client,
        notes,
        listening: Vec::new(),
    })
}
