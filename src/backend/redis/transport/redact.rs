//! URLs as messages show them: any password hidden (`redact`). The `REDLOCK_URL` the command
//! sees, without any secret, is [`url::for_command`](crate::backend::url::for_command)'s.

use crate::backend::redis::transport::url::SECRET_PARAMETERS;

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
    // The user info ends at the last '@'. A socket URL's path may hold an '@' too: there, user
    // info (which redlock refuses, but must not print) comes before the path's '/', so it ends
    // at the last "@/", and a URL whose path starts at once has none.
    let userinfo_end = if !scheme.contains("unix") {
        rest.rfind('@')
    } else if rest.starts_with('/') {
        None
    } else {
        rest.rfind("@/").or_else(|| rest.rfind('@'))
    };
    if let Some(at) = userinfo_end {
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
    let secret = SECRET_PARAMETERS
        .iter()
        .map(|name| format!("{name}="))
        .filter_map(|key| {
            lower
                .match_indices(key.as_str())
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
        // User info on a socket URL (refused, but quoted in the error).
        assert_eq!(
            redact("redis+unix://:S3cr3tPW@/tmp/r.sock"),
            "redis+unix://:***@/tmp/r.sock"
        );
        assert_eq!(
            redact("unix://user:S3cr3tPW@/tmp/r.sock"),
            "unix://user:***@/tmp/r.sock"
        );
        assert_eq!(
            redact("unix://:p@/w@/tmp/a@b.sock"),
            "unix://:***@/tmp/a@b.sock"
        );
        assert_eq!(redact("unix://S3cr3tPW@"), "unix://***@");
    }
}
