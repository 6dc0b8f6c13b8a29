//! Diagnostics on stderr: the `redlock: ` prefix and the verbosity level chosen by -v / -q.

use std::sync::atomic::{AtomicI8, Ordering};

static LEVEL: AtomicI8 = AtomicI8::new(0);

/// -1 quiet (errors only), 0 default (warnings), 1+ verbose.
pub fn set_level(level: i8) {
    LEVEL.store(level, Ordering::Relaxed);
}

/// Whether messages of `level` are shown (0 warnings, 1 lifecycle, 2 renewals).
pub fn enabled(level: i8) -> bool {
    LEVEL.load(Ordering::Relaxed) >= level
}

/// An error: always shown.
pub fn error(message: impl std::fmt::Display) {
    eprintln!("redlock: {}", one_line(&message.to_string()));
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

/// A line shown at `level` and above: `say!(1, "acquired ...")`.
#[macro_export]
macro_rules! say {
    ($level:expr, $($arg:tt)*) => {
        if $crate::say::enabled($level) {
            eprintln!("redlock: {}", $crate::say::one_line(&format!($($arg)*)));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(one_line("lock 'nightly'"), "lock 'nightly'");
        assert_eq!(one_line("lock 'a\nb\r\t'"), "lock 'a\\nb\\r\\t'");
        assert_eq!(one_line("é {ü} \u{1b}[31m"), "é {ü} \\u{1b}[31m");
    }
}
