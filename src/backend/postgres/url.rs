//! libpq's connection URI, read: `postgres[ql]://[USER[:PASSWORD]@][HOST][:PORT][,...][/DB]`
//! `[?NAME=VALUE&...]`, by libpq's rules for several hosts, their ports and socket directories,
//! with the query parameters redlock reads (libpq's, and its own `schema`). A parameter libpq
//! would take but redlock does not read is refused, never ignored; no message quotes a user part.

use std::collections::HashMap;
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::time::Duration;

/// libpq's default port.
pub(super) const DEFAULT_PORT: u16 = 5432;
/// libpq's socket directory when no host is given (Debian's build; upstream's is /tmp).
pub(super) const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// One server to try: a host name or IP address (IPv6 without brackets), or the directory of
/// its unix socket (`.s.PGSQL.PORT` in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Host {
    Tcp { host: String, port: u16 },
    Unix { dir: PathBuf, port: u16 },
}

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum SslMode {
    Disable,
    Allow,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

const SSLMODES: [(&str, SslMode); 6] = [
    ("disable", SslMode::Disable),
    ("allow", SslMode::Allow),
    ("prefer", SslMode::Prefer),
    ("require", SslMode::Require),
    ("verify-ca", SslMode::VerifyCa),
    ("verify-full", SslMode::VerifyFull),
];

/// A PostgreSQL URL, read. An empty value is None, as libpq treats it.
#[derive(Clone)]
pub(super) struct Parsed {
    /// `postgres` or `postgresql`, as given.
    pub scheme: &'static str,
    /// The servers to try in turn: at least one (libpq's default socket directory if none).
    pub hosts: Vec<Host>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub dbname: Option<String>,
    /// redlock's own `schema=NAME`: 1 to 63 bytes of `[A-Za-z_][A-Za-z0-9_]*`.
    pub schema: Option<String>,
    /// `prefer` unless given; `verify-full` with `sslrootcert=system`, as libpq.
    pub sslmode: SslMode,
    /// A file, or `system` for the system's roots (libpq 16's word).
    pub sslrootcert: Option<PathBuf>,
    /// Both or neither of `sslcert` and `sslkey`.
    pub sslcert: Option<PathBuf>,
    pub sslkey: Option<PathBuf>,
    /// None for `0` or absent, as libpq.
    pub connect_timeout: Option<Duration>,
    pub application_name: Option<String>,
}

impl Parsed {
    /// The URL for messages: the servers and the database, never the user or password.
    pub(super) fn shown(&self) -> String {
        let db = crate::report::one_line(self.dbname.as_deref().unwrap_or(""));
        let (mut tcp, mut names, mut ports) = (Vec::new(), Vec::new(), Vec::new());
        for host in &self.hosts {
            let (name, port) = match host {
                Host::Tcp { host, port } => (host.clone(), port),
                Host::Unix { dir, port } => (dir.to_string_lossy().into_owned(), port),
            };
            let name = crate::report::one_line(&name);
            match name.contains(':') {
                true => tcp.push(format!("[{name}]:{port}")),
                false => tcp.push(format!("{name}:{port}")),
            }
            names.push(name);
            ports.push(port.to_string());
        }
        if self.hosts.iter().all(|h| matches!(h, Host::Tcp { .. })) {
            let db = if db.is_empty() { db } else { format!("/{db}") };
            return format!("{}://{}{db}", self.scheme, tcp.join(","));
        }
        if ports.iter().all(|p| *p == ports[0]) {
            ports.truncate(1);
        }
        let mut shown = format!("{}:///{db}?host={}", self.scheme, names.join(","));
        if ports != [DEFAULT_PORT.to_string()] {
            shown += &format!("&port={}", ports.join(","));
        }
        shown
    }
}

/// libpq's URI form, read (the module's doc); an error is one line that names what is wrong.
pub(super) fn parse(url: &str) -> Result<Parsed, String> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("postgresql://") {
        ("postgresql", rest)
    } else if let Some(rest) = url.strip_prefix("postgres://") {
        ("postgres", rest)
    } else {
        return Err("not a PostgreSQL URL (use postgres:// or postgresql://)".into());
    };
    if url.contains(char::is_control) {
        let why = "a control character (a line break?): remove it, or percent-encode it";
        return Err(format!("the PostgreSQL URL has {why}"));
    }
    // Any '@' but the user part's may be a password's, cut short by a '/' or '?' in it: then
    // messages quote nothing the URL holds.
    let userinfo = rest
        .find(['@', '/'])
        .is_some_and(|at| rest[at..].starts_with('@'));
    // A password in the query may hold an '&' not encoded: what follows it may be a piece of
    // it, so messages quote nothing there either.
    let in_query = rest
        .split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(|p| p.starts_with("password=")));
    let quote = rest.matches('@').count() == usize::from(userinfo) && !in_query;
    Reader { scheme, quote }
        .read(rest)
        .map_err(|e| match quote {
            true => format!("invalid PostgreSQL URL: {e}"),
            false => format!("invalid PostgreSQL URL: {e} ({PASSWORD_HINT})"),
        })
}

