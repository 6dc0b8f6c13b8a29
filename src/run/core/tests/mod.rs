//! Every transition of the supervisor's core, one test each: a state (reached by the inputs
//! before it), an input at a moment of a fake clock, and the actions expected, exactly.
//!
//! The lease in every row: ttl 3 s, taken by a request sent at 0. The drift allowance is 32 ms
//! and the kill margin 70 ms, so the lease ends at 2968 ms and the kill line is at 2898 ms;
//! `--kill-after` is 1 s, so the grace after a lost lease is 750 ms (a quarter of the ttl) and
//! the stop line is at 2148 ms.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal::{self, SIGTERM};

use super::*;

mod command;
mod lease;

pub(super) const KILL_LINE: u64 = 2898;
pub(super) const STOP_LINE: u64 = 2148;

/// Moments are counted from a boot long ago, so that none saturates at 0.
pub(super) fn at(ms: u64) -> Moment {
    Moment::from_boot(Duration::from_secs(1000) + Duration::from_millis(ms))
}

pub(super) fn config() -> Config {
    Config {
        ttl: Duration::from_secs(3),
        kill_after: Duration::from_secs(1),
        stop_signal: SIGTERM.into(),
        max_runtime: None,
    }
}

pub(super) fn sig(signal: Signal) -> Signo {
    signal.into()
}

pub(super) fn note(note: Note) -> Action {
    Action::Note(note)
}

pub(super) fn signal(signal: Signal) -> Action {
    Action::Signal(signal.into())
}

pub(super) fn exited(code: i32) -> ExitStatus {
    ExitStatus::from_raw(code << 8)
}

pub(super) fn killed_by(signal: Signal) -> ExitStatus {
    ExitStatus::from_raw(signal as i32)
}

/// A core made with `config` at 0, after `inputs` (each at its moment).
pub(super) fn given_with(config: Config, inputs: &[(u64, Input)]) -> Core {
    let (mut core, _) = Core::new(config, at(0), at(0));
    for (ms, input) in inputs {
        core.step(input.clone(), at(*ms));
    }
    core
}

pub(super) fn given(inputs: &[(u64, Input)]) -> Core {
    given_with(config(), inputs)
}

/// The transition's actions, and the core after it.
pub(super) fn when(mut core: Core, ms: u64, input: Input) -> (Vec<Action>, Core) {
    let actions = core.step(input, at(ms));
    (actions, core)
}
