//! Replays, step by step, a history the semaphore phase met under network faults: a holder's
//! acquire ran but its reply was lost, another holder came in, and the retry (same token) must
//! get back the fencing token it was first given, not the counter's current value (the other
//! holder's token: the same token handed out twice).

use crate::common::RedisServer;

const SCRIPT: &str = concat!(
    include_str!("../../src/lock/scripts/clock.lua"),
    include_str!("../../src/lock/scripts/waiters.lua"),
    include_str!("../../src/lock/scripts/holders.lua"),
    include_str!("../../src/lock/scripts/acquire_helpers.lua"),
    include_str!("../../src/lock/scripts/acquire_many.lua"),
);

/// `acquire_many` for `token` as `--limit 3` with a 10 s ttl: the fencing token, if let in.
fn acquire(redis: &RedisServer, token: &str) -> Option<i64> {
    let lock = "redlock:{replay}";
    let mut cmd = redis::cmd("EVAL");
    // KEYS and ARGV as src/lock/keys.rs and the script's header list them.
    cmd.arg(SCRIPT).arg(10).arg(lock);
    for k in [
        "fence", "wake", "queue", "alive", "holder", "done", "kind", "holders", "waiting",
    ] {
        cmd.arg(format!("{lock}:{k}"));
    }
    cmd.arg(token)
        .arg(
            [
                "10000", "0", "host", "1", "cmd", "0", "5000", "100", "20000",
            ]
            .as_slice(),
        )
        .arg(["limit 3", "3", "0", "0"].as_slice());
    let reply: Vec<i64> = cmd.query(&mut redis.conn()).expect("acquire_many");
    match reply[..] {
        [1, fence] => Some(fence),
        _ => None,
    }
}

/// Problems found (none when a retried acquire keeps its token).
pub fn retried_acquire() -> Vec<String> {
    let redis = RedisServer::start();
    let first = acquire(&redis, "a");
    let other = acquire(&redis, "b");
    let retried = acquire(&redis, "a");
    if first.is_none() || other.is_none() || retried != first {
        return vec![format!(
            "replay: holder a got token {first:?}, holder b {other:?}, then a's retry (its reply \
             lost) {retried:?}: a retry must keep its own token"
        )];
    }
    Vec::new()
}
