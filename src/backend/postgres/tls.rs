//! TLS on PostgreSQL, as libpq's `sslmode` asks for it: `disable`, none; `allow` and `prefer`
//! (libpq's default), TLS where the server offers it, the certificate not verified; `require`,
//! TLS, not verified unless there is a root certificate (then as `verify-ca`, as libpq does);
//! `verify-ca`, the chain verified; `verify-full`, the chain and the host name (`verify`).
//!
//! The root certificates come from `sslrootcert` (`system`: the system's store), else
//! `--tls-ca-cert`, else `~/.postgresql/root.crt` where it exists, as libpq reads it; `verify-ca`
//! and `verify-full` without any are refused before connecting, as libpq refuses them. A client
//! certificate comes from `sslcert` and `sslkey` (or `--tls-cert` and `--tls-key`).
//!
//! A certificate refused is said in words ([`said`]): which check failed, and what to give
//! instead.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::{CertificateError, ClientConfig, OtherError};
use tokio_postgres::config::SslMode as Wire;

use super::url::{Host, Parsed, SslMode};
use super::verify::{Libpq, SelfSignedNotGiven};
use crate::backend::Tls;

/// Where libpq looks for root certificates when `sslrootcert` is not given, under the home
/// directory.
const DEFAULT_ROOT: &str = ".postgresql/root.crt";

/// TLS as settled for a server: the rustls configuration, and what it trusts.
#[derive(Clone)]
pub(crate) struct Settled {
    pub config: Arc<ClientConfig>,
    pub trust: Trust,
}

/// What the server's certificate is checked against, as messages name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trust {
    /// Nothing: the certificate is not verified.
    Unverified,
    /// The certificates in a file: `sslrootcert /etc/ssl/db-ca.pem`, `--tls-ca-cert`,
    /// `~/.postgresql/root.crt`.
    File(String),
    /// The system's store (`sslrootcert=system`).
    System,
}

/// The root certificates a connection may be verified against.
enum Root {
    /// A PEM file's contents, and how messages name it.
    File(Vec<u8>, String),
    System,
    /// None: where libpq looked (no home directory: nowhere).
    Missing(Option<PathBuf>),
}

/// The TLS configuration `parsed` and the TLS options ask for (None: no TLS), with
/// tokio-postgres's own mode set in `config`; an error as one line.
pub(super) fn settle(
    parsed: &Parsed,
    options: &Tls,
    config: &mut tokio_postgres::Config,
) -> Result<Option<Settled>, String> {
    let Some(mode) = mode(parsed, options)? else {
        config.ssl_mode(Wire::Disable);
        return Ok(None);
    };
    let root = match mode {
        // Not verified, whatever is given (libpq verifies a root it has, and falls back to
        // plain text when that fails: the server is not verified either way).
        SslMode::Allow | SslMode::Prefer => Root::Missing(None),
        _ => root(parsed, options)?,
    };
    let verify = match (mode, &root) {
        (SslMode::VerifyFull, _) => Verify::Full,
        (SslMode::VerifyCa, _) => Verify::Chain,
        (SslMode::Require, Root::File(..) | Root::System) => Verify::Chain,
        _ => Verify::Nothing,
    };
    let (ca_cert, trust) = match root {
        _ if verify == Verify::Nothing => (None, Trust::Unverified),
        Root::File(pem, named) => (Some(pem), Trust::File(named)),
        Root::System => (None, Trust::System),
        Root::Missing(looked) => return Err(no_root(mode, looked.as_deref())),
    };
    let client = match (&parsed.sslcert, &parsed.sslkey) {
        (Some(cert), Some(key)) => Some((
            read("sslcert", cert, "CERTIFICATE-----")?,
            read("sslkey", key, "PRIVATE KEY-----")?,
        )),
        _ => options.client.clone(),
    };
    let settings = Tls {
        ca_cert,
        client,
        insecure: verify == Verify::Nothing,
    };
    let built = build(&settings, verify)?;
    config.ssl_mode(match mode {
        SslMode::Allow | SslMode::Prefer => Wire::Prefer,
        _ => Wire::Require,
    });
    Ok(Some(Settled {
        config: Arc::new(built),
        trust,
    }))
}

