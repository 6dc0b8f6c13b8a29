//! redlock: run a command under a lock on Redis, etcd, PostgreSQL or ZooKeeper, so only one copy
//! runs at a time, anywhere.
//!
//! The layers, top to bottom (each folder's `mod.rs` says what it owns and what it may use;
//! imports only point down):
//!
//! - [`cli`]: the command line (clap), `--help`, the man page and completions; parses, opens
//!   the backend the URLs name, then hands plain options and it to `run` or `admin`.
//! - [`run`] and [`admin`]: `redlock run` (acquire, supervise, release) and the admin
//!   subcommands (status, list, history, check, release).
//! - `process` and [`lease`]: the command's process group, signals, terminal and watchdog; the
//!   renewal thread and the lease arithmetic.
//! - [`lock`]: the boundary, in the lock's own words: the traits a run's lease drives and the
//!   admin commands read through, and what they answer. Nothing above it names a backend.
//! - [`backend`]: what implements that boundary, chosen from the URL's scheme in one place:
//!   Redis (one server, the master its Sentinels name, a Cluster, or a quorum of independent
//!   masters: Lua scripts over connections with deadlines), an etcd cluster, or a PostgreSQL
//!   database; and what they share (URLs, TLS).
//! - [`report`] (diagnostics, JSON events, metrics), [`exit`] (the exit statuses and how a
//!   run ended) and [`clock`] (CLOCK_BOOTTIME, the lease's clock) are used by every layer;
//!   `error` (the failure classes that pick an exit status) by the layers that fail a run;
//!   `file` (the files a user names, regular ones only, read to a cap) by `cli` and `report`.

pub(crate) mod admin;
pub(crate) mod backend;
pub mod cli;
pub mod clock;
pub(crate) mod error;
pub mod exit;
pub(crate) mod file;
pub mod lease;
pub(crate) mod lock;
pub(crate) mod process;
pub(crate) mod report;
pub(crate) mod run;
/// Redis URLs and connections, for the tests that parse a URL as redlock does.
#[doc(hidden)]
pub use backend::redis::transport;

pub use cli::main;

/// The in-process conformance suite: the cases every backend passes beside the model of the
/// lock, and the model-based property test. Public only because the integration tests, which
/// start the real servers, reach nothing else of the library; not an interface.
#[doc(hidden)]
pub mod conformance;

/// The typed boundary of a few Lua scripts and PostgreSQL's plain statements, for the chaos
/// suite's deterministic replay (a test binary of its own, which reaches only what the library
/// makes public), the fast paths' property tests (tests/integration/fastpaths.rs) and the
/// durability benchmark (examples/renew_cost.rs): they build the scripts' arguments with the
/// structs the client uses and run the statements it runs, so a new argument breaks their
/// build too. Not an interface.
#[doc(hidden)]
pub mod boundary {
    pub use crate::backend::postgres::plain::{PLAIN_RELEASE, PLAIN_TAKE, PLAIN_WAIT};
    pub use crate::backend::redis::Keys;
    pub use crate::backend::redis::record::Kept;
    pub use crate::backend::redis::scripts::calls::{
        Acquire, AcquireMany, AcquireReply, Attempt, Extend, Take,
    };
    pub use crate::backend::redis::scripts::{eval, send};
    pub use crate::lock::record::{Lost, RECORD_TTL, RUNS_KEPT};
    pub use crate::lock::{Holder, Kind};
}
