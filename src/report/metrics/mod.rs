//! `--metrics-file`: a Prometheus textfile-collector file about the run, written atomically
//! (a temporary file in the same directory, then rename) when redlock exits. The path is
//! checked at start and no open of it can block, so the end of a run never hangs on it. Runs
//! that end together take turns (an advisory lock on a file beside it), so that none loses
//! another's counts; one file may hold the series of several locks.

mod text;

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::exit::{CUT_SHORT, Outcome};
use crate::file::{self, Unusable};
use text::{last_success_in, render, seconds};

/// What the metrics file reports about one run; filled in as the run goes.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// From start-up until the lock was taken or given up.
    pub waited: Option<Duration>,
    /// From taking the lock until releasing it.
    pub held: Option<Duration>,
    pub renewals: u64,
    pub renewal_failures: u64,
    /// A `--min-interval` skip learnt that the lock's last success was this long ago.
    pub success_ago: Option<Duration>,
    /// A stop asked of redlock reached the command while it ran: the run is `cut_short`,
    /// whatever the command's status, as the record of runs says (never a success).
    pub cut_short: bool,
}

impl Stats {
    /// The outcome label of a run that ended with `outcome`.
    pub(crate) fn label(&self, outcome: Outcome) -> &'static str {
        match outcome {
            Outcome::Exited(_) | Outcome::Signaled(_) if self.cut_short => CUT_SHORT,
            _ => outcome.label(),
        }
    }
}

/// The largest metrics file read back (to carry its counters over): this file is a few KiB.
const PREVIOUS_CAP: u64 = 1 << 20;

/// Check before running that the metrics file can be written where asked, and read back: a
/// file there must be a regular file within [`PREVIOUS_CAP`] (a FIFO would block the run's
/// end, a device fill its memory), and its directory must exist and be writable (the file is
/// replaced by a rename, beside a lock file: both are made in that directory).
pub fn check_path(path: &Path) -> Result<(), String> {
    let bad = |why: String| format!("--metrics-file {}: {why}", path.display());
    if path.file_name().is_none() {
        return Err(bad("not a file name".into()));
    }
    match file::check(path, PREVIOUS_CAP) {
        Ok(()) => {}
        Err(Unusable::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
        Err(why @ Unusable::TooLarge(_)) => {
            return Err(bad(format!("{why}: not a metrics file redlock wrote")));
        }
        Err(why) => return Err(bad(why.to_string())),
    }
    let dir = parent(path);
    if !dir.is_dir() {
        return Err(bad(format!("directory {} does not exist", dir.display())));
    }
    // access(2) answers for this process's user, as the kernel will at the end of the run
    // (root too, on a read-only file system).
    let writable = nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK;
    if let Err(errno) = nix::unistd::access(dir, writable) {
        return Err(bad(format!(
            "directory {} is not writable ({})",
            dir.display(),
            errno.desc()
        )));
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Write the file for a run of lock `key` that ended with `outcome` and exits `code`. The
/// last-success time is carried over from the previous file when this run did not succeed.
pub fn write(path: &Path, key: &str, code: i32, outcome: Outcome, stats: &Stats) -> io::Result<()> {
    // Held until the new file is in place: the read, the sums and the rename are one step for
    // every redlock writing this file (busy runs end while the holder's run does).
    let _turn = match take_turn(path) {
        Ok(turn) => Some(turn),
        Err(why) => {
            crate::report!(
                0,
                "warning: --metrics-file {}: {why}; writing without it (another run's counts may be lost)",
                path.display()
            );
            None
        }
    };
    let now = SystemTime::now();
    // Read as any file a user names is (never blocking, within a cap): a FIFO put there during
    // the run must not hang its end. One that cannot be read is not carried over.
    let previous = file::read_if_there(path, PREVIOUS_CAP)
        .map_err(|why| io::Error::other(format!("the file there: {why}")))?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let last_success = if outcome.succeeded() && !stats.cut_short {
        Some(seconds(now))
    } else {
        let known = stats
            .success_ago
            .and_then(|ago| now.checked_sub(ago))
            .map(seconds);
        let before = previous.as_deref().and_then(|p| last_success_in(p, key));
        match (known, before) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    };
    let text = render(
        key,
        code,
        outcome,
        stats,
        seconds(now),
        last_success,
        previous.as_deref().unwrap_or_default(),
    );
    replace(path, text.as_bytes())
}

/// How long the end of a run waits for its turn at the metrics file: another run's turn is a
/// read and a write of a few KiB, so only a stuck one takes this long.
const TURN_PATIENCE: Duration = Duration::from_secs(2);

/// The lock file beside the metrics file, `.NAME.lock`: hidden, and not `*.prom`, so the
/// textfile collector ignores it.
fn lock_path(path: &Path) -> PathBuf {
    parent(path).join(format!(".{}.lock", file_name(path)))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "metrics".into(), |n| n.to_string_lossy().into_owned())
}

/// Take this run's turn at the metrics file: an exclusive flock(2) on its lock file, created if
/// need be and opened without blocking or following a link, tried without blocking until
/// [`TURN_PATIENCE`] has passed. Released when the returned lock is dropped.
fn take_turn(path: &Path) -> Result<Flock<File>, String> {
    let lock = lock_path(path);
    let name = |why: String| format!("lock file {}: {why}", lock.display());
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(&lock)
        .map_err(|e| name(e.to_string()))?;
    match file.metadata() {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(name("not a regular file".into())),
        Err(e) => return Err(name(e.to_string())),
    }
    let deadline = Instant::now() + TURN_PATIENCE;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(turn) => return Ok(turn),
            Err((back, Errno::EWOULDBLOCK | Errno::EINTR)) if Instant::now() < deadline => {
                file = back;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(name(format!(
                    "still locked by another run after {} s",
                    TURN_PATIENCE.as_secs()
                )));
            }
            Err((_, errno)) => return Err(name(errno.desc().to_owned())),
        }
    }
}

/// Put `bytes` at `path` atomically: a new temporary file in the same directory (created, never
/// opened if something is there: a FIFO at its name would block), synced, renamed over `path`.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent(path);
    let tmp = dir.join(format!(".{}.{}.tmp", file_name(path), std::process::id()));
    let create = || {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&tmp)
    };
    let file = match create() {
        // Left by an earlier redlock of the same pid: not ours to keep.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            create()
        }
        other => other,
    };
    let result = file.and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
