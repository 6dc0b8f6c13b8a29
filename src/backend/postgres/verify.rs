//! The server's certificate checked as libpq checks it with OpenSSL, for `verify-ca` (and
//! `require` with a root certificate) and `verify-full`.
//!
//! The chain is rustls's (webpki), with one addition OpenSSL makes: a self-signed certificate
//! that is itself among the root certificates is trusted as it is, whatever its basic
//! constraints say (`openssl req -x509` marks it `CA:TRUE`, which webpki refuses in a server's
//! certificate). Its validity period is checked here; the handshake's signature by its key is
//! checked by rustls, as for any certificate.
//!
//! The host name is libpq's rule, not webpki's: the subject alternative names (`dNSName`, with
//! a `*.` wildcard for one label, and `iPAddress`) are compared with the host as the URL names
//! it; the Common Name only when the certificate has no alternative name of the host's kind
//! (a `dNSName` for a name, an `iPAddress` for an address).
//!
//! Reading the certificate's validity, names and extended key usage takes an X.509 parser that
//! webpki does not expose: x509-cert's (RustCrypto), which tokio-postgres-rustls builds already.

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, DigitallySignedStruct, ExtendedKeyPurpose, OtherError, SignatureScheme,
};
use x509_cert::Certificate;
use x509_cert::der::Decode;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{ExtendedKeyUsage, SubjectAltName};

/// The Common Name's attribute type (2.5.4.3).
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
/// The extended key usage of a TLS server (id-kp-serverAuth).
const SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");

/// The verifier of `verify-ca` (`full` false) and `verify-full`.
#[derive(Debug)]
pub(super) struct Libpq {
    /// rustls's own verifier over the root certificates.
    pub chain: Arc<WebPkiServerVerifier>,
    /// The root certificates as they were given: a self-signed server certificate among them is
    /// recognised by an exact match.
    pub roots: Vec<CertificateDer<'static>>,
    /// `verify-full`: the host name is checked too.
    pub full: bool,
}

/// A self-signed server certificate that is not among the root certificates: no root can have
/// signed it (said as such, not as webpki's "a CA's certificate used as a server's").
#[derive(Debug)]
pub(super) struct SelfSignedNotGiven;

impl std::fmt::Display for SelfSignedNotGiven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a self-signed certificate that is not among the root certificates")
    }
}

impl std::error::Error for SelfSignedNotGiven {}

impl ServerCertVerifier for Libpq {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // Read only where webpki cannot answer: a parser stricter than webpki's stays out of
        // the way of verify-ca's ordinary chains.
        let read =
            || Certificate::from_der(end_entity).map_err(|_| bad(CertificateError::BadEncoding));
        let given = self
            .roots
            .iter()
            .any(|root| root.as_ref() == end_entity.as_ref());
        let mut cert = None;
        if given && self_signed(cert.insert(read()?)) {
            let cert = cert.as_ref().expect("read above");
            in_validity(cert, now)?;
            for_a_server(cert)?;
        } else {
            match self.chain.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Ok(_) => {}
                // webpki checks the name after the chain: the chain is good. The name is
                // libpq's to check, below.
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => {}
                Err(err) if ca_as_server(&err) && self_signed(cert.insert(read()?)) => {
                    return Err(bad(CertificateError::Other(OtherError(Arc::new(
                        SelfSignedNotGiven,
                    )))));
                }
                Err(err) => return Err(err),
            }
            anchored_in_validity(&self.roots, end_entity, intermediates, now)?;
        }
        if self.full {
            let cert = match cert {
                Some(cert) => cert,
                None => read()?,
            };
            names_the_host(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

/// `verify-full`'s check: `cert` names the host, by libpq's rule.
fn names_the_host(cert: &Certificate, server_name: &ServerName<'_>) -> Result<(), rustls::Error> {
    let host = match server_name {
        ServerName::DnsName(name) => name.as_ref().to_owned(),
        ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
        _ => String::new(),
    };
    let names = names_of(cert)?;
    if names_host(&names, &host) {
        return Ok(());
    }
    // The names compared, each once (a Common Name often repeats one).
    let common = common_counts(&names, &host);
    let mut presented: Vec<String> = Vec::new();
    for name in &names {
        let shown = name.shown();
        if (common || !matches!(name, Name::Common(_))) && !presented.contains(&shown) {
            presented.push(shown);
        }
    }
    Err(bad(CertificateError::NotValidForNameContext {
        expected: server_name.to_owned(),
        presented,
    }))
}

fn bad(error: CertificateError) -> rustls::Error {
    rustls::Error::InvalidCertificate(error)
}

/// Whether webpki refused a certificate with `CA:TRUE` as a server's.
fn ca_as_server(err: &rustls::Error) -> bool {
    matches!(
        err,
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(e)))
            if matches!(e.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity))
    )
}

/// Issued by itself (OpenSSL's test for a chain's last link; its own signature is not checked,
/// as OpenSSL does not check a trusted certificate's).
fn self_signed(cert: &Certificate) -> bool {
    cert.tbs_certificate.subject == cert.tbs_certificate.issuer
}

