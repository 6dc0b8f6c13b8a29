//! The clap definitions of the subcommands that read the record of runs: `history` and `check`
//! (`check` speaks the monitoring-plugin convention, not redlock's exit statuses).

use std::time::Duration;

use clap::Args;

use crate::cli::args::{ConnArgs, OutputArgs};
use crate::cli::parse::{parse_key, parse_positive};

/// `history --help`: what is kept.
pub const HISTORY_HELP: &str = "\
Every run is recorded where the lock lives (Redis, etcd, PostgreSQL or ZooKeeper alike), by
the requests redlock already makes: the acquire records it as started, the
release records how it ended (outcome and exit status). The last 20 runs of each
lock are kept, for 40 days after the last one. A run whose lease ended without a
release (SIGKILLed, its machine gone) shows as vanished. A lock that never ran
prints nothing.";

/// `check --help`: the statuses, which are not redlock's own.
pub const CHECK_HELP: &str = "\
For Nagios, Icinga, Sensu and Zabbix: one line on stdout starting with the status
word, and the plugin convention's exit statuses (below), not redlock's sysexits:
here bad arguments and an unreachable server are both UNKNOWN (3).";

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Name of the lock.
    #[arg(long, value_name = "NAME", value_parser = parse_key)]
    pub key: String,

    /// Print one JSON array of the runs instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Name of the lock.
    #[arg(long, value_name = "NAME", value_parser = parse_key)]
    pub key: String,

    /// OK only if a run succeeded within this long (by the server's clock), on any host.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive, allow_hyphen_values = true)]
    pub max_age: Duration,

    /// Print one JSON object (with the same exit status) instead of the line.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}
