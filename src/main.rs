//! The `redlock` binary: a trampoline into the library so tests and doc generators share one code path.
//!
//! std's runtime sets up what redlock relies on before `main`: file descriptors 0-2 that were
//! closed are reopened on `/dev/null` (so no socket or lock file can become "stdout"), and
//! SIGPIPE is ignored (a write to a closed pipe is an error to report, not death; std gives the
//! command the default back).

fn main() {
    // A panic is a bug: the panic hook has reported it; exit with the internal-error status
    // rather than std's 101.
    let code = std::panic::catch_unwind(redlock::main).unwrap_or(redlock::exit::INTERNAL);
    // Flushes stdout, as returning from main would.
    std::process::exit(code)
}
