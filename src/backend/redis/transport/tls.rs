//! The TLS side of a `rediss://` connection: the rustls client configuration, built from
//! `--tls-ca-cert`, `--tls-cert`/`--tls-key` and `--tls-insecure` the way the redis crate builds
//! it for its own connections (`create_rustls_config` in redis 1.8.1: the system's trust store
//! through rustls-native-certs, which honours `SSL_CERT_FILE`, unless a CA file is given; no SNI
//! when verification is off), once per endpoint instead of once per connection.
//!
//! redlock's [`link`](crate::backend::redis::transport::link) does the handshake itself, within the request's
//! deadline, so it needs the configuration the crate keeps to itself.

use std::io;
use std::sync::{Arc, OnceLock};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use crate::backend::tls::build;

use crate::backend::redis::transport::endpoint::Tls;

/// The client configuration of one endpoint's TLS connections: built on first use (the
/// system's trust store is read only by a run that connects), shared by the endpoint's copies.
#[derive(Clone)]
pub(crate) struct TlsClient {
    settings: Arc<Tls>,
    built: Arc<OnceLock<Result<Arc<ClientConfig>, String>>>,
}

impl TlsClient {
    pub(crate) fn new(settings: Tls) -> Self {
        Self {
            settings: Arc::new(settings),
            built: Arc::new(OnceLock::new()),
        }
    }

    /// The configuration; an error (never showing a key) when the files or the trust store
    /// cannot be used.
    pub(crate) fn config(&self) -> Result<Arc<ClientConfig>, String> {
        self.built
            .get_or_init(|| build(&self.settings).map(Arc::new))
            .clone()
    }
}

/// A TLS client for `host` under `config`, as an I/O error for the connection's failure.
pub(crate) fn client(
    config: Arc<ClientConfig>,
    host: &str,
) -> io::Result<rustls::ClientConnection> {
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    rustls::ClientConnection::new(config, name).map_err(io::Error::other)
}
