//! How a run ends and which exit status says so: the one place where redlock's exit statuses
//! live. [`Outcome`] is how a `redlock run` ended; it yields the exit status and the metrics
//! label (`report::Event` names the JSON log event that reports it). The tables ([`TABLES`]:
//! `RUN`, `STATUS`, `LIST`, `HISTORY`, `CHECK`, `RELEASE`) are data that `--help` and the man
//! page render, and that a test holds the README's tables to, row for row.
//!
//! Everything else (the command's own status, 128+N for a signal death) passes through unchanged.
//! Used by every layer; uses nothing of redlock's.

use std::process::ExitStatus;

/// Usage error: bad flag or value, missing key or command (sysexits EX_USAGE).
pub const USAGE: i32 = 64;
/// The lock's server could not be used before the lock was taken; the command did not run
/// (sysexits EX_UNAVAILABLE).
pub const UNAVAILABLE: i32 = 69;
/// Internal error (sysexits EX_SOFTWARE).
pub const INTERNAL: i32 = 70;
/// The lock is busy, `--wait` ran out, or `--min-interval` skipped the run (sysexits
/// EX_TEMPFAIL). `--conflict-exit-code` replaces it.
pub const CONFLICT: i32 = 75;
/// The lock was lost while the command ran; redlock stopped the command.
pub const LOCK_LOST: i32 = 76;
/// `--max-runtime` was exceeded; redlock stopped the command (as timeout(1) does).
pub const TIMEOUT: i32 = 124;
/// The command was found but could not be executed.
pub const NOT_EXECUTABLE: i32 = 126;
/// The command was not found.
pub const NOT_FOUND: i32 = 127;

/// The outcome label of a run cut short by a signal redlock forwarded to it (a stop asked of
/// redlock: TERM, INT, HUP, QUIT or the `--stop-signal`), whatever the command's own status:
/// a job that traps TERM and exits 0 did not finish. The record of runs and the metrics file
/// both say it.
pub const CUT_SHORT: &str = "cut_short";

/// How a `redlock run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran and exited with this code (0: success).
    Exited(i32),
    /// The command ran and died from this signal.
    Signaled(i32),
    /// The lock stayed busy: tried once, or `--wait` ran out.
    Busy,
    /// `--min-interval`: a run of this lock succeeded recently enough; not run.
    Skipped,
    /// A signal (this number) asked redlock to end while it waited for the lock; not run.
    Interrupted(i32),
    /// The command could not be started: not found, or not executable.
    NotRun { found: bool },
    /// The lock was lost while the command ran; redlock stopped the command.
    LockLost,
    /// The command ran past `--max-runtime`; redlock stopped it.
    MaxRuntime,
    /// Bad input; nothing ran.
    Usage,
    /// The lock's server could not be used before the lock was taken; nothing ran.
    Unavailable,
    /// A bug, or something redlock cannot account for.
    Internal,
}

