//! The clap definitions of every subcommand and option, with their environment variables and
//! help texts, and the checks that turn `run`'s into [`Options`] (the value parsers are in
//! `parse`, the URLs' reading in `conn`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nix::sys::signal::Signal;

pub use crate::cli::monitor::{CheckArgs, HistoryArgs};
use crate::cli::parse::{
    parse_duration, parse_key, parse_positive, parse_prefix, parse_stop_signal, parse_ttl,
    parse_wait,
};
use crate::error::{Class, classified};
use crate::exit;
use crate::lease::Wait;
use crate::lock::Kind;
use crate::report::metrics;
use crate::run::Options;

/// Default grace between the stop signal and SIGKILL (after a stop request or `--max-runtime`;
/// after the loss of the lease, see [`crate::lease_grace_rule`]).
pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);
/// The longest lock name accepted, in bytes.
pub const MAX_KEY_LEN: usize = 1024;
/// The longest `--prefix` accepted, in bytes: with the longest lock name, a key every backend
/// keeps (PostgreSQL's index refuses a row past about 2,700 bytes).
pub const MAX_PREFIX_LEN: usize = 256;

/// `--kill-after`'s help: its own words, then the rule the supervisor applies after a lost lease.
const KILL_AFTER_HELP: &str = concat!(
    "Grace between the stop signal and SIGKILL [default: 5s]. ",
    crate::lease_grace_rule!()
);

const ENV_HELP: &str = "\
ENVIRONMENT:
  REDLOCK_URL, REDLOCK_TTL, REDLOCK_WAIT, REDLOCK_FAIR, REDLOCK_PREFIX,
  REDLOCK_KILL_AFTER, REDLOCK_STOP_SIGNAL, REDLOCK_MAX_RUNTIME,
  REDLOCK_CONFLICT_EXIT_CODE, REDLOCK_MIN_INTERVAL, REDLOCK_SPLAY,
  REDLOCK_MIN_REPLICAS, REDLOCK_FSYNC, REDLOCK_METRICS_FILE, REDLOCK_LOG_FORMAT,
  REDLOCK_PASSWORD_FILE, REDLOCK_TLS_CA_CERT, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY
  and REDLOCK_TLS_INSECURE give defaults for the options of the same name; a flag
  wins over its variable. REDLOCK_PASSWORD holds the password, Redis's, the etcd
  or ZooKeeper user's or PostgreSQL's (below --password-file, above a password
  in the URL).
  On PostgreSQL, libpq's PGUSER, PGPASSWORD and PGPASSFILE (~/.pgpass) count
  after those.
  The command sees REDLOCK_KEY, REDLOCK_TOKEN, REDLOCK_FENCING_TOKEN and
  REDLOCK_URL (the servers locked on, every --url, without passwords), and no
  credentials of redlock's: REDLOCK_PASSWORD is removed (libpq's PGPASSWORD stays,
  for the command's own psql).";

pub(crate) const ADMIN_ENV_HELP: &str = "\
ENVIRONMENT:
  REDLOCK_URL, REDLOCK_PREFIX, REDLOCK_LOG_FORMAT, REDLOCK_PASSWORD_FILE,
  REDLOCK_TLS_CA_CERT, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY and
  REDLOCK_TLS_INSECURE give defaults for the options of the same name; a
  flag wins over its variable. REDLOCK_PASSWORD holds the password, Redis's,
  the etcd or ZooKeeper user's or PostgreSQL's. On PostgreSQL, libpq's PGUSER,
  PGPASSWORD and PGPASSFILE (~/.pgpass) count after those.";

/// The variables redlock gives the command, and what each holds.
pub const COMMAND_ENV: [(&str, &str); 3] = [
    ("REDLOCK_KEY", "the lock name as given"),
    (
        "REDLOCK_TOKEN",
        "this acquisition's owner token (UUID v4), the value stored in the lock key",
    ),
    (
        "REDLOCK_FENCING_TOKEN",
        concat!(
            "this acquisition's fencing token. On Redis, ",
            crate::fencing_guarantee!(),
            ". It is the larger of the lock's counter + 1 and the server's clock (TIME) in \
             microseconds, an integer of 16 digits. With several --url, it is read from a \
             majority and raised on a majority. On etcd, the create revision of the lock's entry, kept \
             by Raft: larger than every token given out before for the lock's name, unless the \
             revisions are reset (a snapshot restored without --bump-revision, a new cluster). \
             On PostgreSQL, the lock's counter, a bigint the database keeps, raised by one per \
             acquisition in the transaction that takes the lock. On ZooKeeper, the creation \
             zxid of the lock's entry: larger than every token given out before for the lock's \
             name, across leader changes, unless the ensemble is made anew"
        ),
    ),
];

