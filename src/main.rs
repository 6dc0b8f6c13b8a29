//! The `redlock` binary: a trampoline into the library so tests and doc generators share one code path.

fn main() {
    std::process::exit(redlock::main());
}
