//! A lock's URL as text, whichever backend it names: where its user info and its query are,
//! the copy the command sees in `REDLOCK_URL` (no secret in it), and what a word that is not
//! a URL most likely meant. A password may hold any character, `@` included, so the user info
//! runs to the *last* `@` (on a socket URL, whose path may hold one too, to the last `@/`).
//! Which parameters each scheme takes is its backend's to say.

/// The backend a URL's scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Redis,
    Etcd,
    Postgres,
    ZooKeeper,
}

/// A scheme redlock takes: the backend it names, and whether its connections use TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scheme {
    pub name: &'static str,
    pub kind: Kind,
    pub tls: bool,
    /// Named where a message lists the schemes to use; the TLS forms of Sentinel's and
    /// Cluster's are left to `rediss://` to suggest, so that the list stays readable.
    listed: bool,
}

/// Every scheme redlock takes: the one table that [`open`](crate::backend::open) picks a
/// backend by and that the URL checks and their messages read.
pub(crate) const SCHEMES: [Scheme; 14] = {
    use Kind::{Etcd, Postgres, Redis, ZooKeeper};
    const fn scheme(name: &'static str, kind: Kind, tls: bool, listed: bool) -> Scheme {
        Scheme {
            name,
            kind,
            tls,
            listed,
        }
    }
    [
        scheme("redis", Redis, false, true),
        scheme("rediss", Redis, true, true),
        scheme("unix", Redis, false, true),
        scheme("redis+unix", Redis, false, true),
        scheme("redis+sentinel", Redis, false, true),
        scheme("rediss+sentinel", Redis, true, false),
        scheme("redis+cluster", Redis, false, true),
        scheme("rediss+cluster", Redis, true, false),
        scheme("etcd", Etcd, false, true),
        scheme("etcds", Etcd, true, true),
        scheme("postgres", Postgres, false, true),
        scheme("postgresql", Postgres, false, true),
        scheme("zk", ZooKeeper, false, true),
        scheme("zks", ZooKeeper, true, true),
    ]
};

/// The scheme named `name`, as written: etcd's and PostgreSQL's parsers take their schemes in
/// lower case only (libpq does too); Redis's take any case, so a caller that means to find
/// those lowercases first.
pub(crate) fn scheme(name: &str) -> Option<&'static Scheme> {
    SCHEMES.iter().find(|s| s.name == name)
}

/// The scheme of `url`, as written; None without `://` or when redlock does not take it.
pub(crate) fn scheme_of(url: &str) -> Option<&'static Scheme> {
    scheme(url.split_once("://")?.0)
}

/// The schemes to use, as a message lists them: `redis://, rediss://, ... or postgresql://`.
pub(crate) fn listed() -> String {
    let names: Vec<String> = SCHEMES
        .iter()
        .filter(|s| s.listed)
        .map(|s| format!("{}://", s.name))
        .collect();
    match names.split_last() {
        Some((last, init)) => format!("{} or {last}", init.join(", ")),
        None => String::new(),
    }
}

/// A URL cut where the redis crate's parser cuts it (`scheme://userinfo@place?query#fragment`),
/// with the user info found as [`redact`](crate::backend::redis::transport::redact::redact) finds it.
pub(crate) struct Parts<'a> {
    /// As written (not lowercased).
    pub scheme: &'a str,
    pub userinfo: Option<&'a str>,
    /// Host, port and path; or the socket's path.
    pub place: &'a str,
    pub query: Option<&'a str>,
}

/// `url` cut into its [`Parts`]; None without `://`.
pub(crate) fn parts(url: &str) -> Option<Parts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let unix = scheme.to_ascii_lowercase().contains("unix");
    let userinfo_end = if !unix {
        rest.rfind('@')
    } else if rest.starts_with('/') {
        None
    } else {
        rest.rfind("@/").or_else(|| rest.rfind('@'))
    };
    let (userinfo, after) = match userinfo_end {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let after = after.split('#').next().unwrap_or(after);
    let (place, query) = match after.split_once('?') {
        Some((place, query)) => (place, Some(query)),
        None => (after, None),
    };
    Some(Parts {
        scheme,
        userinfo,
        place,
        query,
    })
}

/// The query's parameters as `(name, raw value)`, the name percent-decoded (as the crate's
/// `query_pairs` decodes it; undecodable names are kept as written).
pub(crate) fn pairs(query: &str) -> impl Iterator<Item = (String, &str)> {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (
            percent_decode(name).unwrap_or_else(|_| name.to_owned()),
            value,
        )
    })
}

