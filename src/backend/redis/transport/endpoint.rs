//! Where the lock lives: Redis URLs parsed into connection details (one server, a Sentinel
//! service or a Cluster; with the TLS files and the password given apart from the URL), and
//! printed without secrets.

use std::fmt;
use std::sync::Arc;

pub use crate::backend::redis::transport::redact::redact;
use crate::backend::redis::transport::tls::TlsClient;
use crate::backend::redis::transport::url::check_parameters;
use crate::backend::url::{self, no_scheme, percent_decode};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

pub use crate::backend::Tls;

/// The default port of a sentinel, when a `redis+sentinel://` host gives none.
const SENTINEL_PORT: u16 = 26379;
/// The default port of a Redis node, when a `redis+cluster://` host gives none.
const REDIS_PORT: u16 = 6379;

/// How the server that holds a lock is found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The one server the URL names.
    Direct,
    /// The master the sentinels name for `service` (SENTINEL GET-MASTER-ADDR-BY-NAME).
    Sentinel {
        sentinels: Vec<(String, u16)>,
        service: String,
        /// Credentials of the sentinels themselves (username, password), when they need any.
        auth: Option<(Option<String>, String)>,
    },
    /// Whichever of the nodes owns the lock's hash slot; the seeds are where to start asking.
    Cluster { seeds: Vec<(String, u16)> },
}

/// Where the lock lives: parsed connection details plus a printable form without secrets.
///
/// For Sentinel and Cluster, `info` is a template: the credentials, database and TLS settings
/// every data node is reached with; `Endpoint::node` puts a node's address into it.
#[derive(Clone)]
pub struct Endpoint {
    pub(crate) info: ConnectionInfo,
    pub(crate) target: Target,
    shown: String,
    /// How its TLS connections are made (`rediss://` only).
    tls: Option<TlsClient>,
}

