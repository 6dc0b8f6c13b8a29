//! The files a user names (`--password-file`, `--tls-ca-cert`, `--tls-cert`, `--tls-key`,
//! `SSL_CERT_FILE`, `--metrics-file`): regular files only, opened without blocking and read up
//! to a cap. A FIFO would block the open (or the read) for ever, a device such as `/dev/zero`
//! would be read until memory runs out, and neither is what the option means: they are refused
//! with a reason before anything else is done.
//!
//! Uses std and nix's libc constants only; used by `cli` and `report`.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest `--password-file`: far more than any password.
pub const PASSWORD_CAP: u64 = 64 << 10;
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
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Io(e) => write!(f, "cannot read it: {e}"),
            Unusable::NotRegular(what) => write!(f, "not a regular file ({what})"),
            Unusable::TooLarge(cap) => write!(f, "larger than {}", size(*cap)),
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
}
