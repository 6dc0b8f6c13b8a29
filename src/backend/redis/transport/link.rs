//! redlock's own connection to one server: a stream (TCP, a unix socket, or rustls over TCP)
//! and the redis crate's RESP parser, behind `redis::ConnectionLike`, so that
//! `redis::cmd(..).query(&mut link)`, pipelines and scripts work on it as on the crate's own.
//!
//! Why redlock owns this: the crate's blocking `redis::Connection` gives each `read()` its own
//! timeout and reads a reply of any size, and offers no hook to change either. A server that
//! trickles a byte at a time keeps such a request waiting as long as it trickles, and one that
//! announces `$999999999999` makes it grow until the kernel kills it. Here each request carries
//! one deadline that every read and write of it (the connect, the TLS handshake and AUTH,
//! SELECT and ROLE included) must meet, and a reply larger than [`MAX_REPLY`] fails instead of
//! being read into memory.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{
    ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, ProtocolVersion, RedisError,
    RedisResult, Value,
};

use crate::backend::redis::transport::share;
use crate::backend::redis::transport::tls;

/// The largest reply redlock reads. Its own replies are a few KiB at most (a lock's holders, a
/// page of SCAN); anything near this is not an answer redlock asked for.
pub(crate) const MAX_REPLY: usize = 4 << 20;

/// A socket whose every read and write ends by the deadline of the request under way: the
/// socket's timeout is set to the time left before each call.
struct Timed<S> {
    socket: S,
    deadline: Instant,
}

/// What [`Timed`] needs of a socket.
trait Socket: Read + Write {
    fn read_timeout(&self, left: Duration) -> io::Result<()>;
    fn write_timeout(&self, left: Duration) -> io::Result<()>;
}

impl Socket for TcpStream {
    fn read_timeout(&self, left: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(left))
    }
    fn write_timeout(&self, left: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(left))
    }
}

impl Socket for UnixStream {
    fn read_timeout(&self, left: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(left))
    }
    fn write_timeout(&self, left: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(left))
    }
}

impl<S> Timed<S> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::ErrorKind::TimedOut.into())
        } else {
            Ok(left)
        }
    }
}

// A read or write cut short by a signal (redlock stopped and continued, Ctrl-Z then `fg`,
// during a request: EINTR) is tried again, within the same deadline, as std's own read_exact
// does: it is no failure of the server's.
impl<S: Socket> Read for Timed<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.socket.read_timeout(self.left()?)?;
            match self.socket.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                read => return read,
            }
        }
    }
}

impl<S: Socket> Write for Timed<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            self.socket.write_timeout(self.left()?)?;
            match self.socket.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                written => return written,
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.socket.flush()
    }
}

enum Stream {
    Tcp(Timed<TcpStream>),
    Unix(Timed<UnixStream>),
    // Boxed: rustls's connection state is large.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Timed<TcpStream>>>),
}

impl Stream {
    fn set_deadline(&mut self, deadline: Instant) {
        match self {
            Stream::Tcp(timed) => timed.deadline = deadline,
            Stream::Unix(timed) => timed.deadline = deadline,
            Stream::Tls(tls) => tls.sock.deadline = deadline,
        }
    }
}

impl Stream {
    /// Whether the peer has closed (or reset) the connection, looked at without waiting or
    /// reading anything. A socket's TCP state only: false for a unix socket, which std cannot
    /// peek at.
    fn peer_closed(&self) -> bool {
        let socket = match self {
            Stream::Tcp(timed) => &timed.socket,
            Stream::Tls(tls) => &tls.sock.socket,
            Stream::Unix(_) => return false,
        };
        if socket.set_nonblocking(true).is_err() {
            return false;
        }
        let peeked = socket.peek(&mut [0u8; 1]);
        let _ = socket.set_nonblocking(false);
        match peeked {
            Ok(0) => true,
            Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// The reply was larger than [`MAX_REPLY`]: the source of the I/O error that ends the read.
#[derive(Debug)]
pub(crate) struct TooLarge;

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a reply larger than {} MiB", MAX_REPLY >> 20)
    }
}

impl std::error::Error for TooLarge {}

/// Reads one reply from a stream, failing once it passes its byte budget.
struct Capped<'a> {
    stream: &'a mut Stream,
    budget: usize,
    over: &'a mut bool,
}