const PASSWORD_HINT: &str =
    "if its password has '@', '/', '?' or '&' in it, write them %40, %2F, %3F, %26";

/// The query parameters redlock reads.
const PARAMETERS: &str = "host port dbname user password sslmode sslrootcert sslcert sslkey \
                          connect_timeout application_name schema";

struct Reader {
    scheme: &'static str,
    /// Whether messages may quote the URL's parts (never its user part).
    quote: bool,
}

impl Reader {
    /// ` 'piece'`, or nothing when messages may not quote the URL.
    fn q(&self, piece: &str) -> String {
        match self.quote {
            true => format!(" '{}'", crate::report::one_line(piece)),
            false => String::new(),
        }
    }

    /// The URL after its scheme, decoded into libpq's parameters (the last of each wins).
    fn read(&self, rest: &str) -> Result<Parsed, String> {
        let mut raw = HashMap::new();
        // libpq's rule: the user part ends at the first '@' before the first '/'.
        let rest = match rest.find(['@', '/']) {
            Some(at) if rest[at..].starts_with('@') => {
                let userinfo = &rest[..at];
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                raw.insert("user", decode(user, "user name")?);
                raw.insert("password", decode(password, "password")?);
                &rest[at + 1..]
            }
            _ => rest,
        };
        let (netloc, rest) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if netloc.contains('@') || path.contains('@') {
            return Err(
                "a '@' in the host or database part: write it %40 in a database name".into(),
            );
        }
        let (mut hosts, mut ports) = (Vec::new(), Vec::new());
        for entry in netloc.split(',') {
            let (host, port) = self.netloc_entry(entry)?;
            hosts.push(host);
            ports.push(port);
        }
        raw.insert("host", hosts.join(","));
        raw.insert("port", ports.join(","));
        if let Some(db) = path.strip_prefix('/') {
            raw.insert("dbname", decode(db, "database name")?);
        }
        // libpq takes one '&' at the end, no empty parameter elsewhere.
        let query = match query.strip_suffix('&') {
            Some(rest) if !rest.is_empty() => rest,
            _ => query,
        };
        for param in query.split('&').filter(|_| !query.is_empty()) {
            let Some((name, value)) = param.split_once('=') else {
                return Err("a query parameter has no '=': write NAME=VALUE, joined by '&'".into());
            };
            let name = decode(name, "name of a query parameter")?;
            if value.contains('=') {
                let q = self.q(&name);
                return Err(format!("the value of{q} has a second '=': write it %3D"));
            }
            let value = decode(value, "value of a query parameter")?;
            match PARAMETERS.split(' ').find(|known| *known == name) {
                Some(known) => raw.insert(known, value),
                // libpq's word for JDBC's.
                None if name == "ssl" && value == "true" => raw.insert("sslmode", "require".into()),
                None => {
                    let (q, known) = (self.q(&name), PARAMETERS.replace(' ', ", "));
                    let why = format!("redlock does not read the query parameter{q}");
                    return Err(format!("{why} (it reads {known})"));
                }
            };
        }
        self.settle(&raw)
    }