impl Outcome {
    /// How the command ended, as `wait` reported it.
    pub fn of_command(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Outcome::Exited(code),
            (None, Some(signal)) => Outcome::Signaled(signal),
            // Neither a code nor a signal: never report success for it.
            (None, None) => Outcome::Internal,
        }
    }

    /// The exit status; `conflict` is what busy and skipped runs exit with
    /// (`--conflict-exit-code`, by default [`CONFLICT`]).
    pub fn status(self, conflict: u8) -> i32 {
        match self {
            Outcome::Exited(code) => code,
            Outcome::Signaled(signal) | Outcome::Interrupted(signal) => 128 + signal,
            Outcome::Busy | Outcome::Skipped => i32::from(conflict),
            Outcome::NotRun { found: false } => NOT_FOUND,
            Outcome::NotRun { found: true } => NOT_EXECUTABLE,
            Outcome::LockLost => LOCK_LOST,
            Outcome::MaxRuntime => TIMEOUT,
            Outcome::Usage => USAGE,
            Outcome::Unavailable => UNAVAILABLE,
            Outcome::Internal => INTERNAL,
        }
    }

    /// The `outcome` label of the metrics file.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Exited(0) => "success",
            Outcome::Exited(_) | Outcome::Signaled(_) => "failed",
            Outcome::Busy => "busy",
            Outcome::Skipped => "skipped",
            Outcome::Interrupted(_) => "interrupted",
            Outcome::NotRun { .. } => "not_run",
            Outcome::LockLost => "lock_lost",
            Outcome::MaxRuntime => "max_runtime",
            Outcome::Usage => "usage",
            Outcome::Unavailable => "unavailable",
            Outcome::Internal => "error",
        }
    }

    /// The signal redlock dies of once the lock is released, as timeout(1) does: the one the
    /// command died of, or the one that interrupted the wait for the lock. Its parent then sees
    /// a signal death (a shell shows 128+N, and stops a script on SIGINT).
    pub fn death_signal(self) -> Option<i32> {
        match self {
            Outcome::Signaled(signal) | Outcome::Interrupted(signal) => Some(signal),
            _ => None,
        }
    }

    /// Whether the run counts as a success (for `--min-interval` and the metrics).
    pub fn succeeded(self) -> bool {
        self == Outcome::Exited(0)
    }
}

/// One row of an exit-status table: the status as shown (`64`, `128+N`) and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub status: &'static str,
    pub meaning: &'static str,
}

const fn row(status: &'static str, meaning: &'static str) -> Row {
    Row { status, meaning }
}

/// The exit statuses of `redlock run`. The README's table says the same, row for row (a test
/// holds it to this).
pub const RUN: &[Row] = &[
    row(
        "N",
        "the command's own exit status: it ran and exited with N",
    ),
    row(
        "128+N",
        "the command died from signal N, or signal N interrupted the wait for the lock: \
         redlock releases the lock, then dies of signal N itself, so a shell shows 128+N \
         and a script stops on Ctrl-C (as PID 1, which cannot, it exits 128+N)",
    ),
    row(
        "64",
        "usage error: bad flag or value, missing key or command (--help and --version exit \
         0); or the lock's holders hold it another way (another --limit, a semaphore against \
         a plain lock): nothing ran",
    ),
    row(
        "69",
        "the lock's server could not be used before the lock was taken: unreachable (with \
         --wait: still unreachable when the wait ran out), refused the credentials, or \
         answered with an error (an unknown Sentinel service name too; on PostgreSQL, no \
         tables: run redlock init). With several Redis --url: no node found the lock held, \
         and fewer than a majority granted it in time. Or the lock was taken, but too few \
         replicas acknowledged it (--min-replicas) or it was not fsynced (--fsync), and it \
         was released (with --wait: still so when the wait ran out). The command did not run",
    ),
    row("70", "internal error"),
    row(
        "75",
        "lock busy (with several --url: a node found it held and no majority granted it), \
         --wait ran out, or a run succeeded within --min-interval (change it with \
         --conflict-exit-code)",
    ),
    row(
        "76",
        "the lock was lost while the command ran: redlock stopped the command; or, once the \
         command ended, the release found the lock gone or someone else's (deleted, evicted, \
         release --force), or came after the lease ran out (redlock was stopped or frozen \
         meanwhile)",
    ),
    row("124", "--max-runtime exceeded; redlock stopped the command"),
    row(
        "126",
        "the command could not be executed (the lock is released)",
    ),
    row("127", "the command was not found (the lock is released)"),
];

/// The exit statuses of `redlock status`.
pub const STATUS: &[Row] = &[
    row("0", "the lock's state was shown (free or held)"),
    row("64", "usage error"),
    row(
        "69",
        "the server unreachable or answered with an error (several --url: a majority did not \
         answer)",
    ),
];