/// The TLS mode `parsed` asks for (None: no TLS, as on a unix socket), with the options that
/// cannot go with it refused.
fn mode(parsed: &Parsed, options: &Tls) -> Result<Option<SslMode>, String> {
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
        return Ok(None);
    }
    Ok(Some(mode))
}

/// The rustls configuration of `settings`, verifying the server's certificate as `verify` says.
fn build(settings: &Tls, verify: Verify) -> Result<ClientConfig, String> {
    let mut built = crate::backend::tls::build(settings)?;
    if verify != Verify::Nothing {
        let (store, roots) = roots(settings)?;
        let chain = WebPkiServerVerifier::builder(Arc::new(store))
            .build()
            .map_err(|e| format!("the TLS root certificates cannot be used: {e}"))?;
        built.dangerous().set_certificate_verifier(Arc::new(Libpq {
            chain,
            roots,
            full: verify == Verify::Full,
        }));
    }
    Ok(built)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    Full,
}

/// The root certificates, where libpq finds them: `sslrootcert`, else `--tls-ca-cert`, else
/// `~/.postgresql/root.crt` if it exists.
fn root(parsed: &Parsed, options: &Tls) -> Result<Root, String> {
    if let Some(path) = &parsed.sslrootcert {
        // libpq 16's word for the system's store.
        if path == Path::new("system") {
            return Ok(Root::System);
        }
        let named = format!(
            "sslrootcert {}",
            crate::report::one_line(&path.to_string_lossy())
        );
        return Ok(Root::File(
            read("sslrootcert", path, "CERTIFICATE-----")?,
            named,
        ));
    }
    if let Some(pem) = &options.ca_cert {
        return Ok(Root::File(pem.clone(), "--tls-ca-cert".into()));
    }
    let Some(path) = home().map(|home| home.join(DEFAULT_ROOT)) else {
        return Ok(Root::Missing(None));
    };
    // As libpq: a file there is read (and its errors said); nothing there is no root.
    if std::fs::metadata(&path).is_err() {
        return Ok(Root::Missing(Some(path)));
    }
    let pem = read("root certificate file", &path, "CERTIFICATE-----")?;
    Ok(Root::File(pem, format!("~/{DEFAULT_ROOT}")))
}

/// The home directory, as libpq finds it: `HOME`, else the user's entry in the password file.
fn home() -> Option<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Some(home.into()),
        _ => nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|user| user.dir),
    }
}

/// `verify-ca` or `verify-full` with no root certificate to verify against.
fn no_root(mode: SslMode, looked: Option<&Path>) -> String {
    let mode = match mode {
        SslMode::VerifyFull => "verify-full",
        _ => "verify-ca",
    };
    let missing = match looked {
        Some(path) => format!(
            "~/{DEFAULT_ROOT} ({}) does not exist",
            crate::report::one_line(&path.to_string_lossy())
        ),
        None => format!("there is no home directory to find ~/{DEFAULT_ROOT} in"),
    };
    format!(
        "sslmode={mode} verifies the server's certificate, and there is no root certificate to \
         verify it with: {missing}; give sslrootcert=FILE or --tls-ca-cert FILE (the server's CA, \
         or its own certificate), sslrootcert=system for the system's store, or sslmode=require \
         to encrypt without verifying"
    )
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

/// The root certificates `settings` trust, and each of them as given (none from the system's
/// store).
fn roots(settings: &Tls) -> Result<(rustls::RootCertStore, Vec<CertificateDer<'static>>), String> {
    use rustls::pki_types::pem::PemObject;
    let Some(pem) = &settings.ca_cert else {
        return Ok((crate::backend::tls::system_roots()?, Vec::new()));
    };
    let mut store = rustls::RootCertStore::empty();
    let mut given = Vec::new();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("unable to parse root certificate PEM: {e}"))?;
        store
            .add(cert.clone())
            .map_err(|_| "unable to parse TLS trust anchors".to_owned())?;
        given.push(cert);
    }
    Ok((store, given))
}

