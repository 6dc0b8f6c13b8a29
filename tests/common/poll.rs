//! Waiting for something that should happen soon, and the files the worker scripts write
//! (ready files, pid files, `date +%s%N` stamps) that the tests synchronise on instead of sleeps.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Generous upper bound for anything that should "happen soon"; only reached when something is broken.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `cond` every ~10 ms until it holds; panics with `what` after `timeout`.
#[track_caller]
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `path` to exist.
#[track_caller]
pub fn wait_for_file(path: &Path) {
    wait_until(PATIENCE, &format!("file {}", path.display()), || {
        path.exists()
    });
}

/// Waits for `path` to hold at least one complete line and returns its trimmed contents.
#[track_caller]
pub fn wait_for_line(path: &Path) -> String {
    let mut out = String::new();
    wait_until(
        PATIENCE,
        &format!("a complete line in {}", path.display()),
        || match fs::read_to_string(path) {
            Ok(s) if s.contains('\n') => {
                out = s;
                true
            }
            _ => false,
        },
    );
    out.trim().to_string()
}

/// Reads a pid written by `echo $$ > file`.
#[track_caller]
pub fn wait_for_pid(path: &Path) -> i32 {
    let s = wait_for_line(path);
    s.parse()
        .unwrap_or_else(|_| panic!("{} holds {s:?}, not a pid", path.display()))
}

/// Reads a whole file, or "" if it is missing.
pub fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// Writes an empty file (the "go" signal to a worker).
pub fn touch(path: &Path) {
    fs::write(path, "").unwrap();
}

/// Writes a file and makes it non-executable or executable.
pub fn write_file(path: &Path, contents: &str, mode: u32) {
    fs::write(path, contents).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Nanoseconds since the epoch, the same clock as `date +%s%N`.
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

/// Parses every line of a `date +%s%N` stamp file.
pub fn read_stamps(path: &Path) -> Vec<i128> {
    read(path)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|_| panic!("bad stamp {l:?} in {}", path.display()))
        })
        .collect()
}