/// The exit statuses of `redlock list`.
pub const LIST: &[Row] = &[
    row("0", "the locks were listed (none is fine)"),
    row("64", "usage error"),
    row(
        "69",
        "the server unreachable or answered with an error (several --url: a majority did not \
         answer); or a held lock could not be read (said on stderr), the others listed",
    ),
];

/// The exit statuses of `redlock history`.
pub const HISTORY: &[Row] = &[
    row(
        "0",
        "the runs were shown (none is fine: a lock that never ran)",
    ),
    row("64", "usage error"),
    row(
        "69",
        "the server unreachable or answered with an error (several --url: a majority did not \
         answer)",
    ),
];

/// `redlock check`'s statuses: the monitoring-plugin convention (Nagios, Icinga, Sensu,
/// Zabbix), not redlock's sysexits.
pub mod check {
    /// A run succeeded within `--max-age`, and none failed since.
    pub const OK: i32 = 0;
    /// A run succeeded within `--max-age`, but a later one failed or lost its lock.
    pub const WARNING: i32 = 1;
    /// No run succeeded within `--max-age`: none ever, or the last success is older.
    pub const CRITICAL: i32 = 2;
    /// Cannot tell: the server unreachable, bad arguments.
    pub const UNKNOWN: i32 = 3;
}

/// The exit statuses of `redlock check`.
pub const CHECK: &[Row] = &[
    row(
        "0",
        "OK: a run succeeded within --max-age on some host, and none failed since",
    ),
    row(
        "1",
        "WARNING: a run succeeded within --max-age, but a later run failed, lost its lock \
         or vanished",
    ),
    row(
        "2",
        "CRITICAL: no run succeeded within --max-age (never ran, or the last success is older)",
    ),
    row(
        "3",
        "UNKNOWN: cannot tell: the server unreachable or answering with an error (several \
         --url: a majority did not answer), or bad arguments (not 64: the plugin convention)",
    ),
];

/// The exit statuses of `redlock release`.
pub const RELEASE: &[Row] = &[
    row(
        "0",
        "the lock (of several holders, the one named) was removed, or was already free (says so)",
    ),
    row(
        "64",
        "usage error, --force missing, or several hold the lock and no --token names one",
    ),
    row("69", "the server unreachable or answered with an error"),
    row(
        "75",
        "--token given and the lock holds another token, or none of its holders has it (left alone)",
    ),
];

/// The exit statuses of `redlock init`.
pub const INIT: &[Row] = &[
    row(
        "0",
        "the tables and functions are there (made now, or already), or --print printed them",
    ),
    row(
        "64",
        "usage error, or the URL is not a PostgreSQL one (Redis and etcd need no tables)",
    ),
    row(
        "69",
        "PostgreSQL unreachable or answered with an error (a role that may not create them)",
    ),
];

/// Every subcommand that has an exit-status table, with it: `--help` and the man page show
/// each one.
pub const TABLES: &[(&str, &[Row])] = &[
    ("run", RUN),
    ("status", STATUS),
    ("list", LIST),
    ("history", HISTORY),
    ("check", CHECK),
    ("release", RELEASE),
    ("init", INIT),
];

/// Where a table's meanings start, and the width they wrap at, in `--help`.
const MEANING_COLUMN: usize = 11;
const HELP_WIDTH: usize = 80;