impl Read for Capped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.budget == 0 {
            *self.over = true;
            return Err(io::Error::other(TooLarge));
        }
        let room = buf.len().min(self.budget);
        let n = self.stream.read(&mut buf[..room])?;
        self.budget -= n;
        Ok(n)
    }
}

/// An open connection to one server; see the module's header.
pub(crate) struct Link {
    stream: Stream,
    parser: redis::Parser,
    db: i64,
    /// A read or write failed: the stream may be in the middle of a reply, or gone.
    broken: bool,
    /// The reply that broke it was larger than [`MAX_REPLY`].
    oversized: bool,
}

/// What [`Link::open`] asks the server in the connection's set-up, beside AUTH and SELECT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ask {
    /// ROLE: whether the server is a master.
    pub role: bool,
    /// INFO server: which server it is (its `run_id`), for telling a quorum's nodes apart.
    pub identity: bool,
}

/// What the set-up's questions were answered (a server error included); None where not asked.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    pub role: Option<Value>,
    pub identity: Option<Value>,
}

impl Link {
    /// Connect to `info`'s address and set the connection up (AUTH, SELECT, and ROLE and
    /// INFO server as `ask` says, pipelined in one round trip), all within `deadline`. `tls`:
    /// the client configuration, for a TLS address.
    pub(crate) fn open(
        info: &ConnectionInfo,
        tls: Option<Arc<rustls::ClientConfig>>,
        deadline: Instant,
        ask: Ask,
    ) -> Result<(Link, Answers), Opening> {
        let stream =
            connect(info.addr(), tls, deadline).map_err(|e| Opening::from(RedisError::from(e)))?;
        let settings = info.redis_settings();
        let mut link = Link {
            stream,
            parser: redis::Parser::new(),
            db: settings.db(),
            broken: false,
            oversized: false,
        };
        let (setup, auth) = setup(settings, ask);
        if setup.is_empty() {
            return Ok((link, Answers::default()));
        }
        link.set_deadline(deadline);
        let replies = match link.req_packed_commands(&setup.get_packed_pipeline(), 0, setup.len()) {
            Ok(replies) => replies,
            Err(error) => return Err(Opening::new(error, link.oversized)),
        };
        link.turned_away(&replies)?;
        let mut replies = replies.into_iter();
        let refused = |e| Err(Opening::new(e, false));
        if auth && let Some(Value::ServerError(e)) = replies.next() {
            // As the redis crate reports it: whatever the server said, the password failed.
            return refused(match settings.password() {
                Some(_) => RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "Password authentication failed",
                )),
                None => e.into(),
            });
        }
        if link.db != 0
            && let Some(Value::ServerError(e)) = replies.next()
        {
            let detail = e.details().unwrap_or("").to_owned();
            return refused(RedisError::from((
                ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                "Redis server refused to switch database",
                detail,
            )));
        }
        let mut answer = |asked: bool| if asked { replies.next() } else { None };
        let role = answer(ask.role);
        let identity = answer(ask.identity);
        let answers = Answers { role, identity };
        Ok((link, answers))
    }

    /// An error among the set-up's `replies`, and the connection closed behind it: the server
    /// turned the connection away before it read any of it (maxclients, protected mode),
    /// whatever it was asked.
    fn turned_away(&self, replies: &[Value]) -> Result<(), Opening> {
        let error = replies.iter().find_map(|reply| match reply {
            Value::ServerError(e) => Some(e),
            _ => None,
        });
        match error {
            Some(e) if self.stream.peer_closed() => Err(Opening {
                error: e.clone().into(),
                oversized: false,
                said: Some(format!("{} {}", e.code(), e.details().unwrap_or(""))),
            }),
            _ => Ok(()),
        }
    }

    /// The deadline of the next request: every read and write of it, and of the replies it
    /// reads, ends by then.
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.stream.set_deadline(deadline);
    }

    /// Whether the last failure was a reply larger than [`MAX_REPLY`].
    pub(crate) fn oversized(&self) -> bool {
        self.oversized
    }

    fn send(&mut self, bytes: &[u8]) -> RedisResult<()> {
        if self.broken {
            return Err(io::Error::from(io::ErrorKind::NotConnected).into());
        }
        let sent = self
            .stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush());
        sent.map_err(|e| {
            self.broken = true;
            e.into()
        })
    }

    /// The next reply that is not a RESP3 push.
    fn read_reply(&mut self) -> RedisResult<Value> {
        loop {
            let reader = Capped {
                stream: &mut self.stream,
                budget: MAX_REPLY,
                over: &mut self.oversized,
            };
            match self.parser.parse_value(reader) {
                Ok(Value::Push { .. }) => continue,
                Ok(value) => return Ok(value),
                Err(e) => {
                    self.broken = true;
                    return Err(e);
                }
            }
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.send(cmd)?;
        self.read_reply()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send(cmd)?;
        let mut replies = Vec::with_capacity(count);
        let mut queued = None;
        for i in 0..offset + count {
            // The first failure to read ends the request: the next read would wait as long
            // again (the redis crate's connection goes on reading).
            let reply = self.read_reply()?;
            match reply {
                // A command a transaction refused to queue: the transaction did not run.
                Value::ServerError(e) if i < offset => {
                    queued.get_or_insert(e);
                }
                _ if i < offset => {}
                reply => replies.push(reply),
            }
        }
        match queued {
            Some(e) => Err(e.into()),
            None => Ok(replies),
        }
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        !self.broken
    }
}

