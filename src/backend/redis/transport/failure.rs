//! The Redis client's errors as [`Failure`]s: each names the server and says what to do, and
//! keeps the redis or I/O error it comes from as its `source()`. Errors are told apart by their
//! kind (an `io::ErrorKind`, the redis error's kind or its server error code), never by their
//! text.

use std::error::Error;
use std::fmt;

use redis::RedisError;

use crate::lock::{Failure, Reason};

/// Whether the server refused the request for want of a permission (`NOPERM`: the ACL
/// user lacks the command or the key), rather than for what the server is or can do.
pub(crate) fn is_denied(failure: &Failure) -> bool {
    let redis = failure
        .source()
        .and_then(|source| source.downcast_ref::<RedisError>());
    redis.is_some_and(|err| err.code() == Some("NOPERM"))
}

/// A failed request as a [`Failure`], naming where it went.
pub(crate) fn classify(at: &dyn fmt::Display, err: RedisError) -> Failure {
    // A read that ran out of time: the socket's timeout (EAGAIN) or redlock's deadline.
    if err.is_timeout() {
        Failure::Unreachable(Reason::caused_by(
            format!("no answer from Redis at {at} in time"),
            err,
        ))
    } else if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
        Failure::Unreachable(Reason::caused_by(
            format!("cannot reach Redis at {at}: {err}"),
            err,
        ))
    } else {
        Failure::Refused(Reason::caused_by(refusal(at, &err), err))
    }
}

/// What a server's answer `err` to a request at `at` means, and what to do about it.
fn refusal(at: &dyn fmt::Display, err: &RedisError) -> String {
    if err.code() == Some("FOREIGNKEY") {
        // From a script's guard (lock/scripts/guard.lua): "TYPE KEY"; the key may hold spaces.
        let detail = err.detail().unwrap_or_default();
        let (kind, key) = detail.split_once(' ').unwrap_or((detail, "?"));
        format!(
            "Redis at {at} holds a {kind} at {key}, where redlock keeps a key of its own: \
             delete that key if nothing else uses it"
        )
    } else if err.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("WRONGPASS" | "NOAUTH"))
    {
        format!("Redis at {at} refused the credentials (wrong password or user name)")
    } else if err.code() == Some("NOPERM") {
        // The ACL user lacks a command (or a key): the server's own words name it.
        let detail = err.detail().unwrap_or_default().trim();
        format!(
            "Redis at {at} does not let this user do what redlock needs: {detail}; add \
             that permission to the user's ACL (docs/security.md has the least-privilege \
             line)"
        )
    } else if err
        .to_string()
        .starts_with("Redis server refused to switch database")
    {
        // The redis crate's SELECT in the connection's set-up: its words end in a Debug form.
        format!(
            "Redis at {at} has no such database ({}): the URL's database (its path, as in \
             /2, or db=) must be below the server's `databases` setting, 16 by default",
            err.detail().unwrap_or("refused").trim()
        )
    } else if err.kind() == redis::ErrorKind::Parse {
        // The parser's own words span lines and name byte offsets: say what was found.
        format!(
            "Redis at {at} sent a reply redlock cannot read (not one Redis gives: malformed, \
             of another type, or nested too deeply): is it a Redis server? check the port"
        )
    } else {
        format!("Redis at {at} answered with an error: {err}")
    }
}

/// The longest part of a server's own words a message repeats.
const SAID: usize = 200;

/// A server that answered with an error and closed the connection at once, before any request
/// was its to answer (Redis does so at `maxclients`, and in protected mode): `said` is its line
/// (`ERR max number of clients reached`). `ERR` is worth retrying (a client may leave); any
/// other code (`DENIED`) is the server's configuration.
pub(crate) fn turned_away(
    at: &dyn fmt::Display,
    said: &str,
    source: impl Into<Box<dyn Error + Send + Sync>>,
) -> Failure {
    let said: String = said.trim().chars().take(SAID).collect();
    let cut = if said.chars().count() == SAID {
        "..."
    } else {
        ""
    };
    let said = crate::report::one_line(&said);
    if said.starts_with("ERR ") {
        Failure::Unreachable(Reason::caused_by(
            format!(
                "cannot reach Redis at {at}: it closed the connection at once, saying: {said}{cut}"
            ),
            source,
        ))
    } else {
        Failure::Refused(Reason::caused_by(
            format!("Redis at {at} refused the connection: {said}{cut}"),
            source,
        ))
    }
}

/// A reply larger than redlock ever needs: refused, naming the server.
pub(crate) fn too_large(at: &dyn fmt::Display, err: RedisError) -> Failure {
    Failure::Refused(Reason::caused_by(
        format!(
            "Redis at {at} sent a reply larger than {} MiB, far more than redlock asks for: is \
             it a Redis server? check the port",
            crate::backend::redis::transport::link::MAX_REPLY >> 20
        ),
        err,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn failures_keep_their_cause_and_their_class() {
        let timeout = RedisError::from(io::Error::from(io::ErrorKind::WouldBlock));
        let failure = classify(&"127.0.0.1:1", timeout);
        assert!(matches!(failure, Failure::Unreachable(_)));
        assert_eq!(
            failure.to_string(),
            "no answer from Redis at 127.0.0.1:1 in time"
        );
        let cause = failure.source().expect("a source");
        assert!(cause.downcast_ref::<RedisError>().unwrap().is_timeout());

        let refused = RedisError::from(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert!(matches!(classify(&"h:1", refused), Failure::Unreachable(_)));
        let wrongpass = RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        let failure = classify(&"h:1", wrongpass);
        assert!(matches!(failure, Failure::Refused(_)));
        assert!(failure.to_string().contains("refused the credentials"));

        let noperm = RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm),
            "NOPERM",
            "User redlock has no permissions to run the 'waitaof' command".to_owned(),
        ));
        let failure = classify(&"h:1", noperm);
        assert!(matches!(failure, Failure::Refused(_)) && is_denied(&failure));
        assert_eq!(
            failure.to_string(),
            "Redis at h:1 does not let this user do what redlock needs: User redlock has no \
             permissions to run the 'waitaof' command; add that permission to the user's ACL \
             (docs/security.md has the least-privilege line)"
        );

        let plain = Failure::Refused("no such thing".into());
        assert!(!is_denied(&plain));
        assert!(plain.source().is_none());
        assert_eq!(plain.to_string(), "no such thing");
    }
}
