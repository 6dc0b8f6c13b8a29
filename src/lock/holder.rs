//! Who holds a lock, as stored beside it (host, pid, command line, start time), and what the
//! admin commands read or break: a lock's state and a forced release's result.

use std::time::Duration;

use crate::lock::Keys;

/// Who holds (or is taking) a lock, as stored beside it for `redlock status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holder {
    pub host: String,
    pub pid: u32,
    /// The command line, shell-quoted.
    pub command: String,
    /// Unix seconds, by the holder's clock.
    pub started: u64,
}

impl Holder {
    /// This process, about to run `argv`.
    pub fn current(argv: &[std::ffi::OsString]) -> Self {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let command = argv
            .iter()
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            host,
            pid: std::process::id(),
            command,
            started,
        }
    }
}

/// `word` as the shell would need it: bare when safe, else in single quotes.
pub(crate) fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A lock's state as `redlock status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockInfo {
    pub keys: Keys,
    /// The fencing counter (0 when never taken).
    pub fence: i64,
    /// The holder's token and remaining lease (None when no expiry), when held.
    pub held: Option<(String, Option<Duration>)>,
    /// The holder's details, when held by a redlock that stored them.
    pub holder: Option<Holder>,
    /// How long ago a run last succeeded, and how long that record still holds off new runs.
    pub done: Option<(Duration, Option<Duration>)>,
    /// Live `--fair` waiters, and how long the oldest of them has waited (None: nobody waits).
    pub queue: Option<(u64, Duration)>,
}

/// What a forced release removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Forced {
    /// The lock was free; only its `--fair` queue was cleared, of `cleared` waiters. The fencing
    /// counter as it is.
    Free { fence: i64, cleared: u64 },
    /// The lock holds `token`, not the one expected; nothing changed.
    Other { token: String, fence: i64 },
    /// Removed the lock holding `token`; the fencing counter is now `fence`.
    Removed {
        token: String,
        fence: i64,
        holder: Option<Holder>,
    },
}

/// A holder from [host, pid, command line, start time]; None when not recorded.
pub(super) fn holder_from(items: &[String]) -> Option<Holder> {
    match items {
        [host, pid, command, started, ..] if !host.is_empty() => Some(Holder {
            host: host.clone(),
            pid: pid.parse().unwrap_or(0),
            command: command.clone(),
            started: started.parse().unwrap_or(0),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("./backup.sh"), "./backup.sh");
        assert_eq!(shell_quote("--out=/tmp/x,y"), "--out=/tmp/x,y");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }
}
