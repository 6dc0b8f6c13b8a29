//! Command-line definitions (clap), value parsers for durations, signals and URLs, and env fallbacks.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nix::sys::signal::Signal;

use crate::admin::Servers;
use crate::error::{Class, classified};
use crate::exit;
use crate::lease::{MAX_DURATION, MIN_TTL, Wait};
use crate::report::metrics;
use crate::run::Options;
use crate::transport::endpoint::{Endpoint, Tls};

/// Default grace between the stop signal and SIGKILL, capped at a quarter of the ttl.
pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);
/// The longest lock name accepted, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

const ENV_HELP: &str = "\
ENVIRONMENT:
  REDLOCK_URL, REDLOCK_TTL, REDLOCK_WAIT, REDLOCK_FAIR, REDLOCK_PREFIX,
  REDLOCK_KILL_AFTER, REDLOCK_STOP_SIGNAL, REDLOCK_MAX_RUNTIME,
  REDLOCK_CONFLICT_EXIT_CODE, REDLOCK_MIN_INTERVAL, REDLOCK_MIN_REPLICAS,
  REDLOCK_METRICS_FILE, REDLOCK_LOG_FORMAT, REDLOCK_PASSWORD_FILE,
  REDLOCK_TLS_CA_CERT, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY and
  REDLOCK_TLS_INSECURE give defaults for the options of the same name; a flag
  wins over its variable. REDLOCK_PASSWORD holds the Redis password (below
  --password-file, above a password in the URL).
  The command sees REDLOCK_KEY, REDLOCK_TOKEN and REDLOCK_FENCING_TOKEN.";

const ADMIN_ENV_HELP: &str = "\
ENVIRONMENT:
  REDLOCK_URL, REDLOCK_PREFIX, REDLOCK_LOG_FORMAT, REDLOCK_PASSWORD_FILE,
  REDLOCK_TLS_CA_CERT, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY and
  REDLOCK_TLS_INSECURE give defaults for the options of the same name; a
  flag wins over its variable. REDLOCK_PASSWORD holds the Redis password.";

/// The variables redlock gives the command, and what each holds.
pub const COMMAND_ENV: [(&str, &str); 3] = [
    ("REDLOCK_KEY", "the lock name as given"),
    (
        "REDLOCK_TOKEN",
        "this acquisition's owner token (UUID v4), the value stored in the lock key",
    ),
    (
        "REDLOCK_FENCING_TOKEN",
        "the fencing counter after this acquisition: strictly increasing for a name, while Redis keeps its data (with several --url: read from a majority and raised on a majority, see the README)",
    ),
];

/// Variables redlock reads that are not an option's default.
pub const OTHER_ENV: [(&str, &str); 2] = [
    (
        PASSWORD_ENV,
        "the Redis password, for every URL: wins over a password in the URL, loses to --password-file",
    ),
    (
        "SSL_CERT_FILE",
        "for rediss:// URLs: a PEM file of CA certificates to trust instead of the system store (--tls-ca-cert wins)",
    ),
];

/// Run a command under a Redis lock: one copy at a time across every machine.
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
    /// Show whether the lock NAME is free or held, by whom, for how long, and its fencing counter.
    #[command(after_help = format!("{}\n\n{ADMIN_ENV_HELP}", exit::help_table(exit::STATUS)))]
    Status(StatusArgs),
    /// List the locks under a prefix (SCAN, never KEYS), held ones with their holder.
    #[command(after_help = format!("{}\n\n{ADMIN_ENV_HELP}", exit::help_table(exit::LIST)))]
    List(ListArgs),
    /// Break-glass: delete the lock NAME whoever holds it, and advance its fencing counter.
    #[command(after_help = format!("The holder's renewals then fail and it stops its command (exit {}); the fencing\ncounter moves past the holder's token, so a resource that checks it refuses the\nold holder's writes. One waiter is woken, as by a normal release.\n\n{}\n\n{ADMIN_ENV_HELP}", exit::LOCK_LOST, exit::help_table(exit::RELEASE)))]
    Release(ReleaseArgs),

    /// Print a shell completion script to stdout (no Redis needed).
    #[command(after_help = crate::cli::docs::COMPLETIONS_HELP)]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },

    /// Print the man page, redlock(1), to stdout as roff (no Redis needed).
    #[command(after_help = crate::cli::docs::MAN_HELP)]
    Man,
}

