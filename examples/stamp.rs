//! Benchmark helper: appends `START END` (CLOCK_MONOTONIC, ns) to a file around an optional
//! hold, so hand-over gaps between lock holders can be timed without a shell's start-up cost.
//!
//! Usage: `stamp FILE [HOLD_MS]`

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

fn now_ns() -> i128 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
}

fn main() {
    let start = now_ns();
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: stamp FILE [HOLD_MS]");
    let hold: u64 = args.next().map_or(0, |ms| ms.parse().expect("HOLD_MS"));
    std::thread::sleep(Duration::from_millis(hold));
    let line = format!("{start} {}\n", now_ns());
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .expect("appending to the stamp file");
}
