//! Telling what kind of server redlock reached when a request failed in a way that says little
//! (the connection closed at once, an unknown command, a reply that is not the Redis protocol,
//! READONLY, no TLS handshake), so that the message says what was found and what to use instead.
//!
//! The probe is one inline `ROLE` on a new plain connection, read for at most half a second:
//! only on a failure, never on the path of a run that works. A port that closes it without a
//! word is asked again with a TLS hello: a TLS port answers that (a Redis TLS port resets a plain
//! connection, as a proxy with no server behind it does; only the hello tells them apart).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisError};

use crate::backend::redis::transport::endpoint::{Endpoint, Target};
use crate::backend::redis::transport::{Failure, Peer, Reason, failure};

/// The longest a probe waits for an answer.
const PROBE_WAIT: Duration = Duration::from_millis(500);
/// The longest a probe listens, before asking, for a server that turns connections away (it
/// writes its error as it accepts).
const GREETING_WAIT: Duration = Duration::from_millis(200);

/// What one plain-text `ROLE` found at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// A Redis master, answering without a password.
    Master,
    /// A Redis replica of `master` (`host:port`; None when it named none).
    Replica { master: Option<String> },
    /// A Sentinel, monitoring these services.
    Sentinel { services: Vec<String> },
    /// A Redis server that wants a password first.
    NoAuth,
    /// Redis, with something else to say (an ACL error, ...).
    Redis,
    /// An HTTP server.
    Http,
    /// A TLS server (it answered with a TLS alert, or a TLS hello).
    Tls,
    /// It accepted the connection and closed it without a word, to plain text and to a TLS hello
    /// alike: nothing behind it (a proxy whose server is down, a server shutting down).
    Closed,
    /// Nothing came back in time.
    Silent,
    /// Something that is not the Redis protocol.
    Other,
    /// It said this error line before it was asked anything, then closed the connection: Redis
    /// at `maxclients` (`ERR max number of clients reached`) or in protected mode (`DENIED`).
    Rejected(String),
}

/// Where a request that failed went: what the messages name and the URLs they suggest.
pub(crate) struct Reached<'a> {
    pub endpoint: &'a Endpoint,
    /// How the connection was made.
    pub info: &'a ConnectionInfo,
    /// How messages name it (`host:port`, `sentinel host:port`, a socket's path).
    pub addr: &'a str,
    pub peer: Peer,
}

/// A better failure than `failure` for `err`, seen on the first request of a connection to
/// `at`, when a probe can tell what is wrong; else `failure` itself.
pub(crate) fn explain(at: &Reached, err: &RedisError, failure: Failure) -> Failure {
    let node = at.info.addr();
    let tls = matches!(node, ConnectionAddr::TcpTls { .. });
    let has_password = at.info.redis_settings().password().is_some();
    match worth_a_probe(err, tls, has_password) {
        Some(dropped) => explained(at, probe(node, dropped), err, failure),
        None => failure,
    }
}

/// Whether `err` says too little for a user to act on, so that a probe should ask what
/// answered; if so, whether the connection was dropped (the probe then reads what the server
/// said before it closed).
fn worth_a_probe(err: &RedisError, tls: bool, has_password: bool) -> Option<bool> {
    // Refused connections and silence say enough (a TLS handshake that gets no answer aside:
    // a plain Redis port waits for more of a "command" that never ends).
    let timeout = err.is_timeout();
    // Closed or reset under the request: the server may have turned the connection away
    // before reading it, saying why first.
    let dropped = !timeout
        && !err.is_connection_refusal()
        && (err.is_io_error() || err.is_connection_dropped());
    let confusing = (timeout && tls)
        || dropped
        // A plain ERR to redlock's first command: an unknown command, most often.
        || err.code() == Some("ERR")
        || garbled(err)
        || err.code() == Some("READONLY")
        || (err.code() == Some("NOAUTH") && !has_password);
    confusing.then_some(dropped)
}

/// A reply that is not the Redis protocol, or not the reply's type.
fn garbled(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType
    )
}