/// The variable that names a PEM file of CA certificates for `rediss://` (rustls-native-certs
/// reads it; redlock checks it first, as it checks the options' files).
pub use crate::backend::tls::SSL_CERT_FILE;

/// Variables redlock reads that are not an option's default.
pub const OTHER_ENV: [(&str, &str); 5] = [
    (
        PASSWORD_ENV,
        "the password (Redis's, the etcd or ZooKeeper user's or PostgreSQL's), for every URL: wins over a password in the URL, loses to --password-file",
    ),
    (
        "PGUSER",
        "for postgres:// URLs that name no user: the user (else this process's user's name), as libpq",
    ),
    (
        "PGPASSWORD",
        "for postgres:// URLs: the password when neither --password-file, REDLOCK_PASSWORD nor the URL gives one",
    ),
    (
        "PGPASSFILE",
        "for postgres:// URLs: the password file to look in after PGPASSWORD (default ~/.pgpass; passed over if others may read it)",
    ),
    (
        SSL_CERT_FILE,
        "for rediss:// and etcds:// URLs, and postgres:// with sslrootcert=system: a PEM file of CA certificates to trust instead of the system store (--tls-ca-cert wins)",
    ),
];

/// Run a command under a Redis, etcd, PostgreSQL or ZooKeeper lock: one copy at a time across
/// every machine.
#[derive(Debug, Parser)]
#[command(name = "redlock", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run COMMAND while holding the lock NAME; release it when COMMAND ends.
    #[command(
        after_help = format!("{}\n\n{ENV_HELP}", exit::help_table(exit::RUN)),
        override_usage = "redlock run [OPTIONS] --key <NAME> -- <COMMAND> [ARGS]..."
    )]
    Run(RunArgs),
    /// Show whether the lock NAME is free or held, by whom (each holder of a semaphore or shared
    /// lock), for how long, its fencing counter and its waiters.
    #[command(after_help = format!("{}\n\n{ADMIN_ENV_HELP}", exit::help_table(exit::STATUS)))]
    Status(StatusArgs),
    /// List the locks under a prefix, held ones with their holders and waiters (on Redis by SCAN,
    /// never KEYS).
    #[command(after_help = format!("{}\n\n{ADMIN_ENV_HELP}", exit::help_table(exit::LIST)))]
    List(ListArgs),
    /// Show the recent runs of the lock NAME, newest first: host, start, duration, how each
    /// ended (a holder that vanished too), fencing token.
    #[command(after_help = format!("{}\n\n{}\n\n{ADMIN_ENV_HELP}", crate::cli::monitor::HISTORY_HELP, exit::help_table(exit::HISTORY)))]
    History(HistoryArgs),
    /// A dead man's switch for monitoring: did a run of the lock NAME succeed, on any host,
    /// within --max-age? One line starting OK, WARNING, CRITICAL or UNKNOWN.
    #[command(after_help = format!("{}\n\n{}\n\n{ADMIN_ENV_HELP}", crate::cli::monitor::CHECK_HELP, exit::help_table(exit::CHECK)))]
    Check(CheckArgs),
    /// Break-glass: delete the lock NAME whoever holds it (or one of its several holders), and
    /// advance its fencing counter.
    #[command(after_help = format!("The holder's renewals then fail and it stops its command (exit {}); the fencing\ncounter moves past the holder's token, so a resource that checks it refuses the\nold holder's writes. One waiter is woken, as by a normal release.\n\nHeld by several (a semaphore, shared holders), one holder is removed: the one\n--token names, or the only one. Several and no --token: nothing is removed (exit\n{}); `redlock status` shows their tokens.\n\n{}\n\n{ADMIN_ENV_HELP}", exit::LOCK_LOST, exit::USAGE, exit::help_table(exit::RELEASE)))]
    Release(ReleaseArgs),
    /// Make the tables a PostgreSQL database keeps its locks in (idempotent), or print the SQL
    /// that makes them for a DBA to apply (--print). Redis, etcd and ZooKeeper need none.
    #[command(after_help = format!("{}\n\n{ADMIN_ENV_HELP}", exit::help_table(exit::INIT)))]
    Init(InitArgs),

    /// Print a shell completion script to stdout (no server needed).
    #[command(after_help = crate::cli::docs::COMPLETIONS_HELP)]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },

    /// Print the man page, redlock(1), to stdout as roff (no server needed).
    #[command(after_help = crate::cli::docs::MAN_HELP)]
    Man,
}