impl Endpoint {
    /// Parse a `redis://`, `rediss://`, `unix://`, `redis+unix://`, `redis[s]+sentinel://` or
    /// `redis[s]+cluster://` URL. Errors never show a password.
    pub fn parse(url: &str) -> Result<Self, String> {
        let url = url.trim();
        let shown = redact(url);
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(no_scheme(url));
        };
        let scheme = Some(scheme.to_ascii_lowercase());
        match scheme.as_deref() {
            // The crate refuses user info on a socket URL; say where its password goes.
            Some("unix" | "redis+unix") if !rest.starts_with('/') && rest.contains('@') => {
                return Err(format!(
                    "invalid Redis URL '{shown}': a unix socket URL takes no user name or \
                     password before its path; give the password as ?pass=PASSWORD, or in \
                     REDLOCK_PASSWORD or --password-file"
                ));
            }
            Some("redis" | "rediss" | "unix" | "redis+unix") => {
                if let Some(query) = url::parts(url).and_then(|parts| parts.query) {
                    check_parameters(scheme.as_deref().unwrap_or(""), query)
                        .map_err(|why| format!("invalid Redis URL '{shown}': {why}"))?;
                }
            }
            Some(
                s @ ("redis+sentinel" | "rediss+sentinel" | "redis+cluster" | "rediss+cluster"),
            ) => {
                return Self::parse_multi(url, s, &shown);
            }
            _ => {
                return Err(format!(
                    "'{shown}' is not a URL redlock takes (use {})",
                    url::listed()
                ));
            }
        }
        let info = connection_info(url, &shown)?;
        let shown = info.addr().to_string();
        Ok(Self::tls_default(Self {
            info,
            target: Target::Direct,
            shown,
            tls: None,
        }))
    }

    /// A `rediss://` endpoint verifies servers against the system's trust store until
    /// [`Endpoint::with_tls`] says otherwise.
    fn tls_default(mut self) -> Self {
        if matches!(self.info.addr(), ConnectionAddr::TcpTls { .. }) {
            self.tls = Some(TlsClient::new(Tls::default()));
        }
        self
    }

    /// Whether its connections use TLS (`rediss://`).
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The TLS client configuration of this endpoint's connections (None without TLS); an
    /// error when the trust store cannot be read.
    pub(crate) fn tls_config(&self) -> Result<Option<Arc<rustls::ClientConfig>>, String> {
        self.tls.as_ref().map(TlsClient::config).transpose()
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
        let client = TlsClient::new(tls.clone());
        if tls.ca_cert.is_some() || tls.client.is_some() {
            // Bad certificates or keys are a usage error, found before anything runs.
            client
                .config()
                .map_err(|e| format!("cannot use the TLS certificates or key: {e}"))?;
        }
        self.tls = Some(client);
        Ok(self)
    }

    /// `redis[s]+sentinel://[user:pass@]host[:port][,host[:port]...]/SERVICE[?db=N&sentinel_username=U&sentinel_password=P]`
    /// or `redis[s]+cluster://[user:pass@]host[:port][,host[:port]...]`.
    fn parse_multi(url: &str, scheme: &str, shown: &str) -> Result<Self, String> {
        let (base, kind) = scheme.split_once('+').expect("scheme has a +");
        let sentinel = kind == "sentinel";
        let rest = &url[scheme.len() + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        let default_port = if sentinel { SENTINEL_PORT } else { REDIS_PORT };
        // An '@' after the first '/' or '?': a user name or password holding one of them
        // unescaped, so what looks like the host list is part of it, and never said.
        let cut_userinfo = userinfo.is_none() && tail.contains('@');
        let mut nodes = Vec::new();
        for host in hosts.split(',') {
            nodes.push(
                host_port(host, default_port).map_err(|why| match cut_userinfo {
                    true => format!(
                        "invalid Redis URL '{shown}': the host list ends at a '/' or '?' before an \
                     '@': a user name or password that holds '/', '?' or '#' must be \
                     percent-escaped (%2F, %3F, %23)"
                    ),
                    false => format!("invalid Redis URL '{shown}': {why}"),
                })?,
            );
        }
        let bad = |why: String| format!("invalid Redis URL '{shown}': {why}");
        check_parameters(scheme, query).map_err(bad)?;
        let (target, db) = if sentinel {
            sentinel_target(path, query, &nodes).map_err(bad)?
        } else {
            if !path.is_empty() && path != "/" {
                return Err(bad(
                    "a Cluster has no databases: give no path after the hosts".into(),
                ));
            }
            let seeds = nodes.clone();
            (Target::Cluster { seeds }, None)
        };
        // The credentials and TLS settings of the data nodes, parsed as the crate parses any URL.
        let (host, port) = &nodes[0];
        let template = match userinfo {
            Some(u) => format!("{base}://{u}@{}:{port}/{}", bracket(host), db.unwrap_or(0)),
            None => format!("{base}://{}:{port}/{}", bracket(host), db.unwrap_or(0)),
        };
        let info = connection_info(&template, shown)?;
        let list = |nodes: &[(String, u16)]| {
            nodes
                .iter()
                .map(|(h, p)| format!("{}:{p}", bracket(h)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let shown = match &target {
            Target::Sentinel {
                sentinels, service, ..
            } => format!("'{service}' via sentinels {}", list(sentinels)),
            Target::Cluster { seeds } => format!("cluster {}", list(seeds)),
            Target::Direct => unreachable!(),
        };
        Ok(Self::tls_default(Self {
            info,
            target,
            shown,
            tls: None,
        }))
    }

    /// The connection details of the data node at `host:port`: this endpoint's credentials,
    /// database and TLS settings, with that address.
    pub(crate) fn node(&self, host: &str, port: u16) -> ConnectionInfo {
        let addr = match self.info.addr().clone() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure,
                tls_params,
            },
            _ => ConnectionAddr::Tcp(host.to_owned(), port),
        };
        self.info.clone().set_addr(addr)
    }

    /// This endpoint's data node at `host:port` alone, as a direct endpoint.
    pub(crate) fn pinned(&self, host: &str, port: u16) -> Endpoint {
        let info = self.node(host, port);
        let shown = info.addr().to_string();
        Endpoint {
            info,
            target: Target::Direct,
            shown,
            tls: self.tls.clone(),
        }
    }

    /// The connection details of the sentinel at `host:port`: TLS as the data nodes, the
    /// sentinels' own credentials, no database.
    pub(crate) fn sentinel(&self, host: &str, port: u16) -> ConnectionInfo {
        let mut redis = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Target::Sentinel {
            auth: Some((user, pass)),
            ..
        } = &self.target
        {
            redis = redis.set_password(pass);
            if let Some(user) = user {
                redis = redis.set_username(user);
            }
        }
        self.node(host, port).set_redis_settings(redis)
    }
}

/// A Sentinel URL's target, from its path (the service) and its query (checked already), and
/// the database its data nodes use; an error says why, without the URL.
fn sentinel_target(
    path: &str,
    query: &str,
    sentinels: &[(String, u16)],
) -> Result<(Target, Option<i64>), String> {
    let mut db = None;
    let mut sentinel_user = None;
    let mut sentinel_pass = None;
    for (k, v) in url::pairs(query) {
        let v = percent_decode(v).map_err(|_| format!("bad percent-encoding in '{k}'"))?;
        match k.to_ascii_lowercase().as_str() {
            "db" => {
                db = Some(
                    v.parse::<i64>()
                        .map_err(|_| format!("db '{v}' is not a number"))?,
                )
            }
            "sentinel_username" => sentinel_user = Some(v),
            _ => sentinel_pass = Some(v),
        }
    }
    let service = path.trim_start_matches('/');
    if service.is_empty() || service.contains('/') {
        return Err(
            "name the sentinels' service after the hosts: redis+sentinel://host:26379/SERVICE"
                .into(),
        );
    }
    let service = percent_decode(service)
        .map_err(|_| "bad percent-encoding in the service name".to_owned())?;
    // A majority of the URL's sentinels decides where the lock lives: one named twice would
    // count twice. (One named under two names is told by its ID when asked: `confirm`.)
    if let Some((host, port)) = sentinels
        .iter()
        .enumerate()
        .find_map(|(i, s)| sentinels[..i].contains(s).then_some(s))
    {
        return Err(format!(
            "sentinel {host}:{port} is given twice: a majority of the sentinels in the URL \
             decides, so name each once"
        ));
    }
    let auth = match (sentinel_user, sentinel_pass) {
        (user, Some(pass)) => Some((user, pass)),
        (Some(_), None) => return Err("sentinel_username needs sentinel_password".into()),
        (None, None) => None,
    };
    let target = Target::Sentinel {
        sentinels: sentinels.to_vec(),
        service,
        auth,
    };
    Ok((target, db))
}

/// The crate's connection details for a plain URL; errors without secrets.
fn connection_info(url: &str, shown: &str) -> Result<ConnectionInfo, String> {
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
            "'{shown}': this build of redlock has no TLS support"
        ));
    }
    // A database is numbered from 0: a negative one would go to the server to be refused.
    if info.redis_settings().db() < 0 {
        return Err(format!(
            "invalid Redis URL '{shown}': a database number is 0 or more"
        ));
    }
    // CLIENT SETINFO costs a round trip per connection and tells the lock nothing.
    let redis = info.redis_settings().clone().set_skip_set_lib_name();
    Ok(info.set_redis_settings(redis))
}

