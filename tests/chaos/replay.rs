//! Replays, step by step, a history the semaphore phase met under network faults: a holder's
//! acquire ran but its reply was lost, another holder came in, and the retry (same token) must
//! get back the fencing token it was first given, not the counter's current value (the other
//! holder's token: the same token handed out twice).

use std::time::Duration;

use redlock::boundary::{AcquireMany, AcquireReply, Attempt, Holder, Kept, Keys, Kind, eval};

use crate::common::RedisServer;

/// `acquire_many` for `token` as `--limit 3` with a 10 s ttl: the fencing token, if let in. Its
/// KEYS and ARGV are the client's own definition's (src/backend/redis/scripts/calls.rs).
fn acquire(redis: &RedisServer, token: &str) -> Option<i64> {
    let holder = Holder {
        host: "host".into(),
        pid: 1,
        command: "cmd".into(),
        started: 0,
    };
    let script = AcquireMany {
        attempt: Attempt {
            token,
            ttl: Duration::from_secs(10),
            min_interval: None,
            holder: &holder,
            entry: Duration::from_secs(5),
            linger: Duration::from_millis(100),
            lifetime: Duration::from_secs(20),
            fair: false,
            waited: false,
            record: Kept::DEFAULT,
            run: r#"{"token":"replay""#,
        },
        held_as: Kind::Limit(3),
    };
    let keys = Keys::new("redlock:", "replay");
    match eval(&mut redis.conn(), &keys, &script).expect("acquire_many") {
        Some(AcquireReply::Acquired { fence, .. }) => Some(fence),
        Some(_) => None,
        None => panic!("acquire_many gave a reply it does not give"),
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
