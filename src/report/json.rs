//! A tiny JSON writer for the few flat objects redlock prints (status, list, logs, errors).

use std::fmt::Write;

/// `text` as a JSON string literal, quotes included.
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON object built field by field, in insertion order.
#[derive(Debug, Default, Clone)]
pub struct Object {
    body: String,
}

impl Object {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `name` with an already-encoded JSON value.
    pub fn raw(mut self, name: &str, json: &str) -> Self {
        if !self.body.is_empty() {
            self.body.push(',');
        }
        self.body.push_str(&string(name));
        self.body.push(':');
        self.body.push_str(json);
        self
    }

    pub fn str(self, name: &str, value: &str) -> Self {
        self.raw(name, &string(value))
    }

    pub fn int(self, name: &str, value: impl Into<i128>) -> Self {
        self.raw(name, &value.into().to_string())
    }

    /// An integer, or null.
    pub fn opt_int(self, name: &str, value: Option<impl Into<i128>>) -> Self {
        match value {
            Some(v) => self.int(name, v),
            None => self.raw(name, "null"),
        }
    }

    pub fn finish(&self) -> String {
        format!("{{{}}}", self.body)
    }
}

/// A JSON array of already-encoded values.
pub fn array<I: IntoIterator<Item = String>>(items: I) -> String {
    format!("[{}]", items.into_iter().collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_json_requires() {
        assert_eq!(string("a\"b\\c\nd\u{1}é"), r#""a\"b\\c\nd\u0001é""#);
        assert_eq!(
            Object::new()
                .str("k", "v")
                .int("n", -3)
                .opt_int("x", None::<i64>)
                .finish(),
            r#"{"k":"v","n":-3,"x":null}"#
        );
        assert_eq!(array(["1".to_owned(), "{}".to_owned()]), "[1,{}]");
    }
}