/// `rows` as `--help` shows them: an `EXIT STATUS:` heading, then one status a row with its
/// meaning wrapped to 80 columns.
pub fn help_table(rows: &[Row]) -> String {
    let mut out = String::from("EXIT STATUS:");
    for row in rows {
        let mut line = format!("\n  {:<width$}", row.status, width = MEANING_COLUMN - 2);
        let mut used = MEANING_COLUMN;
        for (i, word) in row.meaning.split(' ').enumerate() {
            if i > 0 && used + 1 + word.len() > HELP_WIDTH {
                line.push('\n');
                line.push_str(&" ".repeat(MEANING_COLUMN));
                used = MEANING_COLUMN;
            } else if i > 0 {
                line.push(' ');
                used += 1;
            }
            line.push_str(word);
            used += word.len();
        }
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn of(raw: i32) -> Outcome {
        Outcome::of_command(ExitStatus::from_raw(raw))
    }

    #[test]
    fn the_commands_status_passes_through() {
        assert_eq!(of(0).status(75), 0);
        assert_eq!(of(3 << 8).status(75), 3);
        assert_eq!(of(255 << 8).status(75), 255);
        assert_eq!(of(0).label(), "success");
        assert_eq!(of(3 << 8).label(), "failed");
    }

    #[test]
    fn a_signal_death_is_128_plus_n() {
        assert_eq!(of(15).status(75), 143);
        assert_eq!(of(9).status(75), 137);
        // A core dump bit does not change the signal number.
        assert_eq!(of(11 | 0x80).status(75), 139);
        assert_eq!(of(9).label(), "failed");
        assert_eq!(Outcome::Interrupted(2).status(75), 130);
        assert_eq!(of(15).death_signal(), Some(15));
        assert_eq!(Outcome::Interrupted(2).death_signal(), Some(2));
        assert_eq!(of(3 << 8).death_signal(), None);
        assert_eq!(Outcome::LockLost.death_signal(), None);
        assert_eq!(Outcome::MaxRuntime.death_signal(), None);
    }

    #[test]
    fn redlocks_own_outcomes_have_their_statuses() {
        assert_eq!(Outcome::Busy.status(75), CONFLICT);
        assert_eq!(Outcome::Skipped.status(3), 3);
        assert_eq!(Outcome::NotRun { found: false }.status(75), NOT_FOUND);
        assert_eq!(Outcome::NotRun { found: true }.status(75), NOT_EXECUTABLE);
        assert_eq!(Outcome::LockLost.status(75), LOCK_LOST);
        assert_eq!(Outcome::MaxRuntime.status(75), TIMEOUT);
        assert_eq!(Outcome::Usage.status(75), USAGE);
        assert_eq!(Outcome::Unavailable.status(75), UNAVAILABLE);
        assert_eq!(Outcome::Internal.status(75), INTERNAL);
    }

    #[test]
    fn every_status_has_a_row() {
        let listed = |rows: &[Row], code: i32| rows.iter().any(|r| r.status == code.to_string());
        for outcome in [
            Outcome::Usage,
            Outcome::Unavailable,
            Outcome::Internal,
            Outcome::Busy,
            Outcome::LockLost,
            Outcome::MaxRuntime,
            Outcome::NotRun { found: true },
            Outcome::NotRun { found: false },
        ] {
            let code = outcome.status(CONFLICT as u8);
            assert!(listed(RUN, code), "{outcome:?} ({code}) missing");
        }
        for rows in [STATUS, LIST, HISTORY, RELEASE] {
            for code in [0, USAGE, UNAVAILABLE] {
                assert!(listed(rows, code), "{code}: {rows:?}");
            }
        }
        assert!(listed(RELEASE, CONFLICT));
        for code in [check::OK, check::WARNING, check::CRITICAL, check::UNKNOWN] {
            assert!(listed(CHECK, code), "{code}: {CHECK:?}");
        }
    }

    #[test]
    fn help_tables_wrap_at_80_columns() {
        let table = help_table(RUN);
        assert!(table.starts_with(
            "EXIT STATUS:\n  N        the command's own exit status: it ran and exited with N\n"
        ));
        assert!(table.lines().all(|l| l.len() <= HELP_WIDTH), "{table}");
        assert!(
            table.contains("\n  124      --max-runtime exceeded"),
            "{table}"
        );
        // Continuation lines are indented to the meaning column, not mistaken for statuses.
        let rows = table
            .lines()
            .filter(|l| !l.starts_with("           "))
            .count();
        assert_eq!(rows, RUN.len() + 1);
    }
}
