//! The eviction-policy preflight: a lock key has an expiry, and any `maxmemory-policy` but
//! `noeviction` may evict it under memory pressure. The question rides in the same round trip as
//! the first acquire on each connection (see `SingleRedis::with_preflight`); this says what the
//! answer means.
//!
//! The warning is for people, and cron mails every line a job prints: a run warns once a week
//! per lock (a `:warned` key with a week's expiry records it, fleet-wide), and otherwise says it
//! only with -v. `redlock status` says it every time.

use std::time::Duration;

use redis::Value;

/// Whether and how loudly to check the eviction policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preflight {
    Off,
    /// A warning once a week per lock, -v lines otherwise (`run`).
    Weekly,
    /// A warning every time (`status`).
    Always,
}

/// How long a warning about the eviction policy holds off the next one, per lock.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(7 * 24 * 3600);

/// The question: `CONFIG GET maxmemory-policy`.
pub(crate) fn question() -> redis::Cmd {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory-policy");
    cmd
}

/// The `maxmemory-policy` a `CONFIG GET maxmemory-policy` reply names, if any.
pub(crate) fn policy(config: Option<&Value>) -> Option<String> {
    let bulk = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    match config {
        Some(Value::Array(items)) => items.get(1).and_then(bulk),
        Some(Value::Map(pairs)) => pairs.first().and_then(|(_, v)| bulk(v)),
        _ => None,
    }
}

/// Whether `policy` can evict keys with an expiry, as lock keys have.
pub(crate) fn evicting(policy: &str) -> bool {
    policy != "noeviction"
}

/// The one-line warning about an evicting `policy` at `addr`.
pub(crate) fn warning(addr: &str, policy: &str) -> String {
    format!(
        "warning: Redis at {addr} has maxmemory-policy {policy}: under memory pressure it can \
         evict lock keys (volatile-* policies evict exactly keys with an expiry, as locks have); \
         use noeviction"
    )
}

/// Say what the preflight found: a warning (at the default level when `loud`, the first run in
/// a week, else only with -v) for an evicting policy; a -v line when CONFIG is refused (renamed
/// or disabled on managed services, or not allowed to this ACL user).
pub(crate) fn report(addr: &str, policy: Option<&str>, loud: bool) {
    match policy {
        Some(policy) if !evicting(policy) => {}
        Some(policy) => crate::report!(
            if loud { 0 } else { 1 },
            EvictionPolicy { "policy" => policy },
            "{}",
            warning(addr, policy)
        ),
        None => crate::report!(
            1,
            PreflightSkipped {},
            "could not read maxmemory-policy from Redis at {addr} (CONFIG refused or renamed); not checked"
        ),
    }
}
