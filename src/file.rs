//! The files a user names (`--password-file`, `--tls-ca-cert`, `--tls-cert`, `--tls-key`,
//! `SSL_CERT_FILE`, `--metrics-file`): regular files, opened without blocking and read up to a
//! cap. A device such as `/dev/zero` would be read until memory runs out, a directory or a
//! socket is not what the option means: they are refused with a reason before anything else
//! is done. A pipe is what process substitution gives (`--password-file <(pass show redis)`,
//! the usual way to hand a secret over without a file on disk): the options redlock only reads
//! take one, read until its writer closes it, to the same cap, within [`PIPE_WAIT`], so that a
//! FIFO nobody writes to cannot hang a run. The metrics file, which redlock writes, is a
//! regular file only.
//!
//! Uses std and nix (O_NONBLOCK, poll); used by `cli` and `report`.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The largest `--password-file`: far more than any password.
pub const PASSWORD_CAP: u64 = 64 << 10;
/// How long a pipe given as a file to read may take to be written and closed by its writer.
pub const PIPE_WAIT: Duration = Duration::from_secs(5);
/// The largest PEM file (`--tls-*`, `SSL_CERT_FILE`): a system's whole CA bundle is about
/// 220 KB.
pub const PEM_CAP: u64 = 1 << 20;

/// Why a file a user named cannot be used.
#[derive(Debug)]
pub enum Unusable {
    /// It could not be opened or read (missing, no permission, ...).
    Io(io::Error),
    /// It is not a regular file: what it is instead ("a FIFO", "a directory", ...).
    NotRegular(&'static str),
    /// It is larger than the cap, in bytes.
    TooLarge(u64),
    /// A pipe that was not written and closed within this long ([`PIPE_WAIT`]).
    PipeOpen(Duration),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Io(e) => write!(f, "cannot read it: {e}"),
            Unusable::NotRegular(what) => write!(f, "not a regular file ({what})"),
            Unusable::TooLarge(cap) => write!(f, "larger than {}", size(*cap)),
            Unusable::PipeOpen(wait) => write!(
                f,
                "a pipe that was not written and closed within {}",
                humantime::format_duration(*wait)
            ),
        }
    }
}

impl std::error::Error for Unusable {}

/// A size as the docs write it: `64 KiB`, `1 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// What `meta` describes when it is not a regular file.
fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else {
        Some("not a file")
    }
}

/// `meta` is a regular file of at most `cap` bytes.
fn usable(meta: &Metadata, cap: u64) -> Result<(), Unusable> {
    if let Some(what) = not_regular(meta) {
        return Err(Unusable::NotRegular(what));
    }
    if meta.len() > cap {
        return Err(Unusable::TooLarge(cap));
    }
    Ok(())
}

/// Whether `path` (symbolic links followed) is a regular file of at most `cap` bytes, without
/// opening it: for a file another library reads (`SSL_CERT_FILE`).
pub fn check(path: &Path, cap: u64) -> Result<(), Unusable> {
    let meta = std::fs::metadata(path).map_err(Unusable::Io)?;
    usable(&meta, cap)
}

/// `path` opened for reading, never blocking (O_NONBLOCK: a FIFO's open would wait for a
/// writer), and checked to be a regular file of at most `cap` bytes once open (it may have been
/// replaced since a check).
fn open(path: &Path, cap: u64) -> Result<File, Unusable> {
    // Before the open, so that a socket (which cannot be opened) is named as one too.
    check(path, cap)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(Unusable::Io)?;
    usable(&file.metadata().map_err(Unusable::Io)?, cap)?;
    Ok(file)
}

/// The contents of the regular file `path`, `cap` bytes at most (a file that grows while it is
/// read is cut there and refused, so no read goes on for ever).
pub fn read(path: &Path, cap: u64) -> Result<Vec<u8>, Unusable> {
    let file = open(path, cap)?;
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(Unusable::Io)?;
    if bytes.len() as u64 > cap {
        return Err(Unusable::TooLarge(cap));
    }
    Ok(bytes)
}

/// [`read`], or, when `path` is a pipe or a FIFO, what its writer writes before it closes it
/// (`cap` bytes at most, within [`PIPE_WAIT`]): for the files redlock only reads once.
pub fn read_or_pipe(path: &Path, cap: u64) -> Result<Vec<u8>, Unusable> {
    read_or_pipe_within(path, cap, PIPE_WAIT)
}

fn read_or_pipe_within(path: &Path, cap: u64, wait: Duration) -> Result<Vec<u8>, Unusable> {
    let meta = std::fs::metadata(path).map_err(Unusable::Io)?;
    if !meta.file_type().is_fifo() {
        return read(path, cap);
    }
    // O_NONBLOCK: the open returns at once even with no writer yet, and the reads below wait
    // in poll, with a deadline, rather than in read.
    let mut pipe = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(Unusable::Io)?;
    let deadline = Instant::now() + wait;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Linux reports no hang-up on a FIFO that never had a writer, so this waits for one.
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => return Err(Unusable::PipeOpen(wait)),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(Unusable::Io(e.into())),
        }
        match pipe.read(&mut buf) {
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() as u64 > cap {
                    return Err(Unusable::TooLarge(cap));
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(Unusable::Io(e)),
        }
    }
}

/// [`read`], or None when there is no file at `path`.
pub fn read_if_there(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, Unusable> {
    match read(path, cap) {
        Err(Unusable::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        other => other.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = std::env::temp_dir().join(format!("redlock-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, "hunter2\n").unwrap();
        assert_eq!(read(&file, 8).unwrap(), b"hunter2\n");
        assert!(matches!(read(&file, 7), Err(Unusable::TooLarge(7))));
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Refused at once: the open does not wait for a writer.
        let err = read(&fifo, 8).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (a FIFO)");
        assert!(matches!(read_or_pipe(&file, 8), Ok(b) if b == b"hunter2\n"));
        assert!(matches!(
            read_or_pipe(&dir, 8),
            Err(Unusable::NotRegular(_))
        ));
        let err = read(Path::new("/dev/zero"), 8).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (a character device)");
        let err = read(&dir, 8).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (a directory)");
        assert!(read_if_there(&dir.join("missing"), 8).unwrap().is_none());
        assert!(check(&fifo, 8).is_err() && check(&file, 8).is_ok());
        assert_eq!(size(PASSWORD_CAP), "64 KiB");
        assert_eq!(size(PEM_CAP), "1 MiB");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO: what a writer writes before it closes it is read, to the cap; one nobody writes
    /// to ends at [`PIPE_WAIT`].
    #[test]
    fn a_pipe_is_read_until_its_writer_closes_it() {
        let dir = std::env::temp_dir().join(format!("redlock-pipe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let write = |what: &'static [u8]| {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                std::fs::write(fifo, what).unwrap();
            })
        };
        let writer = write(b"hunter2\n");
        assert_eq!(read_or_pipe(&fifo, 64).unwrap(), b"hunter2\n");
        writer.join().unwrap();
        let writer = write(&[b'x'; 100]);
        assert!(matches!(
            read_or_pipe(&fifo, 64),
            Err(Unusable::TooLarge(64))
        ));
        // The writer may be mid-write when the reader leaves: a broken pipe is its business.
        let _ = writer.join();
        let wait = Duration::from_millis(300);
        let started = Instant::now();
        let err = read_or_pipe_within(&fifo, 64, wait).unwrap_err();
        assert!(
            started.elapsed() >= wait / 2,
            "{err} after {:?}",
            started.elapsed()
        );
        assert_eq!(
            err.to_string(),
            "a pipe that was not written and closed within 300ms"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