/// What a certificate refused says: which check failed, and what to give instead, in one line.
/// Told apart by the error's type and variant, never its text.
pub(super) fn said(error: &CertificateError, trust: &Trust) -> String {
    use CertificateError as E;
    let by = match trust {
        Trust::File(named) => named.as_str(),
        Trust::System => "the system's store (sslrootcert=system)",
        Trust::Unverified => "nothing",
    };
    let give = match trust {
        Trust::System => "give the CA that signed it as sslrootcert=FILE",
        _ => "give the CA that signed it, or the server's own certificate",
    };
    let untrusted =
        |why: &str| format!("the server's certificate is not trusted by {by} ({why}): {give}");
    match error {
        E::UnknownIssuer => untrusted("none of its certificates signed it"),
        E::BadSignature => untrusted("its signature does not verify with its issuer's key"),
        E::Other(e) if e.0.is::<SelfSignedNotGiven>() => format!(
            "the server's certificate is not trusted by {by} (it is self-signed, and not one of \
             them): give the server's own certificate"
        ),
        other => not_valid(other),
    }
}

/// The webpki error inside rustls's `Other`, if it is one.
fn webpki(e: &OtherError) -> Option<webpki::Error> {
    e.0.downcast_ref::<webpki::Error>().cloned()
}

/// What a certificate trusted but not valid here says: not for this host, or not now by this
/// host's clock; else [`wrong_kind`].
fn not_valid(error: &CertificateError) -> String {
    use CertificateError as E;
    match error {
        E::NotValidForNameContext {
            expected,
            presented,
        } => format!(
            "the server's certificate is not valid for host '{}' ({}): connect by a name it \
             names, or use sslmode=verify-ca",
            crate::report::one_line(&expected.to_str()),
            names(presented)
        ),
        E::NotValidForName => "the server's certificate is not valid for the host connected \
                               to: connect by a name it names, or use sslmode=verify-ca"
            .into(),
        E::ExpiredContext { not_after, .. } => format!(
            "the server's certificate, or one that signed it, expired at {} by this host's \
             clock: the server needs a new one",
            shown(*not_after)
        ),
        E::Expired => "the server's certificate, or one that signed it, has expired by this \
                       host's clock: the server needs a new one"
            .into(),
        E::NotValidYetContext { not_before, .. } => format!(
            "the server's certificate, or one that signed it, is not valid before {} by this \
             host's clock: check this host's clock",
            shown(*not_before)
        ),
        E::NotValidYet => "the server's certificate, or one that signed it, is not valid yet by \
                           this host's clock: check this host's clock"
            .into(),
        other => wrong_kind(other),
    }
}