/// Where the locks live: shared by every subcommand.
#[derive(Debug, Args)]
pub struct ConnArgs {
    /// Redis to lock on: redis://[user:pass@]host:port[/db], rediss://..., unix:///path.sock,
    /// redis+sentinel://[user:pass@]host:port[,host:port...]/SERVICE, redis+cluster://host:port[,host:port...].
    /// Give it several times (or several URLs separated by whitespace in REDLOCK_URL) for a quorum
    /// of independent masters.
    #[arg(
        long,
        env = "REDLOCK_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true,
        value_name = "URL"
    )]
    // Checked by [`ConnArgs::endpoints`], not by clap: clap's errors would echo a password.
    pub url: Vec<String>,

    /// Whether `url` came from REDLOCK_URL (split on whitespace) rather than from --url (one
    /// URL each, whatever it holds); set after parsing.
    #[arg(skip)]
    pub url_from_env: bool,

    /// Prefix of the Redis keys: the lock is PREFIX{NAME}.
    #[arg(long, env = "REDLOCK_PREFIX", hide_env_values = true, default_value = "redlock:", value_parser = parse_prefix)]
    pub prefix: String,

    /// Read the Redis password from FILE (one trailing newline dropped); it wins over
    /// REDLOCK_PASSWORD and over a password in the URL.
    #[arg(
        long,
        env = "REDLOCK_PASSWORD_FILE",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub password_file: Option<PathBuf>,

    /// For rediss://: trust the CA certificates in this PEM file instead of the system store.
    #[arg(
        long,
        env = "REDLOCK_TLS_CA_CERT",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub tls_ca_cert: Option<PathBuf>,

    /// For rediss:// with mutual TLS: the client certificate (PEM; needs --tls-key).
    #[arg(
        long,
        env = "REDLOCK_TLS_CERT",
        hide_env_values = true,
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// For rediss:// with mutual TLS: the client's private key (PEM; needs --tls-cert).
    #[arg(
        long,
        env = "REDLOCK_TLS_KEY",
        hide_env_values = true,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// TESTING ONLY: do not verify the server's TLS certificate, so anyone on the network path
    /// can pose as Redis. Warns on every use.
    #[arg(long, env = "REDLOCK_TLS_INSECURE", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new(), conflicts_with = "tls_ca_cert")]
    pub tls_insecure: bool,
}

impl ConnArgs {
    /// [`ConnArgs::endpoints`] with the key prefix: what the admin subcommands work on.
    pub fn servers(&self) -> anyhow::Result<Servers> {
        Ok(Servers {
            endpoints: self.endpoints()?,
            prefix: self.prefix.clone(),
        })
    }

    /// Every Redis named by --url / REDLOCK_URL (split on whitespace), with the TLS options and
    /// the password applied. Several make a quorum; the same host:port twice is refused.
    pub fn endpoints(&self) -> anyhow::Result<Vec<Endpoint>> {
        let usage = |message: String| classified(Class::Usage, message);
        let tls = self.tls().map_err(usage)?;
        let password = password(self.password_file.as_deref()).map_err(usage)?;
        let urls: Vec<&str> = if self.url_from_env {
            let urls: Vec<&str> = self
                .url
                .iter()
                .flat_map(|url| url.split_ascii_whitespace())
                .collect();
            // A piece without a scheme is most likely part of a password with a space in it:
            // say so without showing any piece.
            if urls.iter().any(|url| !url.contains("://")) {
                return Err(usage(
                    "REDLOCK_URL holds a word that is not a URL: several URLs are separated by \
                     whitespace, so a password with a space must be percent-encoded (%20)"
                        .into(),
                ));
            }
            urls
        } else {
            // Each --url is one URL, whatever it holds (a password may contain spaces).
            self.url.iter().map(|url| url.trim()).collect()
        };
        if urls.iter().all(|url| url.is_empty()) {
            return Err(usage(
                "'' is not a Redis URL (use redis://, rediss://, unix:// or redis+unix://)".into(),
            ));
        }
        let mut endpoints: Vec<Endpoint> = Vec::with_capacity(urls.len());
        for url in urls {
            let mut endpoint = Endpoint::parse(url)
                .and_then(|e| e.with_tls(&tls))
                .map_err(usage)?;
            if let Some(password) = &password {
                endpoint = endpoint.with_password(password);
            }
            if endpoints
                .iter()
                .any(|e| e.to_string() == endpoint.to_string())
            {
                return Err(usage(format!(
                    "{endpoint} is given twice: the nodes of a quorum must be independent servers"
                )));
            }
            endpoints.push(endpoint);
        }
        if tls.insecure {
            crate::report!(
                0,
                "warning: --tls-insecure: the Redis server's certificate is not verified, so anyone on the network path can pose as it; for testing only"
            );
        }
        Ok(endpoints)
    }