/// `url` as the command may see it in `REDLOCK_URL`: the scheme, the user name (not the
/// password), the place, and of the query only the parameters that are not secret and that
/// redlock takes (`db`, `user`, `protocol`, `sentinel_username`; on PostgreSQL every one but
/// `password`), in their order. A word that is not a URL gives "": it may be a piece of a
/// password with a space in it.
///
/// `alone_is_user`: a word alone before the `@` is the user name (the password was given
/// apart, or the scheme is etcd's, PostgreSQL's or ZooKeeper's, which take no password alone); otherwise it
/// may be a password, and goes too.
pub(crate) fn for_command(url: &str, alone_is_user: bool) -> String {
    let Some(parts) = parts(url.trim()) else {
        return String::new();
    };
    let kind = scheme(parts.scheme).map(|s| s.kind);
    let postgres = kind == Some(Kind::Postgres);
    let alone_is_user =
        alone_is_user || postgres || matches!(kind, Some(Kind::Etcd | Kind::ZooKeeper));
    let user = match parts
        .userinfo
        .map(|u| u.split_once(':').map_or((u, true), |(u, _)| (u, false)))
    {
        Some((user, false)) if !user.is_empty() => format!("{user}@"),
        Some((user, true)) if alone_is_user && !user.is_empty() => format!("{user}@"),
        _ => String::new(),
    };
    let kept: Vec<&str> = parts
        .query
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(name, _)| name);
            let name = percent_decode(name)
                .unwrap_or_default()
                .to_ascii_lowercase();
            // libpq's parameters say where and how to connect: all but the password.
            (postgres && name != "password")
                || ["db", "user", "protocol", "sentinel_username"].contains(&name.as_str())
        })
        .collect();
    let query = match kept.as_slice() {
        [] => String::new(),
        kept => format!("?{}", kept.join("&")),
    };
    format!("{}://{user}{}{query}", parts.scheme, parts.place)
}

/// Why `word`, which has no `://`, is not a URL. It is quoted, with the URL it most likely
/// means, only when it is `host:port` (or `SCHEME:host:port`, the `//` forgotten): anything
/// else may be part of a password, so of `SCHEME:anything` (`redis:s3cret@host:1`) only the
/// scheme is named.
pub(crate) fn no_scheme(word: &str) -> String {
    let known = word
        .split_once(':')
        .filter(|(name, _)| scheme(&name.to_ascii_lowercase()).is_some());
    if let Some((scheme, rest)) = known {
        let rest = rest.trim_start_matches('/');
        let unix = scheme.to_ascii_lowercase().contains("unix");
        let path = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
        };
        if !unix && address(rest) {
            return format!(
                "'{word}' is not a URL: it lacks the '//' after '{scheme}:'; use {scheme}://{rest}"
            );
        }
        if unix && path(rest) {
            return format!(
                "'{word}' is not a URL: it lacks the '//' after '{scheme}:'; use {scheme}:///{rest}"
            );
        }
    }
    if address(word) {
        format!("'{word}' is not a URL: it has no scheme; use redis://{word}")
    } else if let Some((scheme, _)) = known {
        let slashes = if scheme.to_ascii_lowercase().contains("unix") {
            "///PATH"
        } else {
            "//..."
        };
        format!("the URL lacks the '//' after '{scheme}:' (write {scheme}:{slashes})")
    } else {
        format!("the URL has no scheme (use {})", listed())
    }
}

/// Whether `word` is `host:port` (IPv6 in brackets or not).
fn address(word: &str) -> bool {
    word.rsplit_once(':').is_some_and(|(host, port)| {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-' | '_'))
            && port.parse::<u16>().is_ok()
    })
}

/// Why a percent-encoded part of a URL cannot be decoded. Each backend says it in its own
/// words, naming the part (never quoting it: it may be a password).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadEscape {
    /// A `%` not followed by two hex digits.
    NotHex,
    /// The decoded bytes are not UTF-8.
    NotUtf8,
}