/// `now` within the certificate's validity period.
fn in_validity(cert: &Certificate, now: UnixTime) -> Result<(), rustls::Error> {
    let validity = &cert.tbs_certificate.validity;
    let not_before = UnixTime::since_unix_epoch(validity.not_before.to_unix_duration());
    let not_after = UnixTime::since_unix_epoch(validity.not_after.to_unix_duration());
    if now < not_before {
        return Err(bad(CertificateError::NotValidYetContext {
            time: now,
            not_before,
        }));
    }
    if now > not_after {
        return Err(bad(CertificateError::ExpiredContext {
            time: now,
            not_after,
        }));
    }
    Ok(())
}

/// The given root that can have signed the chain's top, in its validity period, as OpenSSL
/// checks a trusted certificate's: webpki takes a root as a trust anchor, with no dates of its
/// own. A chain whose every possible anchor (a given root whose subject is the issuer of the
/// server's certificate or of one it sent) expired, or is not valid yet, is refused as expired.
/// Roots from the system's store are not given here, and so not checked.
fn anchored_in_validity(
    roots: &[CertificateDer<'_>],
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let issuers: Vec<_> = std::iter::once(end_entity)
        .chain(intermediates)
        .filter_map(|der| Certificate::from_der(der).ok())
        .map(|cert| cert.tbs_certificate.issuer)
        .collect();
    let anchors: Vec<Certificate> = roots
        .iter()
        .filter_map(|der| Certificate::from_der(der).ok())
        .filter(|root| issuers.contains(&root.tbs_certificate.subject))
        .collect();
    match anchors
        .iter()
        .map(|root| in_validity(root, now))
        .collect::<Vec<_>>()
    {
        checked if checked.iter().any(Result::is_ok) || checked.is_empty() => Ok(()),
        mut checked => checked.swap_remove(0),
    }
}

/// A certificate without an extended key usage, or with the TLS server's, as OpenSSL asks of
/// a server's.
fn for_a_server(cert: &Certificate) -> Result<(), rustls::Error> {
    let usage = cert
        .tbs_certificate
        .get::<ExtendedKeyUsage>()
        .map_err(|_| bad(CertificateError::BadEncoding))?;
    match usage {
        Some((_, ExtendedKeyUsage(purposes))) if !purposes.contains(&SERVER_AUTH) => {
            Err(bad(CertificateError::InvalidPurposeContext {
                required: ExtendedKeyPurpose::ServerAuth,
                presented: purposes
                    .iter()
                    .map(|oid| ExtendedKeyPurpose::Other(oid.arcs().map(|a| a as usize).collect()))
                    .collect(),
            }))
        }
        _ => Ok(()),
    }
}

/// A name a certificate gives its server, in the certificate's order: the alternative names,
/// then the Common Name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    /// A `dNSName`, as its bytes.
    Dns(Vec<u8>),
    /// An `iPAddress`: 4 or 16 bytes (any other length is refused, as libpq does).
    Ip(Vec<u8>),
    /// The subject's first Common Name, as its bytes.
    Common(Vec<u8>),
}

impl Name {
    /// As a message shows it.
    fn shown(&self) -> String {
        match self {
            Name::Dns(name) | Name::Common(name) => {
                crate::report::one_line(&String::from_utf8_lossy(name))
            }
            Name::Ip(bytes) => match <[u8; 4]>::try_from(bytes.as_slice()) {
                Ok(v4) => IpAddr::from(v4).to_string(),
                Err(_) => match <[u8; 16]>::try_from(bytes.as_slice()) {
                    Ok(v6) => IpAddr::from(v6).to_string(),
                    Err(_) => format!("an address of {} bytes", bytes.len()),
                },
            },
        }
    }
}

/// The names of `cert`: its alternative names of kind DNS or IP, and its first Common Name.
fn names_of(cert: &Certificate) -> Result<Vec<Name>, rustls::Error> {
    let tbs = &cert.tbs_certificate;
    let alternative = tbs
        .get::<SubjectAltName>()
        .map_err(|_| bad(CertificateError::BadEncoding))?;
    let mut names: Vec<Name> = alternative
        .map(|(_, SubjectAltName(names))| names)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| match name {
            GeneralName::DnsName(dns) => Some(Name::Dns(dns.as_bytes().to_vec())),
            GeneralName::IpAddress(ip) => Some(Name::Ip(ip.as_bytes().to_vec())),
            _ => None,
        })
        .collect();
    let common = tbs
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find(|attribute| attribute.oid == COMMON_NAME);
    if let Some(common) = common {
        names.push(Name::Common(common.value.value().to_vec()));
    }
    Ok(names)
}

