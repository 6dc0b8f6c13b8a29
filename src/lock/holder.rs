//! Who holds a lock, as stored beside it (host, pid, command line, start time), and what the
//! admin commands read or break: a lock's state (one holder or several, and its waiters) and a
//! forced release's result, as every backend reports them.

use std::time::Duration;

use crate::lock::record::Summary;
use crate::lock::{Foreign, HeldAs, Kind};

/// Who holds (or is taking) a lock, as stored beside it for `redlock status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// The command line, shell-quoted, cut to [`MAX_COMMAND`] bytes (see [`cut_command`]).
    pub command: String,
    /// Unix seconds, by the holder's clock.
    pub started: u64,
}
/// The most of a command line stored beside a lock, in bytes: a lock's record stays a few KiB
/// however long the command line (up to the kernel's 2 MiB and more), so that `status` and
/// `list` of a semaphore's holders stay far below the 4 MiB a reply may have.
pub(crate) const MAX_COMMAND: usize = 1024;

/// `line` cut to its first [`MAX_COMMAND`] bytes (on a character boundary), followed by
/// `… (cut from N bytes)`; a line no longer than that as it is.
pub(crate) fn cut_command(line: String) -> String {
    if line.len() <= MAX_COMMAND {
        return line;
    }
    let mut end = MAX_COMMAND;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut from {} bytes)", &line[..end], line.len())
}

impl Holder {
    /// This process, about to run `argv` (its command line cut by [`cut_command`]).
    pub fn current(argv: &[std::ffi::OsString]) -> Self {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let command = argv
            .iter()
            .map(|a| crate::report::shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ");
        let command = cut_command(command);
        Self {
            host,
            pid: std::process::id(),
            command,
            started,
        }
    }
}

/// What a backend found under a lock's name ([`crate::lock::Node::inspect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inspected {
    /// A lock redlock made (held or free).
    Lock(Box<LockInfo>),
    /// At the lock's key `stored_key` (as its server names it), something redlock did not
    /// make: `what`, as the backend says it (`a hash`, in the server's own words).
    Foreign { stored_key: String, what: String },
}

/// A lock's fencing counter, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fence {
    /// Every token given out later is larger. 0 when never taken, or the server's own counter
    /// where it keeps one for every lock (a revision of the whole store).
    Counter(i64),
    /// It holds what redlock did not write, so no token can be read from it: what is there,
    /// and what to do, in the backend's words.
    Unreadable(Foreign),
}

/// A lock's state as `redlock status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The lock's own key (or row), as its server names it.
    pub stored_key: String,
    /// The fencing counter, as read.
    pub fence: Fence,
    /// The one exclusive holder's token and remaining lease (None when no expiry), when so held.
    pub held: Option<(String, Option<Duration>)>,
    /// The exclusive holder's details, when held by a redlock that stored them.
    pub holder: Option<Holder>,
    /// When held by several at once (a semaphore's slots, shared holders): how, and who.
    pub several: Option<Several>,
    /// How long ago a run last succeeded, and how long that record still holds off new runs.
    pub done: Option<(Duration, Option<Duration>)>,
    /// Live waiters in the queue (`--fair` ones, and exclusive ones behind shared holders),
    /// and how long the oldest of them has waited (None: nobody is queued).
    pub queue: Option<(u64, Duration)>,
    /// Waiters of any kind turned away lately and not yet gone (the registry of waiters).
    pub waiting: u64,
    /// The record of its runs: the last one, the last success, the counters.
    pub runs: Summary,
}

/// A lock held by several at once: a semaphore's slots (`--limit N`) or shared holders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Several {
    /// How they hold it, as recorded.
    pub held_as: HeldAs,
    /// When the last lease ends (None: no expiry).
    pub ttl: Option<Duration>,
    /// The live holders, the soonest lease end first.
    pub places: Vec<Place>,
}

/// One of several holders of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub token: String,
    /// The lease left, by the server's clock.
    pub lease: Duration,
    /// Its details, when stored.
    pub holder: Option<Holder>,
    /// How long it has held its place, by the server's clock (None: not recorded).
    pub age: Option<Duration>,
}

