//! Why no member of an ensemble could be reached, when zookeeper-client says only that (it
//! keeps no cause): a TLS handshake of redlock's own with each member, made with rustls.
//!
//! - For `zks://`, made as the client makes it (the same CA, client certificate and server
//!   name): it tells a CA redlock does not trust, a client certificate the member asks for,
//!   and a port that does not speak TLS apart, as etcd's client does from its own handshake.
//! - For `zk://`, with nothing verified and nothing sent after it: a member that answers the
//!   hello speaks TLS on that port, and the URL should be `zks://`.
//!
//! Made once per connection, after a connect that reached no member.

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

/// What the handshakes found, each as one line naming the ensemble or the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Found {
    /// A member's answer that no retry mends, and what to do.
    Refusal(String),
    /// Why no member could be used, which may mend meanwhile (a member restarting, a proxy's
    /// server coming back): the run tries again under `--wait`.
    Unreachable(String),
    /// Nothing the handshakes can tell.
    Nothing,
}

/// What handshakes with the members `hosts` (`host:port`, an IPv6 address in brackets) of the
/// ensemble shown as `at` find, by `deadline` (at most [`ALL`] from now): with `tls` for
/// `zks://`, None for `zk://`.
pub(super) fn why(tls: Option<&Tls>, hosts: &[String], at: &str, deadline: Instant) -> Found {
    let deadline = deadline.min(Instant::now() + ALL);
    // zk://: nothing is verified, since nothing is sent after the handshake.
    let unverified = Tls {
        insecure: true,
        ..Tls::default()
    };
    let Ok(config) = crate::backend::tls::build(tls.unwrap_or(&unverified)) else {
        return Found::Nothing;
    };
    let config = Arc::new(config);
    let (mut reached, mut spoke, mut unresolved) = (false, false, None);
    for host in hosts {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        let shook = handshake(&config, host, left.min(HANDSHAKE));
        reached |= !matches!(shook, Shook::Unreached | Shook::Unresolved);
        spoke |= !matches!(shook, Shook::Unreached | Shook::Unresolved | Shook::Silent);
        if matches!(shook, Shook::Unresolved) && unresolved.is_none() {
            unresolved = Some(host.clone());
        }
        match (tls.is_some(), shook) {
            (true, Shook::Refused(err)) => {
                return Found::Refusal(crate::backend::tls::refusal("ZooKeeper", host, &err));
            }
            (true, Shook::ClosedOnHello) => {
                return Found::Unreachable(format!(
                    "ZooKeeper at {host} closed the connection on redlock's TLS hello: not a TLS \
                     port (use zk://, or the members' secureClientPort), a member whose TLS is \
                     broken (Debian's members need netty-codec.jar on their classpath), or a \
                     proxy with nothing behind it"
                ));
            }
            (false, Shook::Refused(_) | Shook::SpokeTls) => {
                return Found::Refusal(format!(
                    "ZooKeeper at {host} speaks TLS on that port: use zks:// (with \
                     --tls-ca-cert), or the members' clientPort"
                ));
            }
            _ => {}
        }
    }
    let none = format!("no member of ZooKeeper at {at}");
    match (reached, spoke, unresolved) {
        (false, _, None) => Found::Unreachable(format!(
            "{none} could be reached (each refused the connection or did not answer)"
        )),
        (false, _, Some(host)) => Found::Unreachable(format!(
            "{none} could be reached (each refused the connection, did not answer, or has a \
             name that does not resolve: {host})"
        )),
        (true, false, _) => Found::Unreachable(format!(
            "{none} answered: each took the connection and said nothing (frozen, or not \
             ZooKeeper)"
        )),
        (true, true, _) => Found::Nothing,
    }
}

/// How one member's handshake went.
enum Shook {
    /// The member took no TCP connection.
    Unreached,
    /// The member's name did not resolve.
    Unresolved,
    /// rustls's error: the member's certificate, or its alert.
    Refused(rustls::Error),
    /// The member closed the connection before it answered the client's hello.
    ClosedOnHello,
    /// The member answered in TLS, and nothing came of it that the options can mend.
    SpokeTls,
    /// The member took the connection and said nothing in time.
    Silent,
}

/// The handshake with the member at `at` (`host:port`) within `time`.
fn handshake(config: &Arc<ClientConfig>, at: &str, time: Duration) -> Shook {
    let name = at.rsplit_once(':').map_or(at, |(name, _)| name);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let Ok(server) = ServerName::try_from(name.to_owned()) else {
        return Shook::Unresolved;
    };
    let Some(addr) = at.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return Shook::Unresolved;
    };
    let Ok(mut socket) = TcpStream::connect_timeout(&addr, time) else {
        return Shook::Unreached;
    };
    let Ok(mut tls) = ClientConnection::new(Arc::clone(config), server) else {
        return Shook::Silent;
    };
    if socket.set_read_timeout(Some(time)).is_err() || socket.set_write_timeout(Some(time)).is_err()
    {
        return Shook::Silent;
    }
    while tls.is_handshaking() {
        if let Err(err) = tls.complete_io(&mut socket) {
            return match rustls_error(&err) {
                Some(refused) => Shook::Refused(refused.clone()),
                None if closed(&err) && tls.negotiated_cipher_suite().is_none() => {
                    Shook::ClosedOnHello
                }
                None if closed(&err) => Shook::SpokeTls,
                None => Shook::Silent,
            };
        }
    }
    // Sent with the client's last handshake message: a member that refuses the client's
    // certificate (or its absence) says so now, in an alert. Anything else (a close, the time
    // running out) says nothing more.
    if socket.set_read_timeout(Some(VERDICT)).is_err() {
        return Shook::SpokeTls;
    }
    match tls.complete_io(&mut socket) {
        Err(err) => match rustls_error(&err) {
            Some(refused) => Shook::Refused(refused.clone()),
            None => Shook::SpokeTls,
        },
        Ok(_) => Shook::SpokeTls,
    }
}

/// rustls's own error beneath a handshake's I/O error.
fn rustls_error(err: &std::io::Error) -> Option<&rustls::Error> {
    err.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Whether the member closed the connection.
fn closed(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
    )
}