    /// `HOST`, `HOST:PORT` or `[V6]:PORT` of the URL's host list: the host and port, decoded.
    fn netloc_entry(&self, entry: &str) -> Result<(String, String), String> {
        let q = self.q(entry);
        let (host, port) = match entry.strip_prefix('[') {
            Some(v6) => {
                let no_bracket = || format!("IPv6 address{q} has no closing ']'");
                let (addr, after) = v6.split_once(']').ok_or_else(no_bracket)?;
                match after.strip_prefix(':') {
                    Some(port) => (addr, port),
                    None if after.is_empty() => (addr, ""),
                    None => return Err(format!("host{q} is not [ADDRESS]:PORT")),
                }
            }
            None if entry.matches(':').count() > 1 => {
                let fix = "IPv6 goes in brackets: [::1]:5432";
                return Err(format!("host{q} has two ':' ({fix})"));
            }
            None => entry.split_once(':').unwrap_or((entry, "")),
        };
        let (host, port) = (decode(host, "host")?, decode(port, "port")?);
        if entry.starts_with('[') && host.parse::<Ipv6Addr>().is_err() {
            return Err(format!("host{q} has no IPv6 address in its brackets"));
        }
        Ok((host, port))
    }

    /// The parameters, checked, and the hosts paired with their ports as libpq pairs them.
    fn settle(&self, raw: &HashMap<&str, String>) -> Result<Parsed, String> {
        let get = |name: &str| raw.get(name).filter(|v| !v.is_empty()).cloned();
        let hosts: Vec<&str> = raw["host"].split(',').collect();
        let ports: Vec<&str> = raw["port"].split(',').collect();
        let ports = match (ports.len(), hosts.len()) {
            (1, m) => vec![ports[0]; m],
            (n, m) if n == m => ports,
            (n, m) => {
                let fix = "give one port for all hosts, or one per host";
                return Err(format!("ports ({n}) do not match hosts ({m}): {fix}"));
            }
        };
        let mut servers = Vec::new();
        for (host, port) in hosts.into_iter().zip(ports) {
            servers.push(self.host(host, self.port(port)?)?);
        }
        let mode = raw.get("sslmode");
        let sslmode = match mode.map(|mode| SSLMODES.iter().find(|(name, _)| name == mode)) {
            Some(None) => {
                let q = self.q(mode.map_or("", |m| m));
                let valid = "disable, allow, prefer, require, verify-ca or verify-full";
                return Err(format!("sslmode{q} is not {valid}"));
            }
            given => given.flatten(),
        };
        let system = raw.get("sslrootcert").is_some_and(|c| c == "system");
        let sslmode = match sslmode {
            None if system => SslMode::VerifyFull,
            Some((name, mode)) if system && *mode != SslMode::VerifyFull => {
                let why = "anyone can get a certificate from a public CA for a name of their own";
                let takes = "sslrootcert=system takes sslmode=verify-full (its default)";
                return Err(format!("{takes}, not {name}: {why}"));
            }
            given => given.map_or(SslMode::default(), |(_, mode)| *mode),
        };
        let file = |name: &str| get(name).map(PathBuf::from);
        let (sslcert, sslkey) = (file("sslcert"), file("sslkey"));
        if sslcert.is_some() != sslkey.is_some() {
            let why = "the client certificate and its key";
            return Err(format!("sslcert and sslkey go together: {why}"));
        }
        let timeout = get("connect_timeout");
        let connect_timeout = match timeout.as_deref().map(str::parse::<u64>) {
            None | Some(Ok(0)) => None,
            Some(Ok(secs)) => Some(Duration::from_secs(secs)),
            Some(Err(_)) => {
                let q = self.q(timeout.as_deref().unwrap_or_default());
                let fix = "write a whole number, such as 10, or 0 for no limit";
                return Err(format!(
                    "connect_timeout{q} is not a number of seconds: {fix}"
                ));
            }
        };
        let schema = raw.get("schema").cloned();
        if let Some(name) = schema.as_deref().filter(|name| !plain(name)) {
            let fix = "write 1 to 63 letters, digits and underscores, not starting with a digit";
            return Err(format!("schema{} is not a plain name: {fix}", self.q(name)));
        }
        Ok(Parsed {
            scheme: self.scheme,
            hosts: servers,
            user: get("user"),
            password: get("password"),
            dbname: get("dbname"),
            schema,
            sslmode,
            sslrootcert: file("sslrootcert"),
            sslcert,
            sslkey,
            connect_timeout,
            application_name: get("application_name"),
        })
    }