/// `host[:port]` (IPv6 in brackets) with `default` for a missing port.
fn host_port(text: &str, default: u16) -> Result<(String, u16), String> {
    if text.is_empty() {
        return Err("empty host in the host list".into());
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("'{text}': unclosed '['"))?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err(format!("'{text}' is not host:port")),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(format!("'{text}' is not host:port"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("'{text}': bad port"))?,
        None => default,
    };
    Ok((host.to_owned(), port))
}

/// An IPv6 address in brackets, as URLs and messages write it.
fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // A password with an unescaped '/' or '?' on a Sentinel or Cluster URL: no part of it.
        for url in [
            "redis+sentinel://u:SECRET?PW@127.0.0.1:26379/m",
            "redis+sentinel://u:SECRET/PW@127.0.0.1:26379/m",
            "redis+cluster://u:SECRET/PW@127.0.0.1:7000",
            "redis+cluster://u:SECRET?PW@127.0.0.1:7000",
        ] {
            let err = Endpoint::parse(url).unwrap_err();
            assert!(!err.contains("SECRET") && !err.contains("PW"), "{err}");
            assert!(err.contains("percent-escaped"), "{err}");
        }
    }

    #[test]
    fn a_url_without_a_scheme_says_so() {
        let err = Endpoint::parse("127.0.0.1:6379").unwrap_err();
        assert!(err.contains("use redis://127.0.0.1:6379"), "{err}");
        let err = Endpoint::parse(":hunter2@127.0.0.1:6379").unwrap_err();
        assert!(
            err.contains("no scheme") && !err.contains("hunter2"),
            "{err}"
        );
        let err = Endpoint::parse("unix://:hunter2@/tmp/r.sock").unwrap_err();
        assert!(err.contains("?pass=") && !err.contains("hunter2"), "{err}");
    }

    #[test]
    fn sentinel_urls() {
        let e = Endpoint::parse(
            "redis+sentinel://alice:m%40ster@10.0.0.1,10.0.0.2:5000,[::1]:26380/my%20master?db=3&sentinel_password=s3cret",
        )
        .unwrap();
        let Target::Sentinel {
            sentinels,
            service,
            auth,
        } = &e.target
        else {
            panic!("{:?}", e.target)
        };
        assert_eq!(
            sentinels,
            &[
                ("10.0.0.1".to_owned(), 26379),
                ("10.0.0.2".to_owned(), 5000),
                ("::1".to_owned(), 26380)
            ]
        );
        assert_eq!(service, "my master");
        assert_eq!(auth, &Some((None, "s3cret".to_owned())));
        // The userinfo is the master's; the sentinels get their own credentials and no db.
        let master = e.node("10.0.0.9", 6380);
        assert_eq!(master.addr().to_string(), "10.0.0.9:6380");
        assert_eq!(master.redis_settings().username(), Some("alice"));
        assert_eq!(master.redis_settings().password(), Some("m@ster"));
        assert_eq!(master.redis_settings().db(), 3);
        let sentinel = e.sentinel("10.0.0.1", 26379);
        assert_eq!(sentinel.redis_settings().password(), Some("s3cret"));
        assert_eq!(sentinel.redis_settings().username(), None);
        assert_eq!(sentinel.redis_settings().db(), 0);
        let shown = format!("{e} {e:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("m@ster"),
            "{shown}"
        );
        assert!(redact("redis+sentinel://:pw@h/m?sentinel_password=s3cret").ends_with("=***"));
        // TLS applies to both.
        let tls = Endpoint::parse("rediss+sentinel://h1/m").unwrap();
        assert!(matches!(
            tls.node("h2", 1).addr(),
            ConnectionAddr::TcpTls { .. }
        ));
        assert!(matches!(
            tls.sentinel("h1", 2).addr(),
            ConnectionAddr::TcpTls { .. }
        ));
    }

    #[test]
    fn cluster_urls() {
        let e = Endpoint::parse("redis+cluster://:pw@127.0.0.1:7000,127.0.0.1").unwrap();
        assert_eq!(
            e.target,
            Target::Cluster {
                seeds: vec![("127.0.0.1".into(), 7000), ("127.0.0.1".into(), 6379)]
            }
        );
        assert_eq!(e.node("h", 1).redis_settings().password(), Some("pw"));
        assert_eq!(e.to_string(), "cluster 127.0.0.1:7000,127.0.0.1:6379");
    }

    #[test]
    fn malformed_multi_host_urls() {
        for bad in [
            "redis+sentinel://h",
            "redis+sentinel://h/",
            "redis+sentinel://h/a/b",
            "redis+sentinel://h:x/m",
            "redis+sentinel://h:0/m",
            "redis+sentinel://h,,g/m",
            "redis+sentinel://[::1/m",
            "redis+sentinel://h/m?db=x",
            "redis+sentinel://h/m?sentinel_username=u",
            "redis+sentinel://h/m?what=1",
            "redis+cluster://",
            "redis+cluster://h/0",
            "redis+cluster://h?db=1",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
