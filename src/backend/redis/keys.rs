//! The Redis keys of one lock, all under the `{name}` hash tag so that every script's keys
//! live in one Cluster slot.

/// The Redis keys of one lock; all share the `{name}` hash tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The lock itself: the holder's token, with the lease as its expiry.
    pub lock: String,
    /// The fencing counter, advanced by every acquisition.
    pub fence: String,
    /// The list a release pushes to wake one waiter; a waiter's own list adds `:TOKEN` (where
    /// a fair waiter is woken, and an interrupt's marker lands).
    pub wake: String,
    /// The fair queue: waiter tokens scored by arrival (server time, µs).
    pub queue: String,
    /// When each fair waiter's queue entry lapses unless refreshed (server time, ms).
    pub alive: String,
    /// The holder's details (hash: token, host, pid, argv, started), with the lock's expiry.
    pub holder: String,
    /// When a run last succeeded (server time, ms), kept for `--min-interval`.
    pub done: String,
    /// Set for a week when a run warned that the server's eviction policy can evict this lock,
    /// so the warning is not repeated on every run (cron mails every line).
    pub warned: String,
    /// While the lock is a sorted set: how its holders use it, `limit N` or `shared`, so a
    /// client that asks for something else is told; expires with the set.
    pub kind: String,
    /// While the lock is a sorted set: each holder's details (hash: token → JSON of host, pid,
    /// argv, started); expires with the set.
    pub holders: String,
    /// Every waiter turned away lately, any kind of lock: token → until when it counts as
    /// waiting (server time, ms), refreshed by each of its attempts, for `redlock status`.
    pub waiting: String,
    /// The record of runs: the most recent runs, newest first (a list of JSON objects, at most
    /// `record::RUNS_KEPT`), kept `record::RECORD_TTL` after the last run's acquire.
    pub runs: String,
    /// The record's counters (a hash: runs by outcome, busy, skipped) and its last success;
    /// kept as long.
    pub counts: String,
}

impl Keys {
    /// The SCAN pattern that matches the lock keys under `prefix` (`PREFIX{*}`), with the glob
    /// characters of the prefix escaped.
    pub fn scan_pattern(prefix: &str) -> String {
        let mut pattern = String::with_capacity(prefix.len() + 3);
        for c in prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str("{*}");
        pattern
    }

    /// The lock name of the Redis key `key` (`PREFIX{NAME}`), or None for keys that are not
    /// lock keys (a lock's other keys, `PREFIX{NAME}:fence` and the like, included).
    pub fn name_of(prefix: &str, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        let name = key
            .strip_prefix(prefix)?
            .strip_prefix('{')?
            .strip_suffix('}')?;
        (!name.is_empty() && !name.starts_with('}')).then(|| name.to_owned())
    }

    pub fn new(prefix: &str, name: &str) -> Self {
        let lock = format!("{prefix}{{{name}}}");
        Self {
            fence: format!("{lock}:fence"),
            wake: format!("{lock}:wake"),
            queue: format!("{lock}:queue"),
            alive: format!("{lock}:alive"),
            holder: format!("{lock}:holder"),
            done: format!("{lock}:done"),
            warned: format!("{lock}:warned"),
            kind: format!("{lock}:kind"),
            holders: format!("{lock}:holders"),
            waiting: format!("{lock}:waiting"),
            runs: format!("{lock}:runs"),
            counts: format!("{lock}:counts"),
            lock,
        }
    }

    /// The Redis types redlock keeps at the key of `field` (one of this struct's fields), as
    /// `TYPE` names them, separated by spaces: what a script's guard (scripts/guard.lua)
    /// compares a key with when a command failed on it.
    pub fn kept_as(field: &str) -> &'static str {
        match field {
            // One holder's token, or a sorted set of several holders.
            "lock" => "string zset",
            "fence" | "done" | "warned" | "kind" => "string",
            "wake" | "runs" => "list",
            "queue" | "alive" | "waiting" => "zset",
            "holder" | "holders" | "counts" => "hash",
            other => panic!("no Redis type is kept for the key field {other:?}"),
        }
    }

    /// The lists a waiter blocks on: its own first (where an interrupt's marker, and a fair
    /// waiter's turn, arrive), then the shared one that a release wakes a plain waiter on.
    pub fn wake_lists(&self, token: &str, fair: bool) -> Vec<String> {
        let own = format!("{}:{token}", self.wake);
        if fair {
            vec![own]
        } else {
            vec![own, self.wake.clone()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_hash_tag() {
        let keys = Keys::new("redlock:", "backup");
        assert_eq!(keys.lock, "redlock:{backup}");
        assert_eq!(keys.fence, "redlock:{backup}:fence");
        let odd = Keys::new("p:", "a}b {c}");
        assert_eq!(odd.lock, "p:{a}b {c}}");
        assert!(odd.fence.starts_with(&odd.lock));
    }

    #[test]
    fn only_lock_keys_are_locks() {
        let p = "redlock:";
        assert_eq!(Keys::name_of(p, b"redlock:{a}"), Some("a".into()));
        assert_eq!(Keys::name_of(p, b"redlock:{a}b}"), Some("a}b".into()));
        for other in [
            &b"redlock:{a}:fence"[..],
            b"redlock:{a}:wake",
            b"redlock:{a}:wake:0f4c",
            b"redlock:{a}:holder",
            b"redlock:{a}:done",
            b"redlock:{a}:runs",
            b"redlock:{a}:counts",
            b"redlock:{}",
            b"other:{a}",
            b"redlock:{\xff}",
        ] {
            assert_eq!(Keys::name_of(p, other), None, "{other:?}");
        }
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(Keys::scan_pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\{*}");
        assert_eq!(Keys::scan_pattern("redlock:"), "redlock:{*}");
    }
}