    fn tls(&self) -> Result<Tls, String> {
        let client = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                read_pem("--tls-cert", cert, "CERTIFICATE-----")?,
                read_pem("--tls-key", key, "PRIVATE KEY-----")?,
            )),
            _ => None,
        };
        let ca_cert = self
            .tls_ca_cert
            .as_deref()
            .map(|path| read_pem("--tls-ca-cert", path, "CERTIFICATE-----"))
            .transpose()?;
        Ok(Tls {
            ca_cert,
            client,
            insecure: self.tls_insecure,
        })
    }
}

/// The contents of `path`; the error names the option and the file, never the contents.
fn read_file(option: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {option} file {}: {e}", path.display()))
}

/// A PEM file that must hold a section whose header ends with `marker`: a key given as a
/// certificate would otherwise mean an empty trust store, found out only at the handshake.
fn read_pem(option: &str, path: &Path, marker: &str) -> Result<Vec<u8>, String> {
    let bytes = read_file(option, path)?;
    let found = String::from_utf8_lossy(&bytes)
        .lines()
        .any(|line| line.starts_with("-----BEGIN ") && line.trim_end().ends_with(marker));
    if !found {
        let what = marker.trim_end_matches('-').to_lowercase();
        return Err(format!(
            "{option} file {} holds no PEM {what}",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The password given apart from the URL: the file's first line (a trailing newline dropped),
/// else REDLOCK_PASSWORD when set and not empty, else None (the URL's password, if any).
fn password(file: Option<&Path>) -> Result<Option<String>, String> {
    if let Some(path) = file {
        let bytes = read_file("--password-file", path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("--password-file {} is not UTF-8 text", path.display()))?;
        let password = text.strip_suffix('\n').unwrap_or(&text);
        let password = password.strip_suffix('\r').unwrap_or(password);
        if password.is_empty() {
            return Err(format!("--password-file {} is empty", path.display()));
        }
        return Ok(Some(password.to_owned()));
    }
    match std::env::var_os(PASSWORD_ENV) {
        None => Ok(None),
        Some(value) if value.is_empty() => Ok(None),
        Some(value) => value
            .into_string()
            .map(Some)
            .map_err(|_| format!("{PASSWORD_ENV} is not valid UTF-8")),
    }
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
    /// lock of a holder that took it since you looked.
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

    /// How long to wait for a busy lock: 0 tries once, `forever` waits without limit.
    #[arg(long, env = "REDLOCK_WAIT", hide_env_values = true, default_value = "0", value_name = "DURATION|forever", value_parser = parse_wait, allow_hyphen_values = true)]
    pub wait: Wait,

    /// Waiters take the lock first come, first served (use it on every client of the lock).
    #[arg(long, env = "REDLOCK_FAIR", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new())]
    pub fair: bool,

    /// Exit status when the lock was not acquired (or the run was skipped by --min-interval).
    #[arg(long, env = "REDLOCK_CONFLICT_EXIT_CODE", hide_env_values = true, default_value_t = exit::CONFLICT as u8, value_name = "N")]
    pub conflict_exit_code: u8,

    /// Skip the run (conflict status) if a run of this lock succeeded this recently, on any host.
    #[arg(long, env = "REDLOCK_MIN_INTERVAL", hide_env_values = true, value_name = "DURATION", value_parser = parse_positive, allow_hyphen_values = true)]
    pub min_interval: Option<Duration>,

    /// Signal that asks the command to stop (lock lost, --max-runtime): a name or number.
    #[arg(long, env = "REDLOCK_STOP_SIGNAL", hide_env_values = true, default_value = "TERM", value_name = "SIG", value_parser = parse_stop_signal)]
    pub stop_signal: Signal,

    /// Grace between a stop signal and SIGKILL [default: 5s, at most ttl/4]; at most ttl/2.
    #[arg(long, env = "REDLOCK_KILL_AFTER", hide_env_values = true, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub kill_after: Option<Duration>,

    /// After taking the lock, wait for N replicas to acknowledge it (WAIT, up to ttl/10, at most
    /// 1s); if fewer do, release it, do not run the command, exit 69. 0: do not wait.
    #[arg(
        long,
        env = "REDLOCK_MIN_REPLICAS",
        hide_env_values = true,
        default_value_t = 0,
        value_name = "N"
    )]
    pub min_replicas: u32,

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
        let kill_after = self.kill_after()?;
        let endpoints = self.conn.endpoints()?;
        if endpoints.len() > 1 && self.fair {
            return Err(classified(
                Class::Usage,
                "--fair does not work with several --url (a quorum): each node would keep its own queue, in its own order",
            ));
        }
        if let Some(path) = &self.metrics_file {
            metrics::check_path(path).map_err(|message| classified(Class::Usage, message))?;
        }
        Ok(Options {
            key: self.key.clone(),
            endpoints,
            prefix: self.conn.prefix.clone(),
            ttl: self.ttl,
            wait: self.wait,
            fair: self.fair,
            conflict_status: self.conflict_exit_code,
            min_interval: self.min_interval,
            stop_signal: self.stop_signal,
            kill_after,
            min_replicas: self.min_replicas,
            max_runtime: self.max_runtime,
            command: self.command.clone(),
        })
    }

    /// The grace before SIGKILL: as given (checked against the ttl), or the default.
    pub fn kill_after(&self) -> anyhow::Result<Duration> {
        match self.kill_after {
            None => Ok(DEFAULT_KILL_AFTER.min(self.ttl / 4)),
            Some(grace) if grace > self.ttl / 2 => Err(classified(
                Class::Usage,
                format!(
                    "--kill-after {} must be at most half the ttl ({}), so the command can be stopped before the lease expires",
                    humantime::format_duration(grace),
                    humantime::format_duration(self.ttl / 2)
                ),
            )),
            Some(grace) => Ok(grace),
        }
    }
}

/// The clap command, shared by the binary and the doc generators.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// A humantime duration ("30s", "1500ms", "2m") no longer than a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (examples: 30s, 1500ms, 2m)".into());
    }
    if text.starts_with('-') {
        return Err(format!("'{text}' is negative; a duration is 0 or more"));
    }
    let number = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let duration = if number(text) {
        // A bare number is seconds, except that it must not overflow.
        text.parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("'{text}' is too large"))?
    } else if let Some((whole, fraction)) = text.split_once('.')
        && number(whole)
        && number(fraction)
    {
        // Seconds with a fraction, as `sleep 1.5` takes them.
        text.parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| format!("'{text}' is too large"))?
    } else {
        humantime::parse_duration(text)
            .map_err(|e| format!("'{text}' is not a duration ({e}; examples: 30s, 1500ms, 2m)"))?
    };
    if duration > MAX_DURATION {
        return Err(format!("'{text}' is longer than the maximum of 365 days"));
    }
    Ok(duration)
}

fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err("must be greater than zero".into()),
        d => Ok(d),
    }
}

/// The lease length: at least [`MIN_TTL`].
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = parse_positive(text)?;
    if ttl < MIN_TTL {
        return Err(format!("'{text}' is shorter than the minimum of 100ms"));
    }
    Ok(ttl)
}

/// `forever`, or a duration (0 = try once).
pub fn parse_wait(text: &str) -> Result<Wait, String> {
    if text.trim().eq_ignore_ascii_case("forever") {
        Ok(Wait::Forever)
    } else {
        parse_duration(text).map(Wait::Up)
    }
}

/// A signal by name (`TERM`, `SIGTERM`, any case) or number, that ends a process by default.
pub fn parse_stop_signal(text: &str) -> Result<Signal, String> {
    let signal = parse_signal(text)?;
    use Signal::*;
    if matches!(
        signal,
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU | SIGCONT | SIGCHLD | SIGWINCH | SIGURG
    ) {
        return Err(format!(
            "{} does not end a process; use TERM, INT, HUP, QUIT or KILL",
            signal.as_str()
        ));
    }
    Ok(signal)
}

/// A signal by name (`TERM`, `SIGTERM`, any case) or number.
pub fn parse_signal(text: &str) -> Result<Signal, String> {
    let trimmed = text.trim();
    let parsed = if let Ok(number) = trimmed.parse::<i32>() {
        Signal::try_from(number).ok()
    } else {
        let upper = trimmed.to_ascii_uppercase();
        let name = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        name.parse::<Signal>().ok()
    };
    parsed.ok_or_else(|| format!("'{text}' is not a signal (examples: TERM, SIGINT, 15)"))
}