/// Where the locks live: shared by every subcommand.
#[derive(Debug, Args)]
pub struct ConnArgs {
    /// Where to lock: Redis, redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock,
    /// redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...];
    /// or an etcd cluster, etcd://[user[:pass]@]host[:port][,host[:port]...] (its members; port
    /// 2379 when left out) or etcds://...; or a PostgreSQL database,
    /// postgres://[user[:pass]@]host[:port]/DB[?schema=NAME] (libpq's URI form, its
    /// parameters too; `redlock init` makes the tables); or a ZooKeeper ensemble,
    /// zk://[user[:pass]@]host[:port][,host[:port]...][/CHROOT] (port 2181 when left out) or
    /// zks://... (TLS; needs --tls-ca-cert).
    /// Give a Redis URL several times (or several URLs separated by whitespace in REDLOCK_URL)
    /// for a quorum of independent masters.
    #[arg(
        long,
        env = "REDLOCK_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true,
        value_name = "URL"
    )]
    // Checked by `backend::open`, not by clap: clap's errors would echo a password.
    pub url: Vec<String>,

    /// Whether `url` came from REDLOCK_URL (split on whitespace) rather than from --url (one
    /// URL each, whatever it holds); set after parsing.
    #[arg(skip)]
    pub url_from_env: bool,

    /// Prefix of the lock's keys: on Redis the lock is PREFIX{NAME}, on etcd PREFIX{NAME}/...,
    /// on PostgreSQL the row PREFIXNAME of the locks table, on ZooKeeper the node
    /// /CHROOT/PREFIX{NAME} (a '/' in the prefix makes folders).
    #[arg(long, env = "REDLOCK_PREFIX", hide_env_values = true, default_value = "redlock:", value_parser = parse_prefix)]
    pub prefix: String,

    /// Read the password (Redis's, the etcd or ZooKeeper user's or PostgreSQL's) from FILE (one trailing newline
    /// dropped); it wins over REDLOCK_PASSWORD and over a password in the URL.
    #[arg(
        long,
        env = "REDLOCK_PASSWORD_FILE",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub password_file: Option<PathBuf>,

    /// For rediss://, etcds://, zks:// and postgres:// with sslmode=verify-ca or verify-full (or
    /// require): trust the CA certificates in this PEM file instead of the system store (on
    /// postgres://, instead of ~/.postgresql/root.crt; the URL's sslrootcert wins).
    #[arg(
        long,
        env = "REDLOCK_TLS_CA_CERT",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub tls_ca_cert: Option<PathBuf>,

    /// For rediss://, etcds:// and zks:// with mutual TLS: the client certificate (PEM; needs
    /// --tls-key).
    #[arg(
        long,
        env = "REDLOCK_TLS_CERT",
        hide_env_values = true,
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// For rediss://, etcds:// and zks:// with mutual TLS: the client's private key (PEM; needs
    /// --tls-cert).
    #[arg(
        long,
        env = "REDLOCK_TLS_KEY",
        hide_env_values = true,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// TESTING ONLY: do not verify the server's TLS certificate, so anyone on the network path
    /// can pose as the server. Warns on every use.
    // Refused beside --tls-ca-cert after parsing (`Conn::tls`), not by clap's `conflicts_with`:
    // clap counts the variable as given whatever it holds, REDLOCK_TLS_INSECURE=false too.
    #[arg(long, env = "REDLOCK_TLS_INSECURE", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new())]
    pub tls_insecure: bool,
}

/// The variable that can hold the Redis password (there is deliberately no flag for it).
pub const PASSWORD_ENV: &str = "REDLOCK_PASSWORD";

/// How redlock talks on stderr: shared by every subcommand.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Say more on stderr (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Say nothing on stderr but errors.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Diagnostics as text lines, or as one JSON object per line (stable event names).
    #[arg(
        long,
        env = "REDLOCK_LOG_FORMAT",
        hide_env_values = true,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,
}