/// The set-up of a new connection to a server with `settings`, in one pipeline: HELLO 3 or
/// AUTH, SELECT, then ROLE and INFO server as `ask` says; and whether its first reply is
/// AUTH's.
fn setup(settings: &redis::RedisConnectionInfo, ask: Ask) -> (redis::Pipeline, bool) {
    let mut setup = redis::pipe();
    let resp3 = settings.protocol() != ProtocolVersion::RESP2;
    let auth = match (resp3, settings.password()) {
        (true, password) => {
            let cmd = setup.cmd("HELLO").arg(3);
            if let Some(password) = password {
                cmd.arg("AUTH")
                    .arg(settings.username().unwrap_or("default"))
                    .arg(password);
            }
            true
        }
        (false, Some(password)) => {
            let cmd = setup.cmd("AUTH");
            if let Some(user) = settings.username() {
                cmd.arg(user);
            }
            cmd.arg(password);
            true
        }
        (false, None) => false,
    };
    if settings.db() != 0 {
        setup.cmd("SELECT").arg(settings.db());
    }
    if ask.role {
        setup.cmd("ROLE");
    }
    if ask.identity {
        setup.cmd("INFO").arg("server");
    }
    (setup, auth)
}

/// Why a connection could not be opened: the error, whether a reply was too large, and what
/// a server that closed the connection behind its error said (`ERR max number of clients
/// reached`).
pub(crate) struct Opening {
    pub error: RedisError,
    pub oversized: bool,
    pub said: Option<String>,
}

impl Opening {
    fn new(error: RedisError, oversized: bool) -> Self {
        Self {
            error,
            oversized,
            said: None,
        }
    }
}

impl From<RedisError> for Opening {
    fn from(error: RedisError) -> Self {
        Self::new(error, false)
    }
}

