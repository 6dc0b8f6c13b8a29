//! Why no member of a `zks://` ensemble could be reached, when zookeeper-client says only that
//! (it keeps no cause): a TLS handshake with each member, made with rustls as the client makes
//! it (the same CA, client certificate and server name), tells a CA redlock does not trust, a
//! client certificate the member asks for, and a plain-text port apart, as etcd's client does
//! from its own handshake's error. Made once per connection, after a connect that failed.

use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

use crate::backend::Tls;

/// How long one member's handshake may take: a member that takes the connection and never
/// answers is left for the next.
const HANDSHAKE: Duration = Duration::from_secs(1);

/// How long the handshakes may take together, whatever the attempt has left.
const ALL: Duration = Duration::from_secs(2);

/// How long a member that finished the handshake is given to refuse the client's certificate:
/// with TLS 1.3 the member says so after the client has sent its last handshake message.
const VERDICT: Duration = Duration::from_millis(300);

/// What the handshakes with the members `hosts` (`host:port`, an IPv6 address in brackets)
/// say, as one line: the first member's whose handshake failed, naming the member and what to
/// do; None when no handshake failed that way (each member refused the connection, did not
/// answer, or let redlock in), or `deadline` (at most [`ALL`] from now) came first.
pub(super) fn why(tls: &Tls, hosts: &[String], deadline: Instant) -> Option<String> {
    let deadline = deadline.min(Instant::now() + ALL);
    let config = Arc::new(crate::backend::tls::build(tls).ok()?);
    hosts.iter().find_map(|host| {
        let left = deadline.checked_duration_since(Instant::now())?;
        handshake(&config, host, left.min(HANDSHAKE))
    })
}

/// The handshake with `host` within `time`: why it failed, if it did in a way the options can
/// mend.
fn handshake(config: &Arc<ClientConfig>, host: &str, time: Duration) -> Option<String> {
    let at = host;
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let server = ServerName::try_from(name.to_owned()).ok()?;
    let addr = host.to_socket_addrs().ok()?.next()?;
    let mut socket = TcpStream::connect_timeout(&addr, time).ok()?;
    socket.set_read_timeout(Some(time)).ok()?;
    socket.set_write_timeout(Some(time)).ok()?;
    let mut tls = ClientConnection::new(Arc::clone(config), server).ok()?;
    while tls.is_handshaking() {
        if let Err(err) = tls.complete_io(&mut socket) {
            return refusal(at, &err);
        }
    }
    // Sent with the client's last handshake message: a member that refuses the client's
    // certificate (or its absence) says so now, in an alert.
    socket.set_read_timeout(Some(VERDICT)).ok()?;
    match tls.complete_io(&mut socket) {
        Err(err) => refusal(at, &err),
        Ok(_) => None,
    }
}

/// What a handshake's I/O error says of the member at `at`, as one line: None when it says
/// nothing of TLS (the member did not answer in time).
fn refusal(at: &str, err: &std::io::Error) -> Option<String> {
    if let Some(tls) = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        return Some(crate::backend::tls::refusal("ZooKeeper", at, tls));
    }
    match err.kind() {
        // A plain-text member reads the client's hello as a request far too long, and closes.
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
            Some(format!(
                "ZooKeeper at {at} closed the connection during the TLS handshake: it is not a \
                 TLS port (use zk://, or the members' secureClientPort)"
            ))
        }
        _ => None,
    }
}