/// The bytes `text` stands for, each `%XX` decoded (RFC 3986: exactly two hex digits), one at
/// a time, so that a caller can refuse a byte as it comes (PostgreSQL's `%00`); a `%` without
/// two hex digits after it ends them with [`BadEscape::NotHex`].
pub(crate) fn unescaped(text: &str) -> impl Iterator<Item = Result<u8, BadEscape>> + '_ {
    let mut rest = text.as_bytes();
    std::iter::from_fn(move || {
        let (&byte, tail) = rest.split_first()?;
        if byte != b'%' {
            rest = tail;
            return Some(Ok(byte));
        }
        let digit = |d: u8| char::from(d).to_digit(16);
        match tail {
            [high, low, after @ ..] => {
                let (Some(high), Some(low)) = (digit(*high), digit(*low)) else {
                    rest = &[];
                    return Some(Err(BadEscape::NotHex));
                };
                rest = after;
                Some(Ok((high * 16 + low) as u8))
            }
            _ => {
                rest = &[];
                Some(Err(BadEscape::NotHex))
            }
        }
    })
}

/// `text` with each `%XX` decoded, as UTF-8: the one percent-decoder of every backend's URL.
pub(crate) fn percent_decode(text: &str) -> Result<String, BadEscape> {
    let bytes = unescaped(text).collect::<Result<Vec<u8>, _>>()?;
    String::from_utf8(bytes).map_err(|_| BadEscape::NotUtf8)
}

/// `text` with control characters escaped, for a one-line message.
pub(crate) fn printable(text: &str) -> String {
    text.chars().flat_map(char::escape_default).collect()
}