/// libpq's rule (`pgtls_verify_peer_name_matches_certificate_guts`): the alternative names in
/// order, the first match or error deciding; the Common Name only when there is no alternative
/// name of the host's kind. A name with a NUL in it, or an address of the wrong length, is an
/// error: no match.
fn names_host(names: &[Name], host: &str) -> bool {
    let ip: Option<IpAddr> = host.parse().ok();
    let common_counts = common_counts(names, host);
    for name in names {
        let verdict = match name {
            Name::Dns(pattern) => name_matches(pattern, host),
            Name::Ip(bytes) => address_matches(bytes, ip),
            Name::Common(pattern) if common_counts => name_matches(pattern, host),
            Name::Common(_) => Some(false),
        };
        match verdict {
            Some(false) => continue,
            Some(true) => return true,
            None => return false,
        }
    }
    false
}

/// Whether the Common Name is compared with `host`: when no alternative name is of the host's
/// kind (an address, or a name).
fn common_counts(names: &[Name], host: &str) -> bool {
    let ip = host.parse::<IpAddr>().is_ok();
    !names.iter().any(|name| match name {
        Name::Dns(_) => !ip,
        Name::Ip(_) => ip,
        Name::Common(_) => false,
    })
}

/// Whether a certificate's name is `host`: equal but for ASCII case, or a `*.` wildcard for
/// the host's first label (libpq's `wildcard_certificate_match`); None (an error) for a name
/// with a NUL in it.
fn name_matches(pattern: &[u8], host: &str) -> Option<bool> {
    if pattern.contains(&0) {
        return None;
    }
    let host = host.as_bytes();
    if pattern.eq_ignore_ascii_case(host) {
        return Some(true);
    }
    let Some(suffix) = pattern.strip_prefix(b"*") else {
        return Some(false);
    };
    // `*.` and at least one more character; the wildcard stands for one or more characters
    // of the first label.
    if pattern.len() < 3 || !suffix.starts_with(b".") || pattern.len() > host.len() {
        return Some(false);
    }
    let (label, rest) = host.split_at(host.len() - suffix.len());
    Some(rest.eq_ignore_ascii_case(suffix) && !label.contains(&b'.'))
}

/// Whether an `iPAddress` is the host's address; None (an error) for one neither 4 nor 16
/// bytes long.
fn address_matches(bytes: &[u8], host: Option<IpAddr>) -> Option<bool> {
    match (bytes.len(), host) {
        (4, Some(IpAddr::V4(v4))) => Some(v4.octets() == bytes),
        (16, Some(IpAddr::V6(v6))) => Some(v6.octets() == bytes),
        (4 | 16, _) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dns(name: &str) -> Name {
        Name::Dns(name.as_bytes().to_vec())
    }

    fn cn(name: &str) -> Name {
        Name::Common(name.as_bytes().to_vec())
    }

    fn ip(addr: &str) -> Name {
        match addr.parse::<IpAddr>().unwrap() {
            IpAddr::V4(v4) => Name::Ip(v4.octets().to_vec()),
            IpAddr::V6(v6) => Name::Ip(v6.octets().to_vec()),
        }
    }

    #[test]
    fn names_match_as_libpq_matches_them() {
        let cases: &[(&str, &[Name], bool)] = &[
            ("db.example", &[dns("DB.Example")], true),
            ("db.example", &[dns("other"), dns("db.example")], true),
            ("a.db.example", &[dns("*.db.example")], true),
            // One label only, and at least one character of it.
            ("a.b.db.example", &[dns("*.db.example")], false),
            ("db.example", &[dns("*.db.example")], false),
            (".db.example", &[dns("*.db.example")], false),
            ("db.example", &[dns("*")], false),
            ("db.example", &[dns("d*.example")], false),
            // The Common Name only without an alternative name of the host's kind.
            ("db.example", &[cn("db.example")], true),
            ("db.example", &[dns("other"), cn("db.example")], false),
            ("db.example", &[ip("10.0.0.1"), cn("db.example")], true),
            ("127.0.0.1", &[cn("127.0.0.1")], true),
            ("127.0.0.1", &[dns("localhost"), cn("127.0.0.1")], true),
            ("127.0.0.1", &[ip("10.0.0.1"), cn("127.0.0.1")], false),
            ("127.0.0.1", &[ip("127.0.0.1")], true),
            ("::1", &[ip("::1")], true),
            ("::1", &[ip("127.0.0.1")], false),
            // A dNSName is compared with an address as text.
            ("127.0.0.1", &[dns("127.0.0.1")], true),
            // An error stops the search, before a name that would match.
            ("db.example", &[dns("db\0.x"), dns("db.example")], false),
            (
                "127.0.0.1",
                &[Name::Ip(vec![127, 0, 0]), ip("127.0.0.1")],
                false,
            ),
            ("db.example", &[], false),
        ];
        for (host, names, expected) in cases {
            assert_eq!(names_host(names, host), *expected, "{host} in {names:?}");
        }
    }

    #[test]
    fn names_are_shown_as_written() {
        assert_eq!(dns("db.example").shown(), "db.example");
        assert_eq!(ip("127.0.0.1").shown(), "127.0.0.1");
        assert_eq!(ip("::1").shown(), "::1");
        assert_eq!(Name::Ip(vec![1, 2]).shown(), "an address of 2 bytes");
        assert_eq!(cn("a\nb").shown(), crate::report::one_line("a\nb"));
    }
}
