//! URLs as messages and the command may show them: any password hidden (`redact`, for every
//! message) or taken out (`without_password`, for the `REDLOCK_URL` the command sees).

/// `url` with any password taken out (a `user:password@` keeps the user; a password query
/// parameter goes), for the `REDLOCK_URL` the command sees: it can reuse the address, not the
/// secret.
pub fn without_password(url: &str) -> String {
    let shown = redact(url);
    let Some(scheme_end) = shown.find("://").map(|i| i + 3) else {
        return shown;
    };
    let (head, rest) = shown.split_at(scheme_end);
    let rest = match rest.split_once(":***@") {
        Some(("", host)) => host.to_owned(),
        Some((user, host)) if !user.contains('@') => format!("{user}@{host}"),
        _ => rest.replacen("***@", "", 1),
    };
    // A password query parameter, hidden to the end by redact(): drop it and what follows.
    let rest = match ["?pass=***", "&pass=***", "?password=***", "&password=***"]
        .iter()
        .find_map(|p| rest.find(p))
    {
        Some(at) => rest[..at].to_owned(),
        None => rest,
    };
    format!("{head}{rest}")
}

/// `url` with any password replaced by `***`, for messages. A password may hold any character,
/// spaces, `/`, `?`, `#` and `@` included: the user info runs to the *last* `@`, and a password
/// query parameter (unix sockets, sentinels) to the end of the URL.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let scheme = url[..scheme_end - 3].to_ascii_lowercase();
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..scheme_end]);
    let mut rest = &url[scheme_end..];
    // Socket URLs have no user info (the path may hold an '@'); the others end it at the last '@'.
    if !scheme.contains("unix")
        && let Some(at) = rest.rfind('@')
    {
        let userinfo = &rest[..at];
        match userinfo.find(':') {
            Some(colon) => out.push_str(&format!("{}:***", &userinfo[..colon])),
            None => out.push_str("***"),
        }
        rest = &rest[at..];
    }
    // Query parameters such as ?pass= (unix sockets) carry secrets too: from the first one on,
    // everything is hidden, since the password may hold '&'.
    let lower = rest.to_ascii_lowercase();
    let secret = ["pass=", "password=", "sentinel_password="]
        .iter()
        .filter_map(|key| {
            lower
                .match_indices(key)
                .find(|(i, _)| *i > 0 && matches!(lower.as_bytes()[i - 1], b'?' | b'&'))
                .map(|(i, _)| i + key.len())
        })
        .min();
    match secret {
        Some(value) => {
            out.push_str(&rest[..value]);
            out.push_str("***");
        }
        None => out.push_str(rest),
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
        // Whatever the password holds, none of it shows.
        assert_eq!(
            redact("redis://u:p@ss wo/rd?x#y@host:6379/0"),
            "redis://u:***@host:6379/0"
        );
        assert_eq!(redact("redis://:correct horse"), "redis://:correct horse");
        assert_eq!(
            redact("unix:///tmp/a@b.sock?pass=x&y@z"),
            "unix:///tmp/a@b.sock?pass=***"
        );
    }

    #[test]
    fn the_commands_url_has_no_password() {
        assert_eq!(
            without_password("redis://alice:hunter2@host:6379/0"),
            "redis://alice@host:6379/0"
        );
        assert_eq!(without_password("redis://:p@ss word@host"), "redis://host");
        assert_eq!(without_password("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            without_password("redis+unix:///tmp/r.sock?db=1&pass=hunter2"),
            "redis+unix:///tmp/r.sock?db=1"
        );
        assert_eq!(
            without_password("redis+sentinel://:pw@h1,h2/svc"),
            "redis+sentinel://h1,h2/svc"
        );
    }
}
