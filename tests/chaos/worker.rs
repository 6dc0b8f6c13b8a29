//! The job the chaos clients run under the lock: this binary re-executed, writing a few times to
//! the fenced store with the fencing token redlock gave it, stamping CLOCK_MONOTONIC as it goes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use crate::{Rng, mono_ns};

/// The worker's main: begin, a few writes about 10 ms apart (as many as CHAOS_WRITES="lo hi"
/// says, lo included, hi excluded), end. Exit 0, or 1 on a broken store.
pub fn main(socket: &str) -> i32 {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let fence: i64 = env("REDLOCK_FENCING_TOKEN").parse().unwrap_or(-1);
    let client: usize = env("CHAOS_CLIENT").parse().unwrap_or(usize::MAX);
    let writes: Vec<u64> = env("CHAOS_WRITES")
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let (lo, hi) = match writes[..] {
        [lo, hi] => (lo, hi),
        _ => (5, 16),
    };
    let Ok(stream) = UnixStream::connect(socket) else {
        return 1;
    };
    let mut rng = Rng::new(u64::from(std::process::id()) ^ mono_ns());
    let mut replies = BufReader::new(stream.try_clone().unwrap()).lines();
    let mut out = stream;
    let mut say = |line: String| -> bool {
        writeln!(out, "{line}").is_ok() && replies.next().is_some_and(|r| r.is_ok())
    };
    let pid = std::process::id();
    let parent = nix::unistd::getppid();
    if !say(format!("B {client} {fence} {pid} {parent} {}", mono_ns())) {
        return 1;
    }
    for _ in 0..rng.range(lo, hi) {
        thread::sleep(Duration::from_millis(rng.range(8, 13)));
        if !say(format!("W {}", mono_ns())) {
            return 1;
        }
    }
    if !say(format!("E {}", mono_ns())) {
        return 1;
    }
    0
}