/// What a certificate of the wrong kind, or one rustls cannot read or check, says.
fn wrong_kind(error: &CertificateError) -> String {
    use CertificateError as E;
    match error {
        E::InvalidPurpose | E::InvalidPurposeContext { .. } => "a certificate of the wrong kind \
            (its extended key usage is not for a TLS server): the server needs one issued for \
            serverAuth"
            .into(),
        E::Other(e) if webpki(e) == Some(webpki::Error::CaUsedAsEndEntity) => {
            "a certificate of the wrong kind (a CA's, CA:TRUE, where the server's own should be): \
             the server needs one its CA issued without CA:TRUE, or give its certificate itself \
             if it is self-signed"
                .into()
        }
        E::Other(e) if webpki(e) == Some(webpki::Error::EndEntityUsedAsCa) => {
            "a certificate of the wrong kind (a server's, CA:FALSE, signed the server's): the \
             server's chain needs its CA's certificates"
                .into()
        }
        E::BadEncoding => "the server's certificate cannot be read (it is not valid DER)".into(),
        E::UnhandledCriticalExtension => "a certificate of the wrong kind (it has a critical \
            extension rustls does not know)"
            .into(),
        #[allow(deprecated)]
        E::UnsupportedSignatureAlgorithm
        | E::UnsupportedSignatureAlgorithmContext { .. }
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "the server's certificate is signed with an algorithm rustls does not support".into()
        }
        // Revocation is not checked, nor OCSP asked for: these do not come. Anything else is
        // named by webpki's word for it.
        E::Other(e) => match webpki(e) {
            Some(error) => format!("the server's certificate is refused by rustls ({error:?})"),
            None => format!("the server's certificate is refused by rustls ({e})"),
        },
        other => format!("the server's certificate is refused by rustls ({other:?})"),
    }
}

/// The names a certificate gives, as a message shows them: a few, quoted.
fn names(presented: &[String]) -> String {
    const SHOWN: usize = 4;
    let quoted: Vec<String> = presented
        .iter()
        .take(SHOWN)
        .map(|n| format!("'{}'", crate::report::one_line(n)))
        .collect();
    match presented.len() {
        0 => "it names no host".into(),
        n if n > SHOWN => format!("it names {} and {} more", quoted.join(", "), n - SHOWN),
        _ => format!("it names {}", quoted.join(", ")),
    }
}

/// A certificate's time, as messages show it (RFC 3339, UTC).
fn shown(time: UnixTime) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(time.as_secs());
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;

    #[test]
    fn each_refusal_says_which_check_failed_in_words() {
        let file = Trust::File("sslrootcert /etc/ssl/ca.pem".into());
        let webpki = |e: webpki::Error| CertificateError::Other(OtherError(Arc::new(e)));
        let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_577_923_200));
        let cases = [
            (
                CertificateError::UnknownIssuer,
                &file,
                "not trusted by sslrootcert /etc/ssl/ca.pem (none",
            ),
            (
                CertificateError::BadSignature,
                &Trust::System,
                "not trusted by the system's store",
            ),
            (
                CertificateError::Other(OtherError(Arc::new(SelfSignedNotGiven))),
                &file,
                "(it is self-signed, and not one of them): give the server's own certificate",
            ),
            (
                CertificateError::NotValidForNameContext {
                    expected: ServerName::try_from("db.example").unwrap(),
                    presented: (1..=6).map(|i| format!("n{i}")).collect(),
                },
                &file,
                "not valid for host 'db.example' (it names 'n1', 'n2', 'n3', 'n4' and 2 more)",
            ),
            (
                CertificateError::ExpiredContext {
                    time: at,
                    not_after: at,
                },
                &file,
                "expired at 2020-01-02T00:00:00Z by this host's clock",
            ),
            (
                CertificateError::NotValidYetContext {
                    time: at,
                    not_before: at,
                },
                &file,
                "not valid before 2020-01-02T00:00:00Z",
            ),
            (
                CertificateError::InvalidPurpose,
                &file,
                "a certificate of the wrong kind",
            ),
            (
                webpki(webpki::Error::CaUsedAsEndEntity),
                &file,
                "a CA's, CA:TRUE",
            ),
            (
                webpki(webpki::Error::EndEntityUsedAsCa),
                &file,
                "a server's, CA:FALSE",
            ),
            (
                webpki(webpki::Error::PathLenConstraintViolated),
                &file,
                "(PathLenConstraintViolated)",
            ),
        ];
        for (error, trust, words) in cases {
            let said = said(&error, trust);
            assert!(said.contains(words), "{error:?}: {said}");
            assert!(!said.contains("Other"), "{error:?}: {said}");
            assert!(!said.contains('\n'), "{error:?}: {said}");
        }
    }
}
