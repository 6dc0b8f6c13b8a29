//! Output: diagnostics on stderr, with the `redlock: ` prefix or one JSON object per line
//! (`--log-format json`) at the verbosity chosen by -v / -q, and results on stdout.
//!
//! Neither may fail a run: a diagnostic that cannot be written (stderr closed, or a pipe whose
//! reader left) is dropped, and a reader of stdout that left early (`| head`) is no error.
//!
//! Every line is an [`Event`] with a stable name (`acquired`, `released`, ...; docs/operating.md
//! lists them all, a test holds the two together), so the JSON form is an interface: rename
//! nothing, add fields freely.
//!
//! Used by every layer; uses only std, `exit` (the metrics file's outcome label) and `file` (its
//! path, read and written as any file a user names is).

mod event;
pub mod json;
pub mod metrics;

pub use event::Event;

use std::io::{self, Write};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI8, Ordering};

use json::Object;

static LEVEL: AtomicI8 = AtomicI8::new(0);
static JSON: AtomicBool = AtomicBool::new(false);
static KEY: OnceLock<String> = OnceLock::new();

/// -1 quiet (errors only), 0 default (warnings), 1+ verbose.
pub fn set_level(level: i8) {
    LEVEL.store(level, Ordering::Relaxed);
}

/// Write JSON lines instead of text from now on.
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// The lock name added to every JSON line as `"key"`.
pub fn set_key(key: &str) {
    let _ = KEY.set(key.to_owned());
}

/// Whether messages of `level` are shown (-1 errors, 0 warnings, 1 lifecycle, 2 renewals).
pub fn enabled(level: i8) -> bool {
    LEVEL.load(Ordering::Relaxed) >= level
}

/// An error: always shown.
pub fn error(message: impl std::fmt::Display) {
    emit(-1, Event::Error, &[], format_args!("{message}"));
}

/// `message` kept on one line: control characters (a newline in a lock name or a URL) are shown
/// escaped, so every diagnostic stays one `redlock: ` line.
pub fn one_line(message: &str) -> String {
    if !message.chars().any(char::is_control) {
        return message.to_owned();
    }
    message
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// An error with its own event: always shown.
pub fn error_event(event: Event, message: impl std::fmt::Display) {
    emit(-1, event, &[], format_args!("{message}"));
}

/// A value for a JSON field.
pub trait Field {
    fn json(&self) -> String;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn json(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
int_field!(i32, i64, u32, u64, u128, usize);

impl Field for &str {
    fn json(&self) -> String {
        json::string(self)
    }
}

impl Field for String {
    fn json(&self) -> String {
        json::string(self)
    }
}

/// Print one event (callers check [`enabled`] first; the [`report!`](crate::report!) macro does).
pub fn emit(level: i8, event: Event, fields: &[(&str, String)], text: std::fmt::Arguments) {
    if !JSON.load(Ordering::Relaxed) {
        line(&format!("redlock: {}", one_line(&text.to_string())));
        return;
    }
    let name = match level {
        ..0 => "error",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let mut obj = Object::new()
        .str("ts", &ts)
        .str("level", name)
        .str("event", event.name());
    if let Some(key) = KEY.get() {
        obj = obj.str("key", key);
    }
    for (field, value) in fields {
        obj = obj.raw(field, value);
    }
    let text = text.to_string();
    let msg = text.strip_prefix("warning: ").unwrap_or(&text);
    line(&obj.str("msg", msg).finish());
}

/// Write one line to stderr, in one write so that lines of concurrent runs do not interleave;
/// an error is dropped (unlike `eprintln!`, which panics), there being nowhere to report it.
fn line(text: &str) {
    let _ = io::stderr()
        .lock()
        .write_all(format!("{text}\n").as_bytes());
}

/// `word` as the shell would need it: bare when safe, else in single quotes.
pub(crate) fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A duration as a person reads it, rounded to what matters at its size: none (`0s`),
/// milliseconds below a second (`167ms`), tenths of a second below a minute (`1.5s`, `30s`), whole seconds above
/// (`2m 30s`, `1h 5m`). humantime's own form keeps every nanosecond (`166ms 666us 666ns`).
pub fn duration(d: std::time::Duration) -> String {
    use std::time::Duration;
    if d.is_zero() {
        return "0s".to_owned();
    }
    let ms = (d.as_nanos() + 500_000) / 1_000_000;
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths < 600 {
        return match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
    }
    let secs = u64::try_from((ms + 500) / 1000).unwrap_or(u64::MAX);
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// Write command output to stdout. A reader that went away (`redlock list | head -1`) is not
/// an error: what it did not read, it did not want.
pub fn stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(err).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}

/// A line shown at `level` and above, with its [`Event`] and JSON fields:
/// `report!(1, Acquired { "fence" => fence }, "acquired ...")`, or `report!(0, "text")`
/// (event `message`).
#[macro_export]
macro_rules! report {
    ($level:expr, $event:ident { $($name:literal => $value:expr),* $(,)? }, $($arg:tt)*) => {
        if $crate::report::enabled($level) {
            $crate::report::emit(
                $level,
                $crate::report::Event::$event,
                &[$(($name, $crate::report::Field::json(&$value))),*],
                format_args!($($arg)*),
            );
        }
    };
    ($level:expr, $($arg:tt)*) => {
        $crate::report!($level, Message {}, $($arg)*)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_rounded_as_people_read_them() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        for (d, shown) in [
            (Duration::ZERO, "0s"),
            (Duration::from_micros(400), "0ms"),
            (Duration::from_nanos(166_666_666), "167ms"),
            (Duration::from_micros(999_400), "999ms"),
            (Duration::from_micros(999_600), "1s"),
            (ms(1500), "1.5s"),
            (ms(1666), "1.7s"),
            (ms(29_873), "29.9s"),
            (ms(30_000), "30s"),
            (ms(59_960), "1m"),
            (ms(150_400), "2m 30s"),
            (Duration::from_secs(3900), "1h 5m"),
        ] {
            assert_eq!(duration(d), shown, "{d:?}");
        }
        // No overflow at the far end.
        assert!(duration(Duration::MAX).starts_with("584542046090years"));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(one_line("lock 'nightly'"), "lock 'nightly'");
        assert_eq!(one_line("lock 'a\nb\r\t'"), "lock 'a\\nb\\r\\t'");
        assert_eq!(one_line("é {ü} \u{1b}[31m"), "é {ü} \\u{1b}[31m");
    }
}
