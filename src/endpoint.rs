//! Where the lock lives: Redis URLs parsed into connection details (with the TLS files and the
//! password given apart from the URL), and printed without secrets.

use std::fmt;

use redis::{ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsCertificates};

/// TLS settings given apart from the URL, applied to every `rediss://` endpoint: PEM contents,
/// read once at start-up.
#[derive(Clone, Default)]
pub struct Tls {
    /// CA certificates to trust instead of the system store (`--tls-ca-cert`).
    pub ca_cert: Option<Vec<u8>>,
    /// Client certificate chain and private key, for mutual TLS (`--tls-cert`, `--tls-key`).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// Do not verify the server's certificate at all (`--tls-insecure`, for testing only).
    pub insecure: bool,
}

impl Tls {
    fn is_set(&self) -> bool {
        self.ca_cert.is_some() || self.client.is_some() || self.insecure
    }
}

/// Where the lock lives: parsed connection details plus a printable form without secrets.
#[derive(Clone)]
pub struct Endpoint {
    pub(crate) info: ConnectionInfo,
    shown: String,
}

impl Endpoint {
    /// Parse a `redis://`, `rediss://`, `unix://` or `redis+unix://` URL. Errors never show a password.
    pub fn parse(url: &str) -> Result<Self, String> {
        let url = url.trim();
        let shown = redact(url);
        let scheme = url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(
            scheme.as_deref(),
            Some("redis" | "rediss" | "unix" | "redis+unix")
        ) {
            return Err(format!(
                "'{shown}' is not a Redis URL (use redis://, rediss://, unix:// or redis+unix://)"
            ));
        }
        let info = url.into_connection_info().map_err(|e| {
            let reason = e.to_string().replace(" - InvalidClientConfig", "");
            let reason = match reason.as_str() {
                "Redis URL did not parse" => "malformed host, port or path".to_owned(),
                other => other.to_lowercase(),
            };
            format!("invalid Redis URL '{shown}': {reason}")
        })?;
        if !info.addr().is_supported() {
            return Err(format!(
                "'{}': this build of redlock has no TLS support",
                redact(url)
            ));
        }
        // CLIENT SETINFO costs a round trip per connection and tells the lock nothing.
        let redis = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(redis);
        let shown = info.addr().to_string();
        Ok(Self { info, shown })
    }

    /// Authenticate with `password` instead of any password in the URL (the URL's user name,
    /// if any, stays).
    pub fn with_password(mut self, password: &str) -> Self {
        let redis = self.info.redis_settings().clone().set_password(password);
        self.info = self.info.set_redis_settings(redis);
        self
    }

    /// Apply `tls`; an error (never showing a key) when it is set but the URL is not `rediss://`.
    pub fn with_tls(mut self, tls: &Tls) -> Result<Self, String> {
        if matches!(
            self.info.addr(),
            ConnectionAddr::TcpTls { insecure: true, .. }
        ) {
            // The redis crate's `#insecure` fragment would turn verification off unannounced.
            return Err(format!(
                "'{}#insecure': turning off certificate checks takes --tls-insecure (testing only)",
                self.shown
            ));
        }
        if !tls.is_set() {
            return Ok(self);
        }
        let ConnectionAddr::TcpTls { host, port, .. } = self.info.addr().clone() else {
            return Err(format!(
                "the --tls-* options need a rediss:// URL; '{}' does not use TLS",
                self.shown
            ));
        };
        if tls.insecure {
            let addr = ConnectionAddr::TcpTls {
                host,
                port,
                insecure: true,
                tls_params: None,
            };
            self.info = self.info.set_addr(addr);
        }
        if tls.ca_cert.is_some() || tls.client.is_some() {
            let certificates = TlsCertificates {
                client_tls: tls.client.as_ref().map(|(cert, key)| ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
                root_cert: tls.ca_cert.clone(),
            };
            let client = redis::Client::build_with_tls(self.info.clone(), certificates)
                .map_err(|e| format!("cannot use the TLS certificates or key: {e}"))?;
            self.info = client.get_connection_info().clone();
        }
        Ok(self)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({})", self.shown)
    }
}

/// `url` with any password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..scheme_end]);
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&format!("{}:***{}", &userinfo[..colon], &authority[at..]))
                }
                None => out.push_str(&format!("***{}", &authority[at..])),
            }
        }
        None => out.push_str(authority),
    }
    // Query parameters such as ?pass= (unix sockets) carry secrets too.
    match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _))
                        if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
                    {
                        format!("{k}=***")
                    }
                    _ => kv.to_owned(),
                })
                .collect();
            out.push_str(&format!("{path}?{}", params.join("&")));
        }
        None => out.push_str(tail),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("redis://:hunter2@host:6379/0"),
            "redis://:***@host:6379/0"
        );
        assert_eq!(
            redact("redis://alice:hunter2@host"),
            "redis://alice:***@host"
        );
        assert_eq!(redact("redis://hunter2@host"), "redis://***@host");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock?db=1&pass=hunter2"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn tls_options_need_a_tls_url() {
        let insecure = Tls {
            insecure: true,
            ..Tls::default()
        };
        let err = Endpoint::parse("redis://127.0.0.1:7000")
            .unwrap()
            .with_tls(&insecure)
            .unwrap_err();
        assert!(err.contains("rediss://"), "{err}");
        let e = Endpoint::parse("rediss://127.0.0.1:7000")
            .unwrap()
            .with_tls(&insecure)
            .unwrap();
        assert!(matches!(
            e.info.addr(),
            ConnectionAddr::TcpTls { insecure: true, .. }
        ));
        let err = Endpoint::parse("rediss://127.0.0.1:7000/#insecure")
            .unwrap()
            .with_tls(&Tls::default())
            .unwrap_err();
        assert!(err.contains("--tls-insecure"), "{err}");
        // Nothing set: any URL is fine and unchanged.
        let plain = Endpoint::parse("redis://127.0.0.1:7000").unwrap();
        assert!(plain.with_tls(&Tls::default()).is_ok());
    }

    #[test]
    fn a_password_given_apart_replaces_the_urls() {
        let e = Endpoint::parse("redis://alice:old@127.0.0.1:7000")
            .unwrap()
            .with_password("new");
        assert_eq!(e.info.redis_settings().password(), Some("new"));
        assert_eq!(e.info.redis_settings().username(), Some("alice"));
        assert!(!format!("{e} {e:?}").contains("new"));
    }

    #[test]
    fn endpoints_hide_secrets() {
        let e = Endpoint::parse("redis://alice:hunter2@127.0.0.1:7000/2").unwrap();
        assert_eq!(e.to_string(), "127.0.0.1:7000");
        assert!(!format!("{e:?}").contains("hunter2"));
        let err = Endpoint::parse("redis://alice:hunter2@127.0.0.1:99999").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(Endpoint::parse("http://127.0.0.1").is_err());
        assert!(Endpoint::parse("").is_err());
        assert!(Endpoint::parse("unix:///tmp/redis.sock").is_ok());
    }
}