/// The shape of diagnostics on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl OutputArgs {
    /// How much output on stderr: -1 quiet, 0 default, 1+ verbose.
    pub fn verbosity(&self) -> i8 {
        if self.quiet {
            -1
        } else {
            self.verbose.min(3) as i8
        }
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Name of the lock.
    #[arg(long, value_name = "NAME", value_parser = parse_key)]
    pub key: String,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Print the SQL instead of running it (nothing is connected to).
    #[arg(long)]
    pub print: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Print a JSON array of the locks instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Name of the lock.
    #[arg(long, value_name = "NAME", value_parser = parse_key)]
    pub key: String,

    /// Required: delete the lock even though another process holds it.
    #[arg(long)]
    pub force: bool,

    /// Only if the lock still holds this owner token (as shown by status): never break the
    /// lock of a holder that took it since you looked. Of several holders, the one to remove.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,

    /// Print one JSON object saying what was done instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Name of the lock (not read from the environment: REDLOCK_KEY is what the command sees).
    #[arg(long, value_name = "NAME", value_parser = parse_key)]
    pub key: String,

    /// Lease length; renewed every ttl/3 while the command runs.
    #[arg(long, env = "REDLOCK_TTL", hide_env_values = true, default_value = "30s", value_name = "DURATION", value_parser = parse_ttl, allow_hyphen_values = true)]
    pub ttl: Duration,

    /// How long to wait for a busy lock, an unreachable server, or the replicas --min-replicas
    /// asks for (retried with back-off): 0 tries once, `forever` waits without limit.
    #[arg(long, env = "REDLOCK_WAIT", hide_env_values = true, default_value = "0", value_name = "DURATION|forever", value_parser = parse_wait, allow_hyphen_values = true)]
    pub wait: Wait,

    /// Waiters take the lock first come, first served (use it on every client of the lock).
    #[arg(long, env = "REDLOCK_FAIR", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new())]
    pub fair: bool,

    /// A semaphore: at most N holders of the lock at once, across every host, each with its own
    /// token and lease. Every client of the lock must give the same N (not read from the
    /// environment, like --key).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "shared", allow_hyphen_values = true)]
    pub limit: Option<u32>,

    /// Hold the lock shared: any number of --shared holders at once, but never beside a holder
    /// without it (an exclusive one), and not ahead of one that waits (not read from the
    /// environment, like --key).
    #[arg(long)]
    pub shared: bool,

    /// Exit status when the lock was not acquired (or the run was skipped by --min-interval).
    #[arg(long, env = "REDLOCK_CONFLICT_EXIT_CODE", hide_env_values = true, default_value_t = exit::CONFLICT as u8, value_name = "N", allow_hyphen_values = true)]
    pub conflict_exit_code: u8,

    /// Skip the run (conflict status) if a run of this lock succeeded this recently, on any host,
    /// with or without --min-interval.
    #[arg(long, env = "REDLOCK_MIN_INTERVAL", hide_env_values = true, value_name = "DURATION", value_parser = parse_positive, allow_hyphen_values = true)]
    pub min_interval: Option<Duration>,

    /// Before the first attempt, wait a random time in [0, DURATION), so that a fleet started by
    /// the same crontab line spreads out (and another host can win). A signal ends it as it ends
    /// a wait for the lock; --min-interval is checked after it.
    #[arg(long, env = "REDLOCK_SPLAY", hide_env_values = true, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub splay: Option<Duration>,

    /// Signal that asks the command to stop (lock lost, --max-runtime): a name or number.
    #[arg(long, env = "REDLOCK_STOP_SIGNAL", hide_env_values = true, default_value = "TERM", value_name = "SIG", value_parser = parse_stop_signal, allow_hyphen_values = true)]
    pub stop_signal: Signal,

    #[arg(help = KILL_AFTER_HELP, long, env = "REDLOCK_KILL_AFTER", hide_env_values = true, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub kill_after: Option<Duration>,

    /// Redis only, refused elsewhere (etcd and ZooKeeper commit to a majority of their members
    /// before they answer; on PostgreSQL a synchronous standby does this): after taking the lock and after
    /// every renewal, wait for N replicas to acknowledge it
    /// (WAIT, up to ttl/10, at most 1s). Too few after taking it: release it, do not run the
    /// command, exit 69 (with --wait: try again until the wait ends). A renewal too few acknowledged does not extend the lease: if none is
    /// acknowledged before it runs low, the command is stopped (76). With several --url: N
    /// replicas of each node. 0: do not wait.
    #[arg(
        long,
        env = "REDLOCK_MIN_REPLICAS",
        hide_env_values = true,
        default_value_t = 0,
        value_name = "N",
        allow_hyphen_values = true
    )]
    pub min_replicas: u32,

    /// Redis only, refused elsewhere (etcd, ZooKeeper and PostgreSQL fsync each commit before
    /// they answer): after taking the lock and after every renewal, wait until the write is fsynced to the
    /// master's append-only file, and with --min-replicas N to N replicas' (WAITAOF, within the
    /// same time as --min-replicas). Not fsynced after taking it: release it, do not run the
    /// command, exit 69 (with --wait: try again until the wait ends); a renewal not fsynced does not extend the lease. Needs appendonly yes
    /// and Redis 7.2+ or Valkey 8: refused with 69 otherwise, before the command runs.
    #[arg(long, env = "REDLOCK_FSYNC", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new())]
    pub fsync: bool,

    /// Stop the command after this long and exit 124.
    #[arg(long, env = "REDLOCK_MAX_RUNTIME", hide_env_values = true, value_name = "DURATION", value_parser = parse_positive, allow_hyphen_values = true)]
    pub max_runtime: Option<Duration>,

    /// Write Prometheus metrics (textfile collector format) to PATH when redlock exits.
    #[arg(
        long,
        env = "REDLOCK_METRICS_FILE",
        hide_env_values = true,
        value_name = "PATH"
    )]
    pub metrics_file: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,

    /// The command and its arguments, run without a shell.
    #[arg(required = true, num_args = 1.., trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// The options `run` works with, every value checked against the others.
    pub fn options(&self) -> anyhow::Result<Options> {
        if self.command.first().is_some_and(|c| c.is_empty()) {
            return Err(classified(
                Class::Usage,
                "the command is empty: give a program to run after '--'",
            ));
        }
        let kill_after = self.kill_after();
        let backend = self.conn.backend(self.backend_options())?;
        let kind = match (self.limit, self.shared) {
            (Some(n), _) => Kind::Limit(n),
            (None, true) => Kind::Shared,
            (None, false) => Kind::Exclusive,
        };
        let refusal = backend
            .capabilities()
            .refusal(kind, self.fair, &self.backend_options());
        if let Some(why) = refusal {
            return Err(classified(Class::Usage, why));
        }
        if kind == Kind::Shared && self.fair {
            return Err(classified(
                Class::Usage,
                "--shared does not take --fair: shared holders never wait for each other, and \
                 they already queue behind a waiting exclusive holder",
            ));
        }
        if let Some(path) = &self.metrics_file {
            metrics::check_path(path).map_err(|message| classified(Class::Usage, message))?;
        }
        Ok(Options {
            key: self.key.clone(),
            backend,
            ttl: self.ttl,
            wait: self.wait,
            fair: self.fair,
            kind,
            conflict_status: self.conflict_exit_code,
            min_interval: self.min_interval,
            splay: self.splay.filter(|splay| !splay.is_zero()),
            stop_signal: self.stop_signal,
            kill_after,
            max_runtime: self.max_runtime,
            command: self.command.clone(),
            command_url: self.conn.command_url(),
        })
    }

    /// The backend options the flags give, as name and value: `--min-replicas N` (unless 0,
    /// the default) and `--fsync`.
    fn backend_options(&self) -> Vec<(&'static str, String)> {
        let mut options = Vec::new();
        if self.min_replicas > 0 {
            options.push(("min-replicas", self.min_replicas.to_string()));
        }
        if self.fsync {
            options.push(("fsync", String::new()));
        }
        options
    }

    /// The grace before SIGKILL after a stop request or `--max-runtime`: as given, or the
    /// default. It need not fit in the ttl: the lease is renewed meanwhile. After the loss of the
    /// lease the supervisor cuts it (see [`crate::lease_grace_rule`]).
    pub fn kill_after(&self) -> Duration {
        self.kill_after.unwrap_or(DEFAULT_KILL_AFTER)
    }
}

