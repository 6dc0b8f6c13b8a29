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

/// The variable rustls-native-certs reads a CA file from.
pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";

/// `SSL_CERT_FILE`, which rustls-native-certs reads for a `rediss://` URL without
/// `--tls-ca-cert`: checked at start like the options' files (a regular file within the PEM
/// cap), so that a FIFO or a device there cannot hang or fill a run that connects.
pub(crate) fn check_ssl_cert_file() -> Result<(), String> {
    use crate::file::{self, Unusable};
    use std::path::Path;
    let Some(path) = std::env::var_os(SSL_CERT_FILE).filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let path = Path::new(&path);
    file::check(path, file::PEM_CAP).map_err(|why| {
        let why = match why {
            Unusable::TooLarge(_) => format!("{why}, more than a PEM file of certificates holds"),
            why => why.to_string(),
        };
        format!("{SSL_CERT_FILE} {}: {why}", path.display())
    })
}