impl Several {
    /// How the holders hold it; None when not recorded (or not understood).
    pub fn kind(&self) -> Option<Kind> {
        self.held_as.kind().filter(|k| *k != Kind::Exclusive)
    }
}

impl LockInfo {
    /// Held by anyone: one exclusive holder or several.
    pub fn is_held(&self) -> bool {
        self.held.is_some() || self.several.is_some()
    }

    /// Who holds it, as one string a quorum's nodes can agree on: the exclusive holder's token,
    /// or the tokens of several holders, sorted, joined by spaces.
    pub fn owner(&self) -> Option<String> {
        if let Some((token, _)) = &self.held {
            return Some(token.clone());
        }
        let several = self.several.as_ref()?;
        let mut tokens: Vec<&str> = several.places.iter().map(|p| p.token.as_str()).collect();
        tokens.sort_unstable();
        Some(tokens.join(" "))
    }

    /// The waiters to show: the registry's count, and never fewer than are queued (a client
    /// too old to register still queues).
    pub fn waiters(&self) -> u64 {
        self.waiting.max(self.queue.map_or(0, |(n, _)| n))
    }
}

/// What a forced release removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forced {
    /// The lock was free; only its `--fair` queue was cleared, of `cleared` waiters. The fencing
    /// counter as it is.
    Free { fence: i64, cleared: u64 },
    /// The lock holds `token`, not the one expected; nothing changed.
    Other { token: String, fence: i64 },
    /// Held by several (`held_as`: how), none with the token expected; nothing changed.
    NotAHolder {
        held_as: HeldAs,
        holders: u64,
        fence: i64,
    },
    /// Held by several and no token named one of them; nothing changed.
    Several {
        held_as: HeldAs,
        holders: u64,
        fence: i64,
    },
    /// Removed the holder of `token` (the lock, or its place among several); the fencing
    /// counter is now `fence`.
    Removed {
        token: String,
        fence: i64,
        holder: Option<Holder>,
        /// How it was held: alone, or as one of several.
        held_as: HeldAs,
        /// Holders left (0 for an exclusive lock).
        left: u64,
    },
    /// The lock key held `what` (as the backend says it), which redlock did not make: deleted (the
    /// fencing counter advanced to `fence`), or, when a token was expected, left alone (it
    /// holds none).
    Foreign {
        what: String,
        fence: i64,
        removed: bool,
    },
    /// The fencing counter holds something redlock did not write: left alone, never advanced.
    /// `gone`: the lock is free now (removed, or free already), or with `token` (the one
    /// expected) that holder is not among its holders any more; else it is still there.
    Unfenced {
        foreign: Foreign,
        token: Option<String>,
        gone: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_command_line_is_cut_on_a_character_boundary_and_says_so() {
        let short = "x".repeat(MAX_COMMAND);
        assert_eq!(cut_command(short.clone()), short);
        let long = "c".repeat(1_680_000);
        assert_eq!(
            cut_command(long),
            format!("{}… (cut from 1680000 bytes)", "c".repeat(MAX_COMMAND))
        );
        // 'é' is two bytes: the 1024th byte is the first half of one, so the cut is before it.
        let accents = format!("x{}", "é".repeat(MAX_COMMAND));
        let cut = cut_command(accents);
        assert_eq!(
            cut,
            format!(
                "x{}… (cut from 2049 bytes)",
                "é".repeat(MAX_COMMAND / 2 - 1)
            )
        );
        assert!(cut.len() < MAX_COMMAND + 30);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(crate::report::shell_quote("./backup.sh"), "./backup.sh");
        assert_eq!(
            crate::report::shell_quote("--out=/tmp/x,y"),
            "--out=/tmp/x,y"
        );
        assert_eq!(crate::report::shell_quote(""), "''");
        assert_eq!(crate::report::shell_quote("a b"), "'a b'");
        assert_eq!(crate::report::shell_quote("it's"), r"'it'\''s'");
        assert_eq!(crate::report::shell_quote("$HOME"), "'$HOME'");
    }
}