/// The clap command, shared by the binary and the doc generators.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(ttl: &str, kill_after: Option<&str>) -> RunArgs {
        let mut argv = vec!["redlock", "run", "--key", "k", "--ttl", ttl];
        if let Some(grace) = kill_after {
            argv.extend(["--kill-after", grace]);
        }
        argv.extend(["--", "true"]);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(args) => args,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn kill_after_default_and_limit() {
        assert_eq!(run_args("30s", None).kill_after(), Duration::from_secs(5));
        // Not cut to the ttl: the lease is renewed during the grace.
        assert_eq!(run_args("1s", None).kill_after(), Duration::from_secs(5));
        assert_eq!(
            run_args("2s", Some("10s")).kill_after(),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn the_kill_after_help_states_the_supervisors_rule() {
        assert!(KILL_AFTER_HELP.ends_with(crate::lease_grace_rule!()));
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn help_names_every_variable() {
        let cmd = command();
        let options = cmd
            .get_subcommands()
            .flat_map(|sub| sub.get_arguments())
            .filter_map(|arg| arg.get_env())
            .map(|var| var.to_string_lossy().into_owned());
        let given = COMMAND_ENV.iter().map(|(var, _)| var.to_string());
        for var in options.chain(given) {
            assert!(ENV_HELP.contains(&var), "{var} missing from ENV_HELP");
        }
    }
}