/// What the probe `found` at `at` makes of `err`: a failure that says what is there and what
/// to use instead, or `failure` when it tells nothing more.
fn explained(at: &Reached, found: Found, err: &RedisError, failure: Failure) -> Failure {
    let node = at.info.addr();
    let tls = matches!(node, ConnectionAddr::TcpTls { .. });
    let has_password = at.info.redis_settings().password().is_some();
    let refused = |message: String| Failure::Refused(message.into());
    let addr = at.addr;
    let place = place(node);
    match found {
        Found::Rejected(said) => failure::turned_away(&addr, &said, err.clone()),
        Found::Sentinel { services } if tls => refused(format!(
            "the Redis Sentinel at {place} speaks plain text, not TLS: use {}",
            sentinel_url(at, &place, &services)
        )),
        // A sentinel found where one was sought: the failure is something else.
        Found::Sentinel { .. } if at.peer == Peer::Sentinel => failure,
        Found::Sentinel { services } => refused(format!(
            "{place} is a Redis Sentinel, not a Redis server: use {} (it monitors: {})",
            sentinel_url(at, &place, &services),
            if services.is_empty() {
                "nothing".to_owned()
            } else {
                services.join(", ")
            }
        )),
        Found::Replica { master } if err.code() == Some("READONLY") => refused(
            crate::backend::redis::transport::role::replica_refused(addr, master.as_deref()),
        ),
        Found::NoAuth if !has_password => refused(password_needed(at, &place)),
        Found::Http => refused(format!(
            "{addr} is not a Redis server: it answered in HTTP; check the port"
        )),
        Found::Tls if !tls => refused(format!(
            "{addr} closed the connection at once: it looks like a TLS port; use rediss://{addr}"
        )),
        // Worth retrying (with --wait): the server behind it may come back.
        Found::Closed if !tls => Failure::Unreachable(Reason::caused_by(
            format!(
                "{addr} accepted the connection and closed it without a word: no Redis answers \
                 behind it (a proxy whose server is down?)"
            ),
            err.clone(),
        )),
        Found::Master | Found::Replica { .. } | Found::NoAuth | Found::Redis if tls => {
            refused(format!(
                "Redis at {addr} speaks plain text, not TLS: use redis://{addr}, or its TLS port"
            ))
        }
        Found::Other if garbled(err) => refused(format!(
            "{addr} did not answer in the Redis protocol: is it a Redis server? check the port"
        )),
        _ => failure,
    }
}

/// `host:port` (IPv6 in brackets) or a socket's path: the place a suggested URL names.
fn place(node: &ConnectionAddr) -> String {
    match node {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            crate::backend::redis::transport::node_name(host, *port)
        }
        other => other.to_string(),
    }
}

/// `host:port,host:port` of `nodes`, as a URL lists them.
fn hosts(nodes: &[(String, u16)]) -> String {
    nodes
        .iter()
        .map(|(host, port)| crate::backend::redis::transport::node_name(host, *port))
        .collect::<Vec<_>>()
        .join(",")
}

/// The plain-text Sentinel URL to use: the endpoint's sentinels and service when it is one,
/// else the sentinel found at `place` and the first service it monitors.
fn sentinel_url(at: &Reached, place: &str, services: &[String]) -> String {
    match &at.endpoint.target {
        Target::Sentinel {
            sentinels, service, ..
        } => format!("redis+sentinel://{}/{service}", hosts(sentinels)),
        _ => format!(
            "redis+sentinel://{place}/{}",
            services.first().map_or("SERVICE", String::as_str)
        ),
    }
}

/// What to say to a sentinel at `place` that wants a password and got none.
pub(crate) fn sentinel_needs_password(place: &str) -> String {
    format!(
        "the Redis Sentinel at {place} needs a password: give it as \
         sentinel_password=PASSWORD in the URL's parameters (REDLOCK_PASSWORD and \
         --password-file are the data nodes')"
    )
}

/// What to say to a server that wants a password and got none, with where the password goes
/// for this kind of URL (a socket's is `?pass=`; a sentinel's own is `sentinel_password=`).
fn password_needed(at: &Reached, place: &str) -> String {
    if at.peer == Peer::Sentinel {
        return sentinel_needs_password(place);
    }
    let tls = if at.endpoint.uses_tls() { "s" } else { "" };
    let url = match (&at.endpoint.target, at.info.addr()) {
        (_, ConnectionAddr::Unix(path)) => {
            format!("redis+unix://{}?pass=PASSWORD", path.display())
        }
        (
            Target::Sentinel {
                sentinels, service, ..
            },
            _,
        ) => format!(
            "redis{tls}+sentinel://USER:PASSWORD@{}/{service}",
            hosts(sentinels)
        ),
        (Target::Cluster { seeds }, _) => {
            format!("redis{tls}+cluster://USER:PASSWORD@{}", hosts(seeds))
        }
        (Target::Direct, _) => format!("redis{tls}://USER:PASSWORD@{place}"),
    };
    // The file first: a password in the environment is mailed by cron (docs/security.md).
    format!(
        "Redis at {} needs a password: set REDLOCK_PASSWORD_FILE (or --password-file), \
         REDLOCK_PASSWORD, or {url}",
        at.addr
    )
}

