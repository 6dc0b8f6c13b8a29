//! Why a request to the lock's server failed: [`Failure`], whose class the layers above decide
//! on (retry within a wait, or give up with 69), with the message they show and the error it comes from (the
//! backend client's, or an I/O error) as its `source()`. Each backend makes them from its own
//! errors, told apart by their kind, never by their text.

use std::error::Error;
use std::fmt;

/// Why a request failed.
#[derive(Debug)]
pub enum Failure {
    /// No answer: connection refused, dropped, or timed out. Worth retrying.
    Unreachable(Reason),
    /// The server answered, with an error (credentials, permissions, a replica, a missing
    /// table, ...) or with what redlock cannot use (a reply too large). No wait makes it right.
    Refused(Reason),
    /// The lock was taken, but fewer replicas than `--min-replicas` acknowledged it in time (or
    /// `--fsync`'s append-only files did not have it), so it was given back. Worth retrying:
    /// replicas catch up, and a promoted master gets new ones.
    Unacknowledged(Reason),
}

/// What a [`Failure`] says, and the error beneath it, if any.
#[derive(Debug)]
pub struct Reason {
    message: String,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl Reason {
    /// `message`, caused by `source`.
    pub fn caused_by(message: String, source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self {
            message,
            source: Some(source.into()),
        }
    }
}

impl From<String> for Reason {
    fn from(message: String) -> Self {
        Self {
            message,
            source: None,
        }
    }
}

impl From<&str> for Reason {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

impl Failure {
    /// The same failure, its message `wrap` applied to (the source kept).
    pub fn reworded(self, wrap: impl FnOnce(&str) -> String) -> Self {
        let reword = |r: Reason| Reason {
            message: wrap(&r.message),
            source: r.source,
        };
        match self {
            Failure::Unreachable(r) => Failure::Unreachable(reword(r)),
            Failure::Refused(r) => Failure::Refused(reword(r)),
            Failure::Unacknowledged(r) => Failure::Unacknowledged(reword(r)),
        }
    }

    fn reason(&self) -> &Reason {
        match self {
            Failure::Unreachable(r) | Failure::Refused(r) | Failure::Unacknowledged(r) => r,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason().message)
    }
}

impl Error for Failure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        let source = self.reason().source.as_deref()?;
        Some(source)
    }
}