fn parse_key(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("the lock name must not be empty".into());
    }
    if text.len() > MAX_KEY_LEN {
        return Err(format!(
            "the lock name is {} bytes long; the maximum is {MAX_KEY_LEN}",
            text.len()
        ));
    }
    if text.starts_with('}') {
        // PREFIX{}...} would have an empty hash tag, and the lock's keys could land in different slots.
        return Err("the lock name must not start with '}'".into());
    }
    Ok(text.to_owned())
}

fn parse_prefix(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err(
            "the prefix must not be empty: it would move every lock away from clients using the default 'redlock:'"
                .into(),
        );
    }
    if text.contains(['{', '}']) {
        // The hash tag is the lock name in braces; a brace in the prefix would change it.
        return Err("the prefix must not contain '{' or '}'".into());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        // Seconds with a fraction, as sleep(1) takes them.
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("-5s").unwrap_err().contains("negative"));
        assert!(parse_ttl("1.5").is_ok());
        for bad in [
            ".5",
            "1.",
            "1.5.2",
            "31536000.5",
            "",
            " ",
            "abc",
            "-5s",
            "5 parsecs",
            "99999999999h",
            "99999999999999999999999",
            "1.5.2s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(parse_duration("366days").is_err());
    }

    #[test]
    fn ttl_bounds() {
        assert!(parse_ttl("0").is_err());
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("99ms").is_err());
        assert_eq!(parse_ttl("100ms"), Ok(MIN_TTL));
        assert_eq!(parse_ttl("365d"), Ok(MAX_DURATION));
    }

    #[test]
    fn wait_values() {
        assert_eq!(parse_wait("forever"), Ok(Wait::Forever));
        assert_eq!(parse_wait("FOREVER"), Ok(Wait::Forever));
        assert_eq!(parse_wait("0"), Ok(Wait::Up(Duration::ZERO)));
        assert_eq!(parse_wait("10s"), Ok(Wait::Up(Duration::from_secs(10))));
        assert!(parse_wait("soon").is_err());
    }

    #[test]
    fn signals() {
        for text in ["TERM", "SIGTERM", "term", "15", " sigterm "] {
            assert_eq!(parse_stop_signal(text), Ok(Signal::SIGTERM), "{text}");
        }
        assert_eq!(parse_stop_signal("KILL"), Ok(Signal::SIGKILL));
        assert_eq!(parse_stop_signal("2"), Ok(Signal::SIGINT));
        for bad in ["", "NOPE", "0", "65", "-1", "SIGSTOP", "CONT", "WINCH"] {
            assert!(
                parse_stop_signal(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn keys_and_prefixes() {
        assert!(parse_key("").is_err());
        assert!(parse_key("}x").is_err());
        assert!(parse_key(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
        assert!(parse_key("backup nightly {a}\nß").is_ok());
        assert!(parse_prefix("a{b").is_err());
        // An empty prefix would silently move every lock away from the default's clients.
        assert!(parse_prefix("").unwrap_err().contains("must not be empty"));
        assert_eq!(parse_prefix("jobs:"), Ok("jobs:".to_owned()));
    }

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
        assert_eq!(
            run_args("30s", None).kill_after().unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            run_args("2s", None).kill_after().unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            run_args("2s", Some("1s")).kill_after().unwrap(),
            Duration::from_secs(1)
        );
        assert!(run_args("2s", Some("1001ms")).kill_after().is_err());
    }

    #[test]
    fn password_files() {
        let dir = std::env::temp_dir().join(format!("redlock-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let read = |path: &Path| password(Some(path));
        assert_eq!(read(&file("lf", "pw\n")), Ok(Some("pw".into())));
        assert_eq!(read(&file("crlf", "pw\r\n")), Ok(Some("pw".into())));
        assert_eq!(read(&file("bare", "p w")), Ok(Some("p w".into())));
        // Only one newline goes: the rest is the password, as written.
        assert_eq!(read(&file("two", "pw\n\n")), Ok(Some("pw\n".into())));
        for (name, text) in [("empty", ""), ("newline", "\n")] {
            let err = read(&file(name, text)).unwrap_err();
            assert!(err.contains("is empty"), "{err}");
        }
        let utf8 = read(&file("utf8", "\u{ff}hunter2")).unwrap();
        assert_eq!(utf8, Some("\u{ff}hunter2".into()));
        std::fs::write(dir.join("binary"), [0xffu8, b'h', b'u', b'n']).unwrap();
        let err = read(&dir.join("binary")).unwrap_err();
        assert!(!err.contains("hun"), "{err}");
        let err = read(&dir.join("missing")).unwrap_err();
        assert!(
            err.contains("missing") && err.contains("--password-file"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
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