/// Ask `node` in plain text what it is, with an inline `ROLE`, and tell from the first bytes
/// what answered. `listen_first`: wait a moment for what it says before it is asked anything
/// (Redis says nothing then, unless it turns the connection away).
fn probe(node: &ConnectionAddr, listen_first: bool) -> Found {
    let deadline = Instant::now() + PROBE_WAIT;
    let reply = match node {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            let reply = match connect(host, *port) {
                Connected::Open(mut stream) => {
                    if let Some(found) = listen_first.then(|| greeting(&mut stream)).flatten() {
                        return found;
                    }
                    exchange(stream, b"ROLE\r\n", deadline)
                }
                Connected::Closed => Some(Vec::new()),
                Connected::No => return Found::Silent,
            };
            if reply.as_deref() == Some(&[]) {
                let hello = match connect(host, *port) {
                    Connected::Open(stream) => tls_answer(stream, host),
                    Connected::Closed | Connected::No => None,
                };
                return match hello {
                    Some(bytes) if identify(&bytes) == Found::Tls => Found::Tls,
                    _ => Found::Closed,
                };
            }
            reply
        }
        ConnectionAddr::Unix(path) => match UnixStream::connect(path) {
            Ok(mut stream) => {
                if let Some(found) = listen_first.then(|| greeting(&mut stream)).flatten() {
                    return found;
                }
                exchange(stream, b"ROLE\r\n", deadline)
            }
            Err(_) => return Found::Silent,
        },
        _ => return Found::Silent,
    };
    match reply {
        Some(bytes) => identify(&bytes),
        None => Found::Silent,
    }
}

/// What a server says before it is asked anything, within [`GREETING_WAIT`]: None when it
/// says nothing (as Redis does), or closes; an error line is it turning the connection away.
fn greeting(stream: &mut impl Timed) -> Option<Found> {
    let deadline = Instant::now() + GREETING_WAIT;
    let mut said = Vec::new();
    let mut buf = [0u8; 512];
    while !complete(&said) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.read_within(left).is_err() {
            break;
        }
        match stream.read(&mut buf) {
            Ok(n) if n > 0 => said.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    if said.is_empty() {
        return None;
    }
    Some(match said.strip_prefix(b"-") {
        Some(line) => Found::Rejected(
            String::from_utf8_lossy(line)
                .split("\r\n")
                .next()
                .unwrap_or_default()
                .to_owned(),
        ),
        None => identify(&said),
    })
}

/// What a new plain connection to an address came to.
enum Connected {
    Open(TcpStream),
    /// Accepted, then reset before the connect returned (std's connect_timeout reads the
    /// socket's error once it is writable): closed without a word, as later.
    Closed,
    /// Refused, unreachable, or no answer within [`PROBE_WAIT`].
    No,
}

/// A new plain connection to `host:port`, within [`PROBE_WAIT`].
fn connect(host: &str, port: u16) -> Connected {
    let Some(addr) = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .ok()
        .and_then(|mut addrs| addrs.next())
    else {
        return Connected::No;
    };
    match TcpStream::connect_timeout(&addr, PROBE_WAIT) {
        Ok(stream) => Connected::Open(stream),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Connected::Closed,
        Err(_) => Connected::No,
    }
}

/// What `stream` answers to a TLS client hello (a TLS record, from a TLS port), within
/// [`PROBE_WAIT`]. The hello is rustls's own; no certificate is looked at, as the handshake goes
/// no further than the server's first record.
fn tls_answer(stream: TcpStream, host: &str) -> Option<Vec<u8>> {
    crate::backend::tls::ring_by_default();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).ok()?;
    let mut hello = Vec::new();
    rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .ok()?
        .write_tls(&mut hello)
        .ok()?;
    exchange(stream, &hello, Instant::now() + PROBE_WAIT)
}

/// A stream that can be given a read timeout.
trait Timed: Read + Write {
    fn read_within(&self, left: Duration) -> std::io::Result<()>;
}

