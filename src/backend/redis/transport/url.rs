//! The query parameters each Redis scheme takes (any other is refused, never silently
//! ignored), and which of them are secret. The URL's text is cut by [`crate::backend::url`].

use crate::backend::url::{pairs, printable};

/// The query parameters each scheme takes; the secret ones are [`SECRET_PARAMETERS`].
pub(crate) fn parameters(scheme: &str) -> &'static [&'static str] {
    match scheme {
        "redis" | "rediss" => &["protocol"],
        "unix" | "redis+unix" => &["db", "user", "pass", "protocol"],
        "redis+sentinel" | "rediss+sentinel" => &["db", "sentinel_username", "sentinel_password"],
        _ => &[],
    }
}

/// Parameters that hold a password (and, for messages, anything after them may too).
pub(crate) const SECRET_PARAMETERS: [&str; 3] = ["pass", "password", "sentinel_password"];

/// Refuse a query parameter `scheme` does not take (so that `?password=` on a socket URL, which
/// the crate ignores, does not silently leave the server without a password), saying which it
/// takes. A parameter after a secret one is not named: it may be part of the password (a `&`
/// in a password must be written `%26`).
pub(crate) fn check_parameters(scheme: &str, query: &str) -> Result<(), String> {
    let scheme = scheme.to_ascii_lowercase();
    let known = parameters(&scheme);
    let mut after_secret = false;
    for (name, _) in pairs(query) {
        let lower = name.to_ascii_lowercase();
        if !known.contains(&lower.as_str()) {
            let takes = match known {
                [] => format!("a {scheme}:// URL takes no parameters"),
                [one] => format!("a {scheme}:// URL takes only {one}"),
                [all @ .., last] => {
                    format!("a {scheme}:// URL takes {} and {last}", all.join(", "))
                }
            };
            let which = if after_secret {
                "parameter after the password (a '&' in a password is written %26)".to_owned()
            } else {
                format!("parameter '{}'", printable(&name))
            };
            let hint = match (scheme.as_str(), lower.as_str()) {
                ("redis" | "rediss", "db") => "; the database goes in the path: /2",
                (_, "password") if known.contains(&"pass") => "; the password goes in pass=",
                _ => "",
            };
            return Err(format!("unknown {which}: {takes}{hint}"));
        }
        after_secret |= SECRET_PARAMETERS.contains(&lower.as_str());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_parameters_are_refused_without_naming_a_piece_of_a_password() {
        assert!(check_parameters("unix", "db=2&pass=x&user=u&protocol=2").is_ok());
        assert!(check_parameters("redis", "protocol=resp3").is_ok());
        let err = check_parameters("unix", "password=hunter2").unwrap_err();
        assert_eq!(
            err,
            "unknown parameter 'password': a unix:// URL takes db, user, pass and protocol; \
             the password goes in pass="
        );
        let err = check_parameters("redis", "db=2").unwrap_err();
        assert!(err.ends_with("takes only protocol; the database goes in the path: /2"));
        let err = check_parameters("unix", "pass=hun&ter2").unwrap_err();
        assert!(!err.contains("ter2") && err.contains("%26"), "{err}");
        let err = check_parameters("redis+cluster", "x=1").unwrap_err();
        assert!(err.contains("takes no parameters"), "{err}");
    }
}
