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

use crate::transport::{Failure, Reason};

/// The longest a probe waits for an answer.
const PROBE_WAIT: Duration = Duration::from_millis(500);

/// What one plain-text `ROLE` found at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// A Redis master, answering without a password.
    Master,
    /// A Redis replica of `master` (`host:port`).
    Replica { master: String },
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
}

/// A better failure than `failure` for `err`, seen on the first request of a connection to `addr`
/// (reached with `info`), when a probe can tell what is wrong; else `failure` itself.
pub(crate) fn explain(
    info: &ConnectionInfo,
    addr: &str,
    err: &RedisError,
    failure: Failure,
) -> Failure {
    let node = info.addr();
    let tls = matches!(node, ConnectionAddr::TcpTls { .. });
    let has_password = info.redis_settings().password().is_some();
    // Refused connections and silence say enough (a TLS handshake that gets no answer aside:
    // a plain Redis port waits for more of a "command" that never ends).
    let timeout = err.is_timeout();
    let garbled = matches!(
        err.kind(),
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType
    );
    let confusing = (timeout && tls)
        || (!timeout
            && !err.is_connection_refusal()
            && (err.is_io_error() || err.is_connection_dropped()))
        // A plain ERR to redlock's first command: an unknown command, most often.
        || err.code() == Some("ERR")
        || garbled
        || err.code() == Some("READONLY")
        || (err.code() == Some("NOAUTH") && !has_password);
    if !confusing {
        return failure;
    }
    let found = probe(node);
    let refused = |message: String| Failure::Refused(message.into());
    match found {
        Found::Sentinel { services } => {
            let service = services.first().map_or("SERVICE", String::as_str);
            refused(format!(
                "{addr} is a Redis Sentinel, not a Redis server: use \
                 redis+sentinel://{addr}/{service} (it monitors: {})",
                if services.is_empty() {
                    "nothing".to_owned()
                } else {
                    services.join(", ")
                }
            ))
        }
        Found::Replica { master } if err.code() == Some("READONLY") => refused(format!(
            "Redis at {addr} is a replica (of {master}), which cannot hold a lock: give its \
             master, redis://{master}, or a redis+sentinel:// URL to follow failovers"
        )),
        Found::NoAuth if !has_password => refused(format!(
            "Redis at {addr} needs a password: set REDLOCK_PASSWORD, --password-file, or \
             redis://USER:PASSWORD@{addr}"
        )),
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
        Found::Other if garbled => refused(format!(
            "{addr} did not answer in the Redis protocol: is it a Redis server? check the port"
        )),
        _ => failure,
    }
}

/// Send an inline `ROLE` to `node` in plain text and tell from the first bytes what answered.
fn probe(node: &ConnectionAddr) -> Found {
    let deadline = Instant::now() + PROBE_WAIT;
    let reply = match node {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            let reply = match connect(host, *port) {
                Connected::Open(stream) => exchange(stream, b"ROLE\r\n", deadline),
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
            Ok(stream) => exchange(stream, b"ROLE\r\n", deadline),
            Err(_) => return Found::Silent,
        },
        _ => return Found::Silent,
    };
    match reply {
        Some(bytes) => identify(&bytes),
        None => Found::Silent,
    }
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
        // An array reply: wait for the role's name and, for a replica, the master's address.
        Some(b'*') => reply.windows(2).filter(|w| w == b"\r\n").count() >= 7,
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
                (Some(host), Some(port)) => format!("{host}:{port}"),
                _ => "its master".to_owned(),
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
                master: "127.0.0.1:6380".into()
            }
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
        assert_eq!(identify(b"SSH-2.0-OpenSSH\r\n"), Found::Other);
    }
}
