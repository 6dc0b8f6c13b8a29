//! The lock's Lua scripts, one `.lua` file each under `scripts/` (each file opens with what
//! KEYS and ARGV it takes and what it returns), and how they are called: EVALSHA with the SHA1
//! hashed once per process, EVAL when the server's script cache lost it.
//!
//! The helper files (`clock.lua`, `waiters.lua`, `holders.lua`, `acquire_helpers.lua`) are not scripts of
//! their own: they define Lua functions, and are put in front of the scripts that call them.

use std::sync::OnceLock;

/// A Lua script and its SHA1 for EVALSHA, hashed once per process.
pub(crate) struct Lua {
    pub body: &'static str,
    sha: OnceLock<String>,
}

impl Lua {
    const fn new(body: &'static str) -> Self {
        Self {
            body,
            sha: OnceLock::new(),
        }
    }

    pub fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| redis::Script::new(self.body).get_hash().to_owned())
    }
}

/// A script's text: the helper files it calls, then its own file.
macro_rules! script {
    ($($file:literal),+) => {
        Lua::new(concat!($(include_str!(concat!("scripts/", $file, ".lua"))),+))
    };
}

/// Take the lock if free, advance the fencing counter, record the holder.
pub(crate) static ACQUIRE: Lua =
    script!("clock", "waiters", "holders", "acquire_helpers", "acquire");

/// ACQUIRE for `--fair`: only the head of the waiters' queue may take the lock.
pub(crate) static ACQUIRE_FAIR: Lua = script!(
    "clock",
    "waiters",
    "holders",
    "acquire_helpers",
    "acquire_fair"
);

/// Take a place among several holders: a semaphore's slot (`--limit N`) or a shared hold
/// (`--shared`).
pub(crate) static ACQUIRE_MANY: Lua = script!(
    "clock",
    "waiters",
    "holders",
    "acquire_helpers",
    "acquire_many"
);

/// Extend the lease while the key still holds our token.
pub(crate) static EXTEND: Lua = script!("extend");

/// Extend our place among several holders while we still have it.
pub(crate) static EXTEND_MANY: Lua = script!("clock", "holders", "extend_many");

/// Delete the key while it holds our token, and wake one waiter.
pub(crate) static RELEASE: Lua = script!("clock", "waiters", "release");

/// Give up our place among several holders, and wake a waiter the place may let in.
pub(crate) static RELEASE_MANY: Lua = script!("clock", "waiters", "holders", "release_many");

/// A waiter gives up: leave the fair queue, pass on a wake-up it may have taken.
pub(crate) static LEAVE: Lua = script!("clock", "waiters", "leave");

/// Cut a waiter's BLPOP short with a marker on its own wake list.
pub(crate) static INTERRUPT: Lua = script!("interrupt");

/// Break-glass release: delete the lock whoever holds it, fence it, wake one waiter.
pub(crate) static FORCE_RELEASE: Lua = script!("clock", "waiters", "holders", "force_release");

/// Undo a quorum's partial acquire, waking nobody.
pub(crate) static UNDO: Lua = script!("undo");

/// Read the fencing counter (a quorum's read phase).
pub(crate) static FENCE_READ: Lua = script!("fence_read");

/// Raise the fencing counter to at least a value (a quorum's write-back phase).
pub(crate) static FENCE_RAISE: Lua = script!("fence_raise");

/// Read a lock's state without changing anything.
pub(crate) static INSPECT: Lua = script!("clock", "holders", "inspect");

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every script file says what it takes and returns before its first line of code (the
    /// helper files, which are not called on their own, say what they define).
    #[test]
    fn every_script_file_opens_with_what_it_takes_and_returns() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lock/scripts");
        let helpers = [
            "clock.lua",
            "waiters.lua",
            "holders.lua",
            "acquire_helpers.lua",
        ];
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let header: String = text
                .lines()
                .take_while(|l| l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(!header.is_empty(), "{name} opens without a comment");
            assert!(text.ends_with('\n'), "{name} must end with a newline");
            if !helpers.contains(&name.as_str()) {
                for word in ["KEYS", "ARGV", "Returns"] {
                    assert!(
                        header.contains(word),
                        "{name}'s header does not say its {word}"
                    );
                }
            }
            seen += 1;
        }
        assert!(
            seen > helpers.len(),
            "no scripts found in {}",
            dir.display()
        );
    }
}