/// A member of a URL's list: `host:port`, `host` (then `default_port`) or `[v6]:port`, the
/// host a name or an IPv4 address, or an IPv6 one in brackets; the port its digits alone,
/// not 0. None when it is none of these.
pub(crate) fn host_and_port(member: &str, default_port: u16) -> Option<(&str, u16)> {
    if member.is_empty() || member.contains(char::is_whitespace) {
        return None;
    }
    let (host, port) = if let Some(v6) = member.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let host = &member[..host.len() + 2];
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match member.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (member, None),
        }
    };
    // A name or an IPv4 address, or an IPv6 one in brackets: what a URL's host may be.
    let named = |h: &str| {
        h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    let valid = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => named(host),
    };
    if host.is_empty() || !valid {
        return None;
    }
    let port = match port {
        Some(port) if port.bytes().all(|b| b.is_ascii_digit()) => {
            port.parse::<u16>().ok().filter(|p| *p > 0)?
        }
        Some(_) => return None,
        None => default_port,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_url_keeps_what_is_not_secret_in_any_order() {
        for (url, want) in [
            (
                "redis+unix:///p/r.sock?pass=PW&db=2",
                "redis+unix:///p/r.sock?db=2",
            ),
            (
                "redis+unix:///p/r.sock?db=2&pass=PW",
                "redis+unix:///p/r.sock?db=2",
            ),
            (
                "unix:///p/r.sock?user=u&pass=P%26W&protocol=3&db=1",
                "unix:///p/r.sock?user=u&protocol=3&db=1",
            ),
            ("redis://:PW@h:6379/2", "redis://h:6379/2"),
            ("redis://alice:PW@h:6379/2", "redis://alice@h:6379/2"),
            ("redis://PW@h", "redis://h"),
            ("redis://:p@ss word@host", "redis://host"),
            ("rediss://h/0?protocol=resp3", "rediss://h/0?protocol=resp3"),
            (
                "redis+sentinel://:pw@h1,h2/svc?sentinel_password=s&db=2&sentinel_username=u",
                "redis+sentinel://h1,h2/svc?db=2&sentinel_username=u",
            ),
            // Anything the crate would not read, a fragment included, goes.
            ("redis://h/0#frag", "redis://h/0"),
            ("unix:///p?pass=a#b&db=3", "unix:///p"),
            ("unix:///p?pass=a&b", "unix:///p"),
            ("not-a-url", ""),
        ] {
            assert_eq!(for_command(url, false), want, "{url}");
        }
        // A word alone before the `@` is the user when the password came apart, and on etcd.
        assert_eq!(for_command("redis://bob@h/2", true), "redis://bob@h/2");
        assert_eq!(for_command("redis://:PW@h/2", true), "redis://h/2");
        assert_eq!(for_command("etcd://bob@h1,h2", false), "etcd://bob@h1,h2");
        assert_eq!(for_command("etcd://bob:PW@h1", false), "etcd://bob@h1");
        assert_eq!(
            for_command("zk://bob:PW@h1,h2/c", false),
            "zk://bob@h1,h2/c"
        );
    }

    #[test]
    fn one_table_names_each_schemes_backend_and_whether_it_uses_tls() {
        use Kind::{Etcd, Postgres, Redis, ZooKeeper};
        for (url, want) in [
            ("redis://h:6379", Some((Redis, false))),
            ("rediss://h:6380", Some((Redis, true))),
            ("unix:///tmp/r.sock", Some((Redis, false))),
            ("redis+unix:///tmp/r.sock", Some((Redis, false))),
            ("redis+sentinel://h/svc", Some((Redis, false))),
            ("rediss+sentinel://h/svc", Some((Redis, true))),
            ("redis+cluster://h", Some((Redis, false))),
            ("rediss+cluster://h", Some((Redis, true))),
            ("etcd://h", Some((Etcd, false))),
            ("etcds://h", Some((Etcd, true))),
            // PostgreSQL's TLS is sslmode's to say, not the scheme's.
            ("postgres://h/db", Some((Postgres, false))),
            ("postgresql://h/db", Some((Postgres, false))),
            ("zk://h/chroot", Some((ZooKeeper, false))),
            ("zks://h", Some((ZooKeeper, true))),
            // As written: only Redis's parser takes another case, and open() leaves to it
            // whatever the table does not name.
            ("ETCD://h", None),
            ("REDIS://h", None),
            ("http://h", None),
            ("h:6379", None),
        ] {
            assert_eq!(scheme_of(url).map(|s| (s.kind, s.tls)), want, "{url}");
        }
        let names: Vec<&str> = SCHEMES.iter().map(|s| s.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(
            listed(),
            "redis://, rediss://, unix://, redis+unix://, redis+sentinel://, redis+cluster://, \
             etcd://, etcds://, postgres://, postgresql://, zk:// or zks://"
        );
    }

    #[test]
    fn percent_decoding_takes_two_hex_digits_and_gives_utf8() {
        use BadEscape::{NotHex, NotUtf8};
        for (text, want) in [
            ("", Ok("")),
            ("plain", Ok("plain")),
            ("a%20b", Ok("a b")),
            ("m%40ster%3a%3A", Ok("m@ster::")),
            ("%C3%A9t%C3%A9", Ok("\u{e9}t\u{e9}")),
            ("%2", Err(NotHex)),
            ("%", Err(NotHex)),
            ("a%zzb", Err(NotHex)),
            // What `u8::from_str_radix` would take as a sign is no hex digit.
            ("%+1", Err(NotHex)),
            ("%\u{e9}", Err(NotHex)),
            ("%ff", Err(NotUtf8)),
            ("%C3", Err(NotUtf8)),
        ] {
            assert_eq!(percent_decode(text).as_deref(), want.as_deref(), "{text}");
        }
        // A caller refusing a byte sees it before a later bad escape.
        let first_bad = unescaped("a%00%zz").find(|b| *b != Ok(b'a'));
        assert_eq!(first_bad, Some(Ok(0)));
    }

    #[test]
    fn a_word_without_a_scheme_gets_the_url_it_meant() {
        let say = no_scheme;
        assert_eq!(
            say("redis:127.0.0.1:7311"),
            "'redis:127.0.0.1:7311' is not a URL: it lacks the '//' after 'redis:'; use \
             redis://127.0.0.1:7311"
        );
        assert!(say("rediss:/h:1").ends_with("use rediss://h:1"));
        assert!(say("unix:/tmp/r.sock").ends_with("use unix:///tmp/r.sock"));
        // A host named redis, as in docker compose.
        assert!(say("redis:6379").ends_with("it has no scheme; use redis://redis:6379"));
        assert!(say("127.0.0.1:6379").ends_with("use redis://127.0.0.1:6379"));
        for secret in [
            "redis::hunter2@h:1",
            "redis:hunter2@h:1",
            "unix:/tmp/r.sock?pass=hunter2",
            ":hunter2@h:1",
        ] {
            assert!(!say(secret).contains("hunter2"), "{secret}");
        }
        assert_eq!(
            say("redis:hunter2@h:1"),
            "the URL lacks the '//' after 'redis:' (write redis://...)"
        );
        assert!(say("unix:/tmp/r.sock?pass=x").ends_with("(write unix:///PATH)"));
        assert!(say("hunter2@h:1").contains("has no scheme"));
    }
}