    /// A port of the list: empty for libpq's default.
    fn port(&self, port: &str) -> Result<u16, String> {
        match port.parse::<u16>() {
            _ if port.is_empty() => Ok(DEFAULT_PORT),
            Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
            _ => Err(format!(
                "port{} is not a number from 1 to 65535",
                self.q(port)
            )),
        }
    }

    /// A host of the list: empty for libpq's default, a socket directory if it starts with '/'.
    fn host(&self, host: &str, port: u16) -> Result<Host, String> {
        let host = match host {
            "" => DEFAULT_SOCKET_DIR,
            host => host,
        };
        let q = self.q(host);
        if host.starts_with('/') {
            if host.contains(char::is_control) {
                return Err(format!("socket directory{q} has a control character in it"));
            }
            // The socket's path must fit in sun_path: 108 bytes with its NUL.
            if format!("{host}/.s.PGSQL.{port}").len() >= 108 {
                return Err(format!("socket directory{q} is too long for a socket"));
            }
            let dir = PathBuf::from(host);
            return Ok(Host::Unix { dir, port });
        }
        let named = (host.bytes()).all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
        if named || host.parse::<Ipv6Addr>().is_ok() {
            let host = host.to_owned();
            return Ok(Host::Tcp { host, port });
        }
        let what = "a host name, an IP address or a socket directory (/var/run/postgresql)";
        Err(format!("host{q} is not {what}"))
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`, 1 to 63 bytes: a schema's name that means the same unquoted.
fn plain(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A percent-encoded part of the URL, decoded; `what` names it (the message never quotes it).
/// libpq refuses %00, and so does redlock.
fn decode(part: &str, what: &str) -> Result<String, String> {
    let mut bytes = Vec::with_capacity(part.len());
    for byte in crate::backend::url::unescaped(part) {
        match byte {
            Err(_) => {
                return Err(format!(
                    "a '%' in the {what} is not followed by 2 hex digits"
                ));
            }
            Ok(0) => return Err(format!("the {what} has %00 in it")),
            Ok(byte) => bytes.push(byte),
        }
    }
    String::from_utf8(bytes).map_err(|_| format!("the {what} is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(url: &str) -> Parsed {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    /// Each line: a URL, ` | `, what `shown` makes of it (the servers, their ports, the db).
    const SHOWN: &str = "
postgres://                                   | postgres:///?host=/var/run/postgresql
postgresql://alice:s3cret@db.example:6432/app | postgresql://db.example:6432/app
postgres://u@10.0.0.1/my%20db?                | postgres://10.0.0.1:5432/my db
postgres://alice:@h:/                         | postgres://h:5432
postgres://[::1]:5433,[fe80::2],h:1/db        | postgres://[::1]:5433,[fe80::2]:5432,h:1/db
postgres://h1,h2/db?port=6000                 | postgres://h1:6000,h2:6000/db
postgres://h1,h2?port=1,2&port=3,4            | postgres://h1:3,h2:4
postgres://h1:7?host=a,b                      | postgres://a:7,b:7
postgres://h/db?dbname=other                  | postgres://h:5432/other
postgres://,h2                                | postgres:///?host=/var/run/postgresql,h2
postgres://:5433/db                           | postgres:///db?host=/var/run/postgresql&port=5433
postgres://%2Fvar%2Frun%2Fpostgresql/db       | postgres:///db?host=/var/run/postgresql
postgres://x/db?host=/tmp,::1,h&port=1,2,3    | postgres:///db?host=/tmp,::1,h&port=1,2,3
";

    #[test]
    fn hosts_ports_and_the_database_as_libpq_reads_them() {
        for (url, shown) in SHOWN.lines().filter_map(|line| line.split_once(" | ")) {
            assert_eq!(ok(url.trim_end()).shown(), shown, "{url}");
        }
        let (dir, host) = ("/tmp".into(), "::1".to_owned());
        let p = ok("postgres://%2Ftmp:5433,[::1]");
        let hosts = [
            Host::Unix { dir, port: 5433 },
            Host::Tcp { host, port: 5432 },
        ];
        assert_eq!(p.hosts, hosts);
    }

    #[test]
    fn credentials_and_parameters_the_last_of_each_winning() {
        let p = ok("postgres://al%40ice:p%3Ass%2Fw%25@h/db");
        assert_eq!(p.user.as_deref(), Some("al@ice"));
        assert_eq!(p.password.as_deref(), Some("p:ss/w%"));
        // libpq's rule: the user part ends at the first '@'; a ':' or '?' may be in a password.
        let p = ok("postgres://alice:pa:ss?w@h/db");
        assert_eq!(p.password.as_deref(), Some("pa:ss?w"));
        let p = ok("postgres://alice@h/db?user=bob&password=p%26w&application_name=a%20b&");
        assert_eq!(p.user.as_deref(), Some("bob"));
        assert_eq!(p.password.as_deref(), Some("p&w"));
        assert_eq!(p.application_name.as_deref(), Some("a b"));
        let p = ok("postgres://h/db?user=alice@corp");
        assert_eq!(p.user.as_deref(), Some("alice@corp"));
        for (name, mode) in SSLMODES {
            let url = format!("postgres://h?sslmode=prefer&sslmode={name}");
            assert_eq!(ok(&url).sslmode, mode);
        }
        assert_eq!(ok("postgres://h?ssl=true").sslmode, SslMode::Require);
        let p = ok("postgres://h/db?sslrootcert=/ca.pem&sslcert=/c.pem&sslkey=%2Fk.pem");
        assert_eq!(p.sslrootcert, Some("/ca.pem".into()));
        assert_eq!(p.sslcert, Some("/c.pem".into()));
        assert_eq!(p.sslkey, Some("/k.pem".into()));
        let p = ok("postgres://h?sslrootcert=system");
        assert_eq!(p.sslrootcert, Some("system".into()));
        assert_eq!(p.sslmode, SslMode::VerifyFull);
        let timeout = |t: &str| ok(&format!("postgres://h?connect_timeout={t}")).connect_timeout;
        assert_eq!(timeout("10"), Some(Duration::from_secs(10)));
        assert_eq!((timeout("0"), timeout("")), (None, None));
        for schema in ["redlock", "_x", "Locks_2", &"s".repeat(63)] {
            let p = ok(&format!("postgres://h?schema={schema}"));
            assert_eq!(p.schema.as_deref(), Some(schema));
        }
    }

    /// Each line: a URL (`U:P@` stands for `alice:s3cret@`), ` | `, what its error says.
    const BAD: &str = "
mysql://U:P@h/db                                 | not a PostgreSQL URL
POSTGRES://h/db                                  | not a PostgreSQL URL
postgres://U:P@h:0/db                            | port '0' is not a number from 1 to 65535
postgres://U:P@h:65536/db                        | port '65536'
postgres://U:P@h:+5432/db                        | port '+5432'
postgres://U:P@h%201/db                          | host 'h 1' is not a host name
postgres://U:P@h%0A/db                           | host 'h\\n'
postgres://U:P@[::1/db                           | no closing ']'
postgres://U:P@[]/db                             | host '[]' has no IPv6 address in its brackets
postgres://U:P@[zz]:1/db                         | host '[zz]:1' has no IPv6 address in its brackets
postgres://U:P@[::1]x/db                         | host '[::1]x' is not [ADDRESS]:PORT
postgres://U:P@::1/db                            | in brackets
postgres://U:P@h1:1,h2:2/db?host=h3              | ports (2) do not match hosts (1)
postgres://U:P@h/db?port=1,2                     | ports (2) do not match hosts (1)
postgres://U:P@h/db?sslmode=on                   | sslmode 'on' is not disable, allow, prefer
postgres://U:P@h/db?sslmode=                     | sslmode ''
postgres://h/db?sslrootcert=system&sslmode=require | not require
postgres://U:P@h/db?sslcert=/c.pem               | sslcert and sslkey go together
postgres://U:P@h/db?sslkey=/k.pem                | sslcert and sslkey go together
postgres://U:P@h/db?connect_timeout=-1           | connect_timeout '-1' is not a number
postgres://U:P@h/db?connect_timeout=1.5          | connect_timeout '1.5'
postgres://U:P@h/db?schema=                      | schema '' is not a plain name
postgres://U:P@h/db?schema=1abc                  | schema '1abc'
postgres://U:P@h/db?schema=a-b                   | schema 'a-b'
postgres://U:P@h/db?schema=%C3%A9                | not a plain name
postgres:///db?host=rel/dir                      | host 'rel/dir' is not a host name
postgres:///db?host=%40abstract                  | host '@abstract'
postgres://U:P@h/db?options=-c%20a%3Db           | parameter 'options' (it reads host, port,
postgres://h/db?target_session_attrs=any         | parameter 'target_session_attrs'
postgres://h/db?ssl=false                        | parameter 'ssl'
postgres://h/db?user=alice&password=s3cret&no=1  | parameter (it reads
postgres://U:P@h/db?sslmode                      | has no '='
postgres://h/db?password=s3cret&alice            | has no '='
postgres://h/db?&sslmode=require                 | has no '='
postgres://h/db?sslmode=require&&port=1          | has no '='
postgres://U:P@h/db?user=a=b                     | the value of 'user' has a second '='
postgres://alice:s3cret%zz@h/db                  | a '%' in the password is not followed by
postgres://alice:s3cret%+1@h/db                  | a '%' in the password
postgres://al%ice:s3cret@h/db                    | a '%' in the user name
postgres://alice:s3cret%FF@h/db                  | the password is not UTF-8
postgres://h/db?password=s3cret%                 | a '%' in the value of a query parameter
postgres://U:P@h/d%00b                           | the database name has %00
postgres://alice:s3c@ret@h/db                    | a '@' in the host or database part: write it %40 in a database name (if
postgres://alice:s3c/ret@h/db                    | a '@' in the host or database part: write it %40 in a database name (if
postgres://alice:s3c/r?user=x@h/db               | port is not a number from 1 to 65535 (if its
postgres://alice:s3c@r?et=x@h/db                 | query parameter (it reads
postgres://h/db?password=Blue&Horse=s3cret       | parameter (it reads
postgres://h/db?password=Blue&sslmode=s3cret     | sslmode is not disable
";

    #[test]
    fn bad_urls_are_refused_in_one_line_that_quotes_no_user_part() {
        let cases = BAD.lines().filter_map(|line| line.split_once(" | "));
        let (long, schema) = ("d".repeat(100), "s".repeat(64));
        let long = format!("postgres://U:P@h/db?host=/{long} | is too long for a socket");
        let schema = format!("postgres://h/db?schema={schema} | not a plain name");
        let more = [
            ("postgres://U:P@h/db\n", "control character"),
            long.split_once(" | ").unwrap_or_default(),
            schema.split_once(" | ").unwrap_or_default(),
        ];
        for (url, expected) in cases.chain(more) {
            let url = url.trim_end_matches(' ').replace("U:P@", "alice:s3cret@");
            let err = parse(&url)
                .err()
                .unwrap_or_else(|| panic!("{url:?} was taken"));
            assert!(
                err.contains(expected) && !err.contains('\n'),
                "{url:?}: {err}"
            );
            for secret in ["s3c", "alice", "ret@"] {
                assert!(!err.contains(secret), "{url:?} quotes {secret}: {err}");
            }
        }
    }
}
