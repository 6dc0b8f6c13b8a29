//! The fencing counter's key when it holds something redlock did not write (a word, a hash):
//! the scripts read a word as 0 and fail when they advance it, after a lock was taken or
//! removed; a hash fails their first read of it, which may come before or after that. An
//! acquire's guard gives the lock back (guard.lua) and names a key of another kind
//! (FOREIGNKEY); a word, and what a forced release did, are said here. This finds out what is there, on the failure path only, so that a
//! message can say so; nothing here writes to the key. Fencing tokens must never go back, so
//! the key is left for a person to delete: the next token then carries on from the server's
//! clock (`fence.lua`), above every token handed out before, as after a counter that was lost.

use std::time::{Duration, Instant};

/// What a fencing token promises, as the man page, `--help` and the docs say it, written once (a
/// macro, for `concat!`; the docs test holds the pages to it). It holds because a token is the
/// larger of the counter + 1 and the server's clock in microseconds (`fence.lua`): while the
/// counter lives it carries the order, and when it is lost (a restart without persistence,
/// FLUSHALL, a failover to a replica that missed it) the clock does.
#[macro_export]
macro_rules! fencing_guarantee {
    () => {
        "larger than every token given out before for the lock's name, also after a restart \
         that lost the data or a FLUSHALL, unless a server's clock stepped back by more than \
         the time since the last acquisition"
    };
}

use redis::Value;

use crate::backend::redis::single::SingleRedis;
use crate::backend::redis::transport::Connection;
use crate::lock::{Failure, Forced, Foreign};

impl SingleRedis {
    /// What the fencing counter's key holds, when redlock did not write it; None when it is a
    /// counter, or absent.
    pub fn foreign_fence(&mut self, timeout: Duration) -> Result<Option<Foreign>, Failure> {
        let key = self.keys.fence.clone();
        let found = foreign(&mut self.conn, &key, Instant::now() + timeout)?;
        Ok(found.map(|found| foreign_at(&key, &found)))
    }

    /// After an acquire failed with `failure`: the failure to report when a counter that is a
    /// string but no number stopped it (INCRBY's error; the script's guard has given the lock
    /// back: guard.lua). A key of another kind there the guard names itself (FOREIGNKEY). Only
    /// an error the server answered with can be the counter's: a refusal redlock made of what
    /// it found (a plain-text server given as rediss://, a replica, a Sentinel) is not asked
    /// about, or the question would connect again and spend a second whole time limit.
    pub(super) fn stopped_at_the_counter(
        &mut self,
        failure: &Failure,
        timeout: Duration,
    ) -> Option<Failure> {
        let code = std::error::Error::source(failure)
            .and_then(|e| e.downcast_ref::<redis::RedisError>())
            .and_then(|e| e.code());
        if matches!(code, None | Some("FOREIGNKEY")) {
            return None;
        }
        let found = self.foreign_fence(timeout).ok()??;
        Some(Failure::Refused(
            format!("{}; not running the command ({})", found.said, found.remedy).into(),
        ))
    }

    /// After a forced release (of `expected`, if given) failed with an error: what it did,
    /// when a counter redlock did not write stopped it, before it removed the lock (a counter
    /// that is no string fails its first read) or after (one that is not a number fails its
    /// advance). The counter is left as it is.
    pub(super) fn forced_past_the_counter(
        &mut self,
        expected: Option<&str>,
        timeout: Duration,
    ) -> Result<Option<Forced>, Failure> {
        let Some(foreign) = self.foreign_fence(timeout)? else {
            return Ok(None);
        };
        let deadline = Instant::now() + timeout;
        let held = still_held(&mut self.conn, &self.keys.lock, expected, deadline)?;
        Ok(Some(Forced::Unfenced {
            foreign,
            token: expected.map(str::to_owned),
            gone: !held,
        }))
    }
}