/// The stream to `addr`, connected (and the TLS handshake done) within `deadline`.
fn connect(
    addr: &ConnectionAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: Instant,
) -> io::Result<Stream> {
    match addr {
        ConnectionAddr::Tcp(host, port) => Ok(Stream::Tcp(tcp(host, *port, deadline)?)),
        ConnectionAddr::TcpTls { host, port, .. } => {
            let config = tls.ok_or_else(|| io::Error::other("no TLS configuration"))?;
            let mut client = tls::client(config, host)?;
            let mut sock = tcp(host, *port, deadline)?;
            while client.is_handshaking() {
                client.complete_io(&mut sock)?;
            }
            Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(
                client, sock,
            ))))
        }
        // A unix socket connects at once (or fails at once) unless its listen queue is full,
        // which std gives no timeout for.
        ConnectionAddr::Unix(path) => Ok(Stream::Unix(Timed {
            socket: UnixStream::connect(path)?,
            deadline,
        })),
        _ => Err(io::Error::other("unsupported address")),
    }
}

/// A TCP connection to the first address of `host` that answers, each tried with a share of the
/// time left. The name lookup itself is the system resolver's, which std cannot time out.
fn tcp(host: &str, port: u16, deadline: Instant) -> io::Result<Timed<TcpStream>> {
    let addrs: Vec<_> = (host, port).to_socket_addrs()?.collect();
    let mut last = io::Error::other("could not resolve to any addresses");
    for (i, addr) in addrs.iter().enumerate() {
        let until = share(deadline, addrs.len() - i);
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match TcpStream::connect_timeout(addr, left) {
            Ok(socket) => {
                socket.set_nodelay(true)?;
                return Ok(Timed { socket, deadline });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    /// A link over one end of a socket pair; `server` writes to the other end.
    fn pair(server: impl FnOnce(UnixStream) + Send + 'static) -> Link {
        let (ours, theirs) = UnixStream::pair().unwrap();
        thread::spawn(move || server(theirs));
        Link {
            stream: Stream::Unix(Timed {
                socket: ours,
                deadline: Instant::now(),
            }),
            parser: redis::Parser::new(),
            db: 0,
            broken: false,
            oversized: false,
        }
    }

    #[test]
    fn the_deadline_bounds_a_reply_however_slowly_it_comes() {
        let mut link = pair(|mut s| {
            let _ = s.write_all(b"$1000\r\n");
            // A byte every 20 ms: each read is quick, the reply never completes in time.
            while s.write_all(b"x").is_ok() {
                thread::sleep(Duration::from_millis(20));
            }
        });
        let started = Instant::now();
        link.set_deadline(started + Duration::from_millis(200));
        let err = redis::cmd("GET")
            .arg("k")
            .query::<Value>(&mut link)
            .unwrap_err();
        assert!(err.is_timeout(), "{err}");
        let took = started.elapsed();
        assert!(took < Duration::from_millis(1_500), "took {took:?}");
        assert!(!link.is_open() && !link.oversized());
    }

    #[test]
    fn a_reply_past_the_cap_fails_without_being_read_into_memory() {
        let mut link = pair(|mut s| {
            let _ = s.write_all(b"$999999999999\r\n");
            let chunk = vec![b'x'; 64 * 1024];
            while s.write_all(&chunk).is_ok() {}
        });
        link.set_deadline(Instant::now() + Duration::from_secs(30));
        let err = redis::cmd("GET")
            .arg("k")
            .query::<Value>(&mut link)
            .unwrap_err();
        assert!(link.oversized(), "{err}");
        assert!(!link.is_open());
    }

    #[test]
    fn pipelined_replies_and_server_errors_are_read_in_order() {
        let mut link = pair(|mut s| {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"+OK\r\n-NOSCRIPT no\r\n:7\r\n");
            let _ = s.read(&mut buf);
        });
        link.set_deadline(Instant::now() + Duration::from_secs(30));
        let replies: Vec<Value> = redis::pipe()
            .ignore_errors()
            .cmd("SET")
            .arg("k")
            .arg(1)
            .cmd("EVALSHA")
            .arg("x")
            .arg(0)
            .cmd("INCR")
            .arg("c")
            .query(&mut link)
            .unwrap();
        assert_eq!(replies.len(), 3);
        assert_eq!(replies[0], Value::Okay);
        assert!(matches!(&replies[1], Value::ServerError(e) if e.code() == "NOSCRIPT"));
        assert_eq!(replies[2], Value::Int(7));
        assert!(link.is_open());
    }
}
