//! The `redlock` binary: a trampoline into the library so tests and doc generators share one code path.
//!
//! The entry point is the C `main`, not std's: std's start-up would also install a stack-overflow
//! handler for the main thread, which parses `/proc/self/maps` and maps an alternate signal stack
//! on every run (about 0.1 ms here, a twentieth of a whole `redlock run`). [`redlock::startup`]
//! does the rest of what std's start-up does that redlock relies on.
#![no_main]

use std::ffi::{c_char, c_int};

#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    redlock::startup();
    // A panic must not unwind into C: it is a bug, reported (by the panic hook) and mapped to
    // the internal-error status, as std's main would have with its own status 101.
    let code = std::panic::catch_unwind(redlock::main).unwrap_or(redlock::exit::INTERNAL);
    // Also flushes stdout, as returning from std's main would.
    std::process::exit(code)
}
