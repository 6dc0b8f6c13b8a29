// Integration tests for redlock: each test starts its own redis-server and runs the real binary.

// Fixtures: redis-server per test, temp dirs, the redlock command, polling helpers.
mod util;

// Run a command under the lock: key while running, release, environment, fencing, URLs, output.
mod basic;
// Moving the lock between contenders: busy exit, --conflict-exit-code, --wait, no overlap.
mod contention;
// The exit-status table: passthrough, 128+N, 126, 127, --max-runtime's 124.
mod exit_codes;
// Redis failing under a held lock: killed, paused, restarted, scripts flushed, unreachable, auth.
mod faults;
// Hostile input: malformed values for every flag, odd lock names, garbage-speaking servers.
mod hostile;
// Property tests: parsing durations, signals, URLs and whole command lines.
mod props;
// Renewal and losing the lease: TTLs, overwritten or deleted keys, the whole group stopped.
mod lease;
// Signals sent to redlock: forwarding, --kill-after, escalation, SIGKILL, while waiting.
mod signals;
// A real terminal in tmux: reading the tty, Ctrl-C.
mod terminal;
// rediss://: verified server certificates, an unknown CA refused, TLS against a plain port.
mod tls;
// Bad command lines and environment values: 64, nothing run, nothing locked; --help, --version.
mod usage;