impl Timed for TcpStream {
    fn read_within(&self, left: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(left))
    }
}

impl Timed for UnixStream {
    fn read_within(&self, left: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(left))
    }
}

/// Write `probe` and read what comes back until `deadline`: Some(bytes) (empty when the peer
/// closed without a word), None when nothing came in time.
fn exchange(mut stream: impl Timed, probe: &[u8], deadline: Instant) -> Option<Vec<u8>> {
    if stream.write_all(probe).is_err() {
        return Some(Vec::new());
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.read_within(left).is_err() {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => return Some(reply),
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if complete(&reply) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Out of time: what came so far, if anything.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break;
            }
            // Reset by the peer (or any other end): as good as closed without a word.
            Err(_) => return Some(reply),
        }
    }
    (!reply.is_empty()).then_some(reply)
}

/// Whether `reply` holds enough to identify the server.
fn complete(reply: &[u8]) -> bool {
    match reply.first() {
        // An array reply: wait for the role's name and, for a replica, the master's address;
        // a master's name is all there is to know (it answers no more than 5 lines, so waiting
        // for 7 kept every probe of a master waiting out PROBE_WAIT).
        Some(b'*') => {
            reply.starts_with(b"*3\r\n$6\r\nmaster\r\n")
                || reply.windows(2).filter(|w| w == b"\r\n").count() >= 7
        }
        _ => reply.windows(2).any(|w| w == b"\r\n") || reply.len() >= 5,
    }
}

/// What the first bytes of a reply to `ROLE` say about the server.
fn identify(reply: &[u8]) -> Found {
    if reply.is_empty() {
        return Found::Closed;
    }
    // A TLS record of type alert (21) or handshake (22), version 3.x.
    if matches!(reply, [21 | 22, 3, ..]) {
        return Found::Tls;
    }
    let text = String::from_utf8_lossy(reply);
    if text.starts_with("HTTP/") || text.starts_with('<') {
        return Found::Http;
    }
    if text.starts_with("-NOAUTH") {
        return Found::NoAuth;
    }
    if text.starts_with('-') || text.starts_with('+') {
        return Found::Redis;
    }
    if !text.starts_with('*') {
        return Found::Other;
    }
    // The bulk strings and integers of the array, in order.
    let items: Vec<&str> = text
        .split("\r\n")
        .filter(|part| !part.is_empty() && !part.starts_with(['*', '$']))
        .map(|part| part.strip_prefix(':').unwrap_or(part))
        .collect();
    match items.first().copied() {
        Some("master") => Found::Master,
        Some("slave" | "replica") => Found::Replica {
            master: match (items.get(1), items.get(2)) {
                (Some(host), Some(port)) => {
                    crate::backend::redis::transport::role::master_of(host, port)
                }
                _ => None,
            },
        },
        Some("sentinel") => Found::Sentinel {
            services: items[1..].iter().map(|s| (*s).to_owned()).collect(),
        },
        _ => Found::Redis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_tell_the_kind_of_server() {
        assert_eq!(
            identify(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"),
            Found::Master
        );
        assert_eq!(
            identify(
                b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6380\r\n$9\r\nconnected\r\n:14\r\n"
            ),
            Found::Replica {
                master: Some("127.0.0.1:6380".into())
            }
        );
        assert_eq!(
            identify(b"*1\r\n$5\r\nslave\r\n"),
            Found::Replica { master: None }
        );
        assert_eq!(
            identify(b"*2\r\n$8\r\nsentinel\r\n*2\r\n$8\r\nmymaster\r\n$5\r\nother\r\n"),
            Found::Sentinel {
                services: vec!["mymaster".into(), "other".into()]
            }
        );
        assert_eq!(
            identify(b"-NOAUTH Authentication required.\r\n"),
            Found::NoAuth
        );
        assert_eq!(identify(b"HTTP/1.0 400 Bad Request\r\n"), Found::Http);
        assert_eq!(identify(&[21, 3, 3, 0, 2, 2, 70]), Found::Tls);
        assert_eq!(identify(&[22, 3, 3, 0, 122, 2]), Found::Tls);
        assert_eq!(identify(b""), Found::Closed);
        // A master is known from its first three lines; a replica's master takes more.
        assert!(complete(b"*3\r\n$6\r\nmaster\r\n"));
        assert!(!complete(b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n"));
        assert_eq!(identify(b"SSH-2.0-OpenSSH\r\n"), Found::Other);
    }
}
