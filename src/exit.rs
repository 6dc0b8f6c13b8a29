//! The exit-status table: the one place where redlock's own exit codes live.
//!
//! Everything else (the command's own status, 128+N for a signal death) passes through unchanged.

/// Usage error: bad flag or value, missing key or command (sysexits EX_USAGE).
pub const USAGE: i32 = 64;
/// Redis unreachable (on a quorum: fewer than a majority granted the lock), refused the
/// credentials, or answered with an error before the lock was taken, or `--min-replicas`
/// replicas did not acknowledge it (it was released); the command did not run
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

/// The table as printed in `--help`, kept beside the constants so the two cannot drift apart.
pub const TABLE: &str = "\
EXIT STATUS:
  N        the command's own exit status
  128+N    the command died from signal N
  64       usage error: bad flag or value, missing key or command
  69       Redis unreachable (with several --url: fewer than a majority
           granted the lock), refused the credentials, or answered with an
           error before the lock was taken, or too few replicas acknowledged
           it (--min-replicas; it was released); the command did not run
  70       internal error
  75       lock busy, --wait ran out, or a run succeeded within --min-interval
           (change it with --conflict-exit-code)
  76       the lock was lost while the command ran: redlock stopped the command,
           or the command ended and the release found the lock gone
  124      --max-runtime exceeded; redlock stopped the command
  126      the command could not be executed
  127      the command was not found";

/// The exit statuses of `redlock status`.
pub const STATUS_TABLE: &str = "\
EXIT STATUS:
  0        the lock's state was shown (free or held)
  64       usage error
  69       Redis unreachable or answered with an error (several --url: a majority did not answer)";

/// The exit statuses of `redlock list`.
pub const LIST_TABLE: &str = "\
EXIT STATUS:
  0        the locks were listed (none is fine)
  64       usage error
  69       Redis unreachable or answered with an error (several --url: a majority did not answer)";

/// The exit statuses of `redlock release`.
pub const RELEASE_TABLE: &str = "\
EXIT STATUS:
  0        the lock was removed, or was already free (says so)
  64       usage error, or --force missing
  69       Redis unreachable or answered with an error
  75       --token given and the lock holds another token (left alone)";

/// The exit status a shell reports for a process that ended with `status`:
/// its code, or 128+N when it died from signal N.
pub fn from_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        // Neither a code nor a signal: never report success for it.
        (None, None) => INTERNAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    #[test]
    fn exit_code_passes_through() {
        assert_eq!(from_status(ExitStatus::from_raw(0)), 0);
        assert_eq!(from_status(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(from_status(ExitStatus::from_raw(255 << 8)), 255);
    }

    #[test]
    fn signal_death_is_128_plus_n() {
        assert_eq!(from_status(ExitStatus::from_raw(15)), 143);
        assert_eq!(from_status(ExitStatus::from_raw(9)), 137);
        // A core dump bit does not change the signal number.
        assert_eq!(from_status(ExitStatus::from_raw(11 | 0x80)), 139);
    }

    #[test]
    fn table_mentions_every_code() {
        for code in [
            USAGE,
            UNAVAILABLE,
            INTERNAL,
            CONFLICT,
            LOCK_LOST,
            TIMEOUT,
            NOT_EXECUTABLE,
            NOT_FOUND,
        ] {
            assert!(
                TABLE.contains(&format!("  {code} ")),
                "{code} missing from the table"
            );
        }
        for table in [STATUS_TABLE, LIST_TABLE, RELEASE_TABLE] {
            for code in [0, USAGE, UNAVAILABLE] {
                assert!(table.contains(&format!("  {code} ")), "{code}: {table}");
            }
        }
        assert!(RELEASE_TABLE.contains(&format!("  {CONFLICT} ")));
    }
}
