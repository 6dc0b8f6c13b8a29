//! The eviction-policy preflight: a lock key has an expiry, and any `maxmemory-policy` but
//! `noeviction` may evict it under memory pressure. The question rides in the same round trip as
//! the first acquire on each connection (see `SingleRedis::with_preflight`); this says what the
//! answer means.

use redis::Value;

/// Say what a `CONFIG GET maxmemory-policy` reply means for the lock: a warning when keys
/// with an expiry (lock keys) can be evicted; nothing but a -v line when CONFIG is refused
/// (renamed or disabled on managed services, or not allowed to this ACL user).
pub(crate) fn preflight_report(addr: &str, config: Option<Value>) {
    let policy = match &config {
        Some(Value::Array(items)) => items.get(1).and_then(|v| match v {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }),
        Some(Value::Map(pairs)) => pairs.first().and_then(|(_, v)| match v {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }),
        _ => None,
    };
    match policy.as_deref() {
        Some("noeviction") => {}
        Some(policy) => crate::report!(
            0,
            "eviction_policy" { "policy" => policy },
            "warning: Redis at {addr} has maxmemory-policy {policy}: under memory pressure it can \
             evict lock keys (volatile-* policies evict exactly keys with an expiry, as locks have); \
             use noeviction"
        ),
        None => crate::report!(
            1,
            "preflight_skipped" {},
            "could not read maxmemory-policy from Redis at {addr} (CONFIG refused or renamed); not checked"
        ),
    }
}
