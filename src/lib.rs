//! redlock: run a command under a Redis lock so only one copy runs at a time, anywhere.
//!
//! The layers, top to bottom (each folder's `mod.rs` says what it owns and what it may use;
//! imports only point down):
//!
//! - [`cli`]: the command line (clap), `--help`, the man page and completions; parses, then
//!   hands plain options to `run` or `admin`.
//! - [`run`] and [`admin`]: `redlock run` (acquire, supervise, release) and the admin
//!   subcommands (status, list, release).
//! - `process` and [`lease`]: the command's process group, signals, terminal and guard; the
//!   renewal thread and the lease arithmetic.
//! - [`lock`]: the lock protocol (Lua scripts, keys, one server or a quorum).
//! - [`transport`]: Redis URLs, connections with deadlines, Sentinel, Cluster redirects.
//! - [`report`] (diagnostics, JSON events, metrics) and [`exit`] (the exit statuses and how a
//!   run ended) are used by every layer.

pub mod admin;
pub mod cli;
pub mod error;
pub mod exit;
pub mod lease;
pub mod lock;
pub mod process;
pub mod report;
pub mod run;
pub mod transport;

pub use cli::main;

/// What std's runtime sets up before `main` that redlock relies on, for the binary's own entry
/// point (src/main.rs): file descriptors 0-2 open, a closed one reopened on `/dev/null` (so no
/// socket or lock file can become "stdout"), and SIGPIPE ignored (a write to a closed pipe is an
/// error to report, not death; the command gets the default back, see `signals::RESET_IN_CHILD`).
pub fn startup() {
    use nix::libc;
    for fd in 0..3 {
        // SAFETY: fcntl(F_GETFD) only asks; open returns the lowest free descriptor, the one
        // found closed, since 0..fd are open by then.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
            {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
    // SAFETY: sets a disposition; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}
