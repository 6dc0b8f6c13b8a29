//! TLS settings every backend builds its rustls client configuration from: the trust store
//! (`--tls-ca-cert`, or the system's through rustls-native-certs, which honours
//! `SSL_CERT_FILE`), a client certificate, and no verification at all where asked
//! (`--tls-insecure`; PostgreSQL's `sslmode=prefer` and `require`, as libpq does).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::backend::Tls;

/// Make ring the process's rustls crypto provider, if none is yet: rustls picks one by itself
/// only when one provider is built, and zookeeper-client's TLS builds rustls with its default
/// aws-lc-rs beside the ring every other client here uses, whose own configurations (tonic's,
/// tokio-postgres-rustls's, zookeeper-client's) take the process's. Called before any
/// connection is made ([`crate::backend::open`], [`build`]); a second call changes nothing.
pub(crate) fn ring_by_default() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The rustls client configuration `tls` asks for, the way the redis crate builds it for its
/// own connections (`create_rustls_config` in redis 1.8.1: no SNI when verification is off); an
/// error (never showing a key) when the files or the trust store cannot be used.
pub(crate) fn build(tls: &Tls) -> Result<ClientConfig, String> {
    ring_by_default();
    let roots = match &tls.ca_cert {
        // Nothing is verified: no trust store to read.
        _ if tls.insecure => RootCertStore::empty(),
        Some(pem) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert =
                    cert.map_err(|e| format!("unable to parse root certificate PEM: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|_| "unable to parse TLS trust anchors".to_owned())?;
            }
            roots
        }
        None => system_roots()?,
    };
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let mut config = match &tls.client {
        Some((cert, key)) => {
            let (chain, key) = client_pem(cert, key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("unable to build client with TLS parameters provided: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    if tls.insecure {
        let supported = config.crypto_provider().signature_verification_algorithms;
        config.enable_sni = false;
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(NoVerification { supported }));
    }
    Ok(config)
}

/// `--tls-cert` and `--tls-key` checked as a pair before any connection: PEM that parses, and a
/// key that is the certificate's (rustls's own check, which the Redis and PostgreSQL clients
/// get from [`build`]). For the clients that take the PEM themselves (etcd's, ZooKeeper's),
/// which otherwise fail at each member's handshake with 69 and no word of the key. Never
/// shows the key.
pub(crate) fn check_client_pair(cert: &[u8], key: &[u8]) -> Result<(), String> {
    ring_by_default();
    let (chain, key) = client_pem(cert, key)?;
    if chain.is_empty() {
        return Err("--tls-cert holds no certificate (PEM)".into());
    }
    let provider = rustls::crypto::ring::default_provider();
    match rustls::sign::CertifiedKey::from_der(chain, key, &provider) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InconsistentKeys(_)) => Err(
            "--tls-key is not the key of the certificate in --tls-cert: give the key that \
             certificate was made for"
                .into(),
        ),
        Err(e) => Err(format!("cannot use --tls-cert and --tls-key: {e}")),
    }
}

/// `--tls-cert`'s chain and `--tls-key`'s key, read from their PEM.
fn client_pem(
    cert: &[u8],
    key: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("unable to parse client certificate chain PEM: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("unable to extract private key from PEM file: {e}"))?;
    Ok((chain, key))
}

/// The system's trust store, as the redis crate loads it: any error fails the connection.
pub(crate) fn system_roots() -> Result<RootCertStore, String> {
    check_ssl_cert_file()?;
    let mut found = rustls_native_certs::load_native_certs();
    if let Some(error) = found.errors.pop() {
        return Err(error.to_string());
    }
    let mut roots = RootCertStore::empty();
    for cert in found.certs {
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    Ok(roots)
}

/// `--tls-insecure`: every certificate is accepted (the handshake's signatures are not checked
/// either), as the redis crate's `NoCertificateVerification` does.
#[derive(Debug)]
struct NoVerification {
    supported: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.supported.supported_schemes()
    }
}

/// The variable rustls-native-certs reads a CA file from.
pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";

/// Why a TLS handshake with the member of `system` (etcd, ZooKeeper) at `at` failed, and what
/// to do, as one line.
pub(crate) fn refusal(system: &str, at: &str, tls: &rustls::Error) -> String {
    use rustls::{AlertDescription, CertificateError, Error as Tls};
    match tls {
        Tls::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "{system} at {at} shows a certificate from a CA redlock does not trust ({tls}): \
             give that CA with --tls-ca-cert"
        ),
        Tls::InvalidCertificate(_) => {
            format!("{system} at {at} shows a certificate redlock cannot accept ({tls})")
        }
        // CertificateUnknown: a client certificate its CA did not sign (Java's members).
        Tls::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA,
        ) => format!(
            "{system} at {at} refused redlock's client certificate ({tls}): it asks for one \
             that its CA signed; give it with --tls-cert and --tls-key"
        ),
        // Something else than TLS answered the hello.
        Tls::InvalidMessage(_) => format!(
            "{system} at {at} did not answer in TLS ({tls}): not a TLS port, or something else \
             listens there"
        ),
        _ => format!("the TLS handshake with {system} at {at} failed: {tls}"),
    }
}

/// `SSL_CERT_FILE`, which rustls-native-certs reads wherever the system's store is (a
/// `rediss://` or `etcds://` URL without `--tls-ca-cert`, PostgreSQL's `sslrootcert=system`):
/// checked before it is read, like the options' files (a regular file within the PEM cap), so
/// that a FIFO or a device there cannot hang or fill a run.
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
