//! Reading the scripts' replies: [`FromReply`], which each script's reply type implements (see
//! `scripts::calls`), and [`Fields`], which reads an array reply field by field.

use std::time::Duration;

use redis::Value;

use crate::backend::redis::transport::endpoint::Endpoint;
use crate::lock::{Failure, Held};

/// A script's reply, decoded; None when the value is not one this script gives.
pub trait FromReply: Sized {
    fn from_reply(value: &Value) -> Option<Self>;
}

/// An array reply, read in order. Lua numbers arrive as integers, strings as bulk strings;
/// each reader takes either where that is unambiguous.
pub struct Fields<'a>(std::slice::Iter<'a, Value>);

impl<'a> Fields<'a> {
    pub fn of(value: &'a Value) -> Option<Self> {
        match value {
            Value::Array(items) => Some(Fields(items.iter())),
            _ => None,
        }
    }

    /// The next field as text (an integer written out).
    pub fn text(&mut self) -> Option<String> {
        match self.0.next()? {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Int(i) => Some(i.to_string()),
            _ => None,
        }
    }

    /// The next field as an integer.
    pub fn int(&mut self) -> Option<i64> {
        i64::from_reply(self.0.next()?)
    }

    /// The next field as a count (a negative one is not).
    pub fn count(&mut self) -> Option<u64> {
        u64::try_from(self.int()?).ok()
    }

    /// The next field as milliseconds; Some(None) for Redis's negative markers (-1 no expiry
    /// or unknown, -2 none).
    pub fn millis(&mut self) -> Option<Option<Duration>> {
        Some(u64::try_from(self.int()?).ok().map(Duration::from_millis))
    }

    /// The next field as it came (a nested array, a nil).
    pub fn value(&mut self) -> Option<&'a Value> {
        self.0.next()
    }

    /// How many fields are left.
    pub fn left(&self) -> usize {
        self.0.len()
    }

    /// Whether every field was read.
    pub fn end(&self) -> bool {
        self.left() == 0
    }
}

/// A compare-and-extend or compare-and-delete: 1 ours, 0 gone, -1 another owner's.
impl FromReply for Held {
    fn from_reply(value: &Value) -> Option<Self> {
        match value {
            Value::Int(1) => Some(Held::Ours),
            Value::Int(0) => Some(Held::Gone),
            Value::Int(-1) => Some(Held::Theirs),
            _ => None,
        }
    }
}

/// A counter.
/// An integer, or its digits where a script keeps it exact (a Lua number would round a
/// fencing counter past 2^53).
impl FromReply for i64 {
    fn from_reply(value: &Value) -> Option<Self> {
        match value {
            Value::Int(i) => Some(*i),
            Value::BulkString(digits) => std::str::from_utf8(digits).ok()?.parse().ok(),
            _ => None,
        }
    }
}

/// Done or not: 1 or 0.
impl FromReply for bool {
    fn from_reply(value: &Value) -> Option<Self> {
        match value {
            Value::Int(1) => Some(true),
            Value::Int(0) => Some(false),
            _ => None,
        }
    }
}

/// Done (1).
impl FromReply for () {
    fn from_reply(value: &Value) -> Option<Self> {
        matches!(value, Value::Int(1)).then_some(())
    }
}

/// A reply of a shape redlock's scripts never give: named with its first 200 characters (a
/// lock's whole state could be kilobytes on one line).
pub(super) fn unexpected(endpoint: &Endpoint, reply: &Value) -> Failure {
    let mut shown = format!("{reply:?}");
    if let Some((cut, _)) = shown.char_indices().nth(UNEXPECTED_SHOWN) {
        shown.truncate(cut);
        shown.push_str("...");
    }
    Failure::Refused(format!("unexpected reply from Redis at {endpoint}: {shown}").into())
}

/// How much of an unexpected reply a message shows.
const UNEXPECTED_SHOWN: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexpected_reply_is_shown_cut() {
        let endpoint = Endpoint::parse("redis://127.0.0.1:6379").unwrap();
        let long = Value::BulkString(vec![b'x'; 10_000]);
        let said = unexpected(&endpoint, &long).to_string();
        assert!(said.len() < 300 && said.ends_with("..."), "{said}");
        let short = unexpected(&endpoint, &Value::Int(7)).to_string();
        assert_eq!(
            short,
            "unexpected reply from Redis at 127.0.0.1:6379: int(7)"
        );
    }

    #[test]
    fn fields_read_integers_and_strings_either_way() {
        let value = Value::Array(vec![
            Value::BulkString(b"busy".to_vec()),
            Value::Int(-2),
            Value::BulkString(b"42".to_vec()),
            Value::Int(7),
        ]);
        let mut f = Fields::of(&value).unwrap();
        assert_eq!(f.text().as_deref(), Some("busy"));
        assert_eq!(f.millis(), Some(None));
        assert_eq!(f.int(), Some(42));
        assert!(!f.end());
        assert_eq!(f.text().as_deref(), Some("7"));
        assert!(f.end());
        assert_eq!(f.int(), None);
        assert!(Fields::of(&Value::Int(1)).is_none());
    }

    #[test]
    fn small_replies_decode_to_their_types() {
        assert_eq!(Held::from_reply(&Value::Int(-1)), Some(Held::Theirs));
        assert_eq!(Held::from_reply(&Value::Int(2)), None);
        assert_eq!(bool::from_reply(&Value::Int(0)), Some(false));
        assert_eq!(<()>::from_reply(&Value::Nil), None);
        assert_eq!(i64::from_reply(&Value::Int(9)), Some(9));
    }
}
