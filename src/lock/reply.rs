//! Reading the scripts' replies, and writing their arguments: the shapes every script of
//! `single` shares (integers, strings, the compare-and-set answer, the "held another way" reply).

use std::time::Duration;

use redis::Value;

use crate::lock::{Failure, Held};
use crate::transport::endpoint::Endpoint;

/// An acquire's `{3, how the lock is used}`: its holders use it otherwise.
pub(super) fn mismatch(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(3), Value::BulkString(used)] => {
                Some(String::from_utf8_lossy(used).into_owned())
            }
            _ => None,
        },
        _ => None,
    }
}

/// A duration as a Redis argument in whole milliseconds, at least 1 (0 would mean "none").
pub(super) fn ms_arg(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

pub(super) fn integers(value: &Value) -> Option<Vec<i64>> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A script's array reply as strings (integers written out, nil as "").
pub(super) fn strings(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(i) => Some(i.to_string()),
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                Value::Nil => Some(String::new()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

pub(super) fn held(endpoint: &Endpoint, reply: &Value) -> Result<Held, Failure> {
    match reply {
        Value::Int(1) => Ok(Held::Ours),
        Value::Int(0) => Ok(Held::Gone),
        Value::Int(-1) => Ok(Held::Theirs),
        other => Err(unexpected(endpoint, other)),
    }
}

pub(super) fn unexpected(endpoint: &Endpoint, reply: &Value) -> Failure {
    Failure::Refused(format!("unexpected reply from Redis at {endpoint}: {reply:?}").into())
}
