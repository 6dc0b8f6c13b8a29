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
    eprintln!("redlock: {message}");
}

/// A line shown at `level` and above: `say!(1, "acquired ...")`.
#[macro_export]
macro_rules! say {
    ($level:expr, $($arg:tt)*) => {
        if $crate::say::enabled($level) {
            eprintln!("redlock: {}", format_args!($($arg)*));
        }
    };
}
