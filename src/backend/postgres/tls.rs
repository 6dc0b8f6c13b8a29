//! TLS on PostgreSQL, as libpq's `sslmode` asks for it: `disable`, none; `allow` and `prefer`
//! (libpq's default), TLS where the server offers it, the certificate not verified; `require`,
//! TLS, not verified unless a root certificate is given (then as `verify-ca`, as libpq does);
//! `verify-ca`, the chain verified; `verify-full`, the chain and the host name. The root
//! certificates come from `sslrootcert` (or `--tls-ca-cert`), else the system's store; a client
//! certificate from `sslcert` and `sslkey` (or `--tls-cert` and `--tls-key`).

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode as Wire;

use super::url::{Host, Parsed, SslMode};
use crate::backend::Tls;

/// The TLS configuration `parsed` and the TLS options ask for (None: no TLS), with
/// tokio-postgres's own mode set in `config`; an error as one line.
pub(super) fn settle(
    parsed: &Parsed,
    options: &Tls,
    config: &mut tokio_postgres::Config,
) -> Result<Option<Arc<ClientConfig>>, String> {
    if options.insecure {
        return Err(
            "--tls-insecure does not work with postgres://: sslmode=require encrypts without \
             verifying the server's certificate, as libpq does"
                .into(),
        );
    }
    let unix = parsed.hosts.iter().all(|h| matches!(h, Host::Unix { .. }));
    let mode = match parsed.sslmode {
        // A unix socket carries no TLS (libpq does not try it there either).
        _ if unix => SslMode::Disable,
        mode => mode,
    };
    let files_given = parsed.sslrootcert.is_some() || parsed.sslcert.is_some();
    if mode == SslMode::Disable {
        if (options.is_set() || files_given) && !unix {
            return Err(
                "TLS options with sslmode=disable: drop them, or ask for TLS with sslmode=require \
                 or verify-full"
                    .into(),
            );
        }
        config.ssl_mode(Wire::Disable);
        return Ok(None);
    }
    let ca_cert = match &parsed.sslrootcert {
        // libpq 16's word for the system's store.
        Some(path) if path == Path::new("system") => None,
        Some(path) => Some(read("sslrootcert", path, "CERTIFICATE-----")?),
        None => options.ca_cert.clone(),
    };
    let client = match (&parsed.sslcert, &parsed.sslkey) {
        (Some(cert), Some(key)) => Some((
            read("sslcert", cert, "CERTIFICATE-----")?,
            read("sslkey", key, "PRIVATE KEY-----")?,
        )),
        _ => options.client.clone(),
    };
    let rooted = parsed.sslrootcert.is_some() || options.ca_cert.is_some();
    let verify = match mode {
        SslMode::VerifyFull => Verify::Full,
        SslMode::VerifyCa => Verify::Chain,
        SslMode::Require if rooted => Verify::Chain,
        _ => Verify::Nothing,
    };
    let settings = Tls {
        ca_cert,
        client,
        insecure: verify == Verify::Nothing,
    };
    let mut built = crate::backend::tls::build(&settings)?;
    if verify == Verify::Chain {
        let roots = roots(&settings)?;
        let inner = WebPkiServerVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|e| format!("the TLS root certificates cannot be used: {e}"))?;
        built
            .dangerous()
            .set_certificate_verifier(Arc::new(AnyName { inner }));
    }
    config.ssl_mode(match mode {
        SslMode::Allow | SslMode::Prefer => Wire::Prefer,
        _ => Wire::Require,
    });
    Ok(Some(Arc::new(built)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    Full,
}

/// The contents of a PEM file a URL parameter names, which must hold a section whose header
/// ends with `marker`; the error names the parameter and the file, never the contents.
fn read(parameter: &str, path: &Path, marker: &str) -> Result<Vec<u8>, String> {
    let bytes = crate::file::read_or_pipe(path, crate::file::PEM_CAP)
        .map_err(|why| format!("{parameter} {}: {why}", path.display()))?;
    let found = String::from_utf8_lossy(&bytes)
        .lines()
        .any(|line| line.starts_with("-----BEGIN ") && line.trim_end().ends_with(marker));
    if !found {
        let what = marker.trim_end_matches('-').to_lowercase();
        return Err(format!(
            "{parameter} {}: holds no PEM {what}",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The root certificates `settings` trust, for `verify-ca`'s verifier.
fn roots(settings: &Tls) -> Result<RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let Some(pem) = &settings.ca_cert else {
        return crate::backend::tls::system_roots();
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("unable to parse root certificate PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|_| "unable to parse TLS trust anchors".to_owned())?;
    }
    Ok(roots)
}

/// `verify-ca`: the chain is verified, and whatever name the certificate is for accepted.
#[derive(Debug)]
struct AnyName {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verified => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