/// What the fencing counter at `key` holds, when it is not a counter redlock wrote (a string
/// of a whole number below the largest 64-bit integer): `a Redis hash`, `a string that is not
/// a whole number`, a whole number past 64 bits, that integer. None when it is one, or absent.
pub(crate) fn foreign(
    conn: &mut Connection,
    key: &str,
    deadline: Instant,
) -> Result<Option<String>, Failure> {
    let kind = conn.request(deadline, |node| {
        redis::cmd("TYPE").arg(key).query::<String>(&mut node.conn)
    })?;
    match kind.as_str() {
        "none" => return Ok(None),
        "string" => {}
        other => return Ok(Some(format!("a Redis {other}"))),
    }
    let value = conn.request(deadline, |node| {
        redis::cmd("GET").arg(key).query::<Value>(&mut node.conn)
    })?;
    Ok(match value {
        // Past it INCRBY fails: no token can follow (redlock's clock-based tokens reach it in
        // some 290,000 years, so it was set by hand).
        Value::BulkString(bytes) if bytes == i64::MAX.to_string().as_bytes() => Some(format!(
            "{} (the largest 64-bit integer, which no token can follow)",
            i64::MAX
        )),
        Value::BulkString(bytes) if whole_number(&bytes) => None,
        // Gone between the two requests: nothing wrong with it any more.
        Value::Nil => None,
        // Digits past 2^63 - 1, which Redis's integers do not hold (INCRBY fails on them).
        Value::BulkString(bytes) if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) => {
            Some(format!(
                "a whole number of {} digits, past the largest 64-bit integer",
                bytes.len()
            ))
        }
        _ => Some("a string that is not a whole number".to_owned()),
    })
}

/// Whether the lock at `lock` is still held (by `expected`, when given: as the one holder or
/// one of several), after a forced release stopped at the counter: it may have removed the
/// lock first, or stopped before.
pub(crate) fn still_held(
    conn: &mut Connection,
    lock: &str,
    expected: Option<&str>,
    deadline: Instant,
) -> Result<bool, Failure> {
    let kind = conn.request(deadline, |node| {
        redis::cmd("TYPE").arg(lock).query::<String>(&mut node.conn)
    })?;
    let Some(token) = expected else {
        return Ok(kind != "none");
    };
    let cmd = match kind.as_str() {
        "none" => return Ok(false),
        "string" => redis::cmd("GET").arg(lock).clone(),
        "zset" => redis::cmd("ZSCORE").arg(lock).arg(token).clone(),
        _ => return Ok(true),
    };
    let found = conn.request(deadline, |node| cmd.query::<Value>(&mut node.conn))?;
    Ok(match (kind.as_str(), found) {
        ("string", Value::BulkString(held)) => held == token.as_bytes(),
        ("string", _) | (_, Value::Nil) => false,
        _ => true,
    })
}

/// Whether `bytes` is a whole number as INCRBY takes it (and writes it).
/// A whole number as Redis's INCRBY reads one: a 64-bit integer written as Redis writes it, so
/// no `+`, no leading zeros, no `-0` (Rust's parse takes all three, Redis refuses them).
fn whole_number(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes)
        .is_ok_and(|text| text.parse::<i64>().is_ok_and(|n| n.to_string() == text))
}

/// The counter at `key` holding `found`, as messages say it.
pub(crate) fn foreign_at(key: &str, found: &str) -> Foreign {
    Foreign {
        said: format!("the fencing counter {key} holds {found}, which redlock did not write"),
        remedy: format!(
            "delete it with `redis-cli DEL {}`, and the next holder's token carries on from the \
             server's clock",
            crate::report::shell_quote(key)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_numbers_are_counters() {
        for good in ["0", "1796127497258668", "-3"] {
            assert!(whole_number(good.as_bytes()), "{good}");
        }
        let bad = [
            "",
            "notanumber",
            "1e5",
            "0x10",
            " 12",
            "1.5",
            "\u{ff}",
            "+5",
            "0099",
            "-0",
        ];
        for bad in bad {
            assert!(!whole_number(bad.as_bytes()), "{bad}");
        }
    }
}
