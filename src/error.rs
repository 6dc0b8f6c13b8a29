//! Failure classes: which exit status an error maps to, found by walking the anyhow chain.

use std::fmt;

use crate::exit::{self, Outcome};

/// What kind of failure an error is; decides redlock's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Bad input: exit 64.
    Usage,
    /// Redis could not be used before the lock was taken: exit 69.
    Unavailable,
}

/// An error message tagged with its class. Created at the point of failure; outer layers add
/// context with anyhow as usual.
#[derive(Debug)]
pub struct Classified {
    pub class: Class,
    pub message: String,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {}

/// An error of class `class` with message `message`.
pub fn classified(class: Class, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Classified {
        class,
        message: message.into(),
    })
}

/// How a run that failed with `err` ended: the first class found in its chain, else internal
/// error.
pub fn outcome(err: &anyhow::Error) -> Outcome {
    let class = err
        .chain()
        .find_map(|cause| cause.downcast_ref::<Classified>().map(|c| c.class));
    match class {
        Some(Class::Usage) => Outcome::Usage,
        Some(Class::Unavailable) => Outcome::Unavailable,
        None => Outcome::Internal,
    }
}

/// The exit status for `err` (see [`outcome`]).
pub fn exit_code(err: &anyhow::Error) -> i32 {
    outcome(err).status(exit::CONFLICT as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn class_survives_context() {
        let err = Err::<(), _>(classified(Class::Unavailable, "connection refused"))
            .context("cannot reach redis at 127.0.0.1:1")
            .unwrap_err();
        assert_eq!(exit_code(&err), exit::UNAVAILABLE);
        assert_eq!(
            format!("{err:#}"),
            "cannot reach redis at 127.0.0.1:1: connection refused"
        );
    }

    #[test]
    fn unclassified_is_internal() {
        assert_eq!(exit_code(&anyhow::anyhow!("boom")), exit::INTERNAL);
        assert_eq!(exit_code(&classified(Class::Usage, "bad")), exit::USAGE);
    }
}
