//! Signal intake: a signal-hook thread turns the signals redlock forwards into supervisor events.

use std::io;

use signal_hook::consts::{SIGHUP, SIGINT, SIGPIPE, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
use signal_hook::iterator::Signals;

/// The signals forwarded to the command's process group.
pub const FORWARDED: [i32; 7] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH];

/// Signals whose disposition in redlock must not reach the command: the forwarded ones
/// (handled here) and SIGPIPE (ignored by the Rust runtime; an ignored signal survives exec).
pub const RESET_IN_CHILD: [i32; 8] = [
    SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH, SIGPIPE,
];

/// Whether `signal` asks redlock (and the command) to end.
pub fn is_terminating(signal: i32) -> bool {
    matches!(signal, SIGHUP | SIGINT | SIGQUIT | SIGTERM)
}

/// Catch the forwarded signals from now on and hand each to `deliver`, from a thread of its own.
/// Handlers (never SIG_IGN) are reset to the default by exec, so the command starts clean.
pub fn start(deliver: impl Fn(i32) + Send + 'static) -> io::Result<()> {
    let mut signals = Signals::new(FORWARDED)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                deliver(signal);
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminating_signals() {
        assert!(
            is_terminating(SIGTERM)
                && is_terminating(SIGINT)
                && is_terminating(SIGHUP)
                && is_terminating(SIGQUIT)
        );
        assert!(!is_terminating(SIGUSR1) && !is_terminating(SIGWINCH) && !is_terminating(SIGUSR2));
    }
}
