//! The chaos suite: clients race `redlock run --wait` for one lock while faults are injected at
//! random moments, and a checker proves from the recorded history that no two workers ran at once
//! outside the windows where a fault robbed a holder, and that the fenced store refused the stale
//! writers inside them.
//!
//! `cargo test --test chaos` runs the short form (CI); `CHAOS_SECS=180 CHAOS_CLIENTS=16 cargo
//! test --test chaos` the long one. `CHAOS_TTL_MS` sets the lease (default 1000) and
//! `CHAOS_SEED` the random seed. The binary re-executes itself as the worker
//! (`--chaos-worker <store socket>`).

// Fixtures shared with the integration suite: redis-server, temp dirs, the redlock command. This
// suite uses only a few of them; the integration suite uses them all and keeps the lint on for
// them, so the allowance stays here, on this one declaration.
#[allow(dead_code)]
mod common;

// The suite's parts, in tests/chaos/ (a crate root's `mod x;` looks beside it, in tests/; the
// inline module adds the directory without a path attribute).
mod chaos {
    // The checker over the history, and the summary table.
    pub mod check;
    // The fault injectors.
    pub mod faults;
    // The fault-injecting TCP proxy.
    pub mod proxy;
    // The fenced store.
    pub mod store;
    // The worker the clients run under the lock.
    pub mod worker;
}

use std::ffi::OsStr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use chaos::check::{Report, Run};
use chaos::faults::{self, Kind, World};
use chaos::proxy::Proxy;
use chaos::store::Store;
use chaos::worker;
use common::{RedisServer, Redlock, ServerOpts, TempDir};

const KEY: &str = "chaos";

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine.
pub fn mono_ns() -> u64 {
    let mut ts = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// xorshift64*: enough randomness for fault timing, and repeatable from a printed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// One phase: Redis (persistent or not), a proxy before it, a fenced store, clients and faults.
struct Phase {
    title: &'static str,
    persist: bool,
    kinds: &'static [Kind],
    secs: u64,
    clients: usize,
    ttl: Duration,
    /// How many writes each worker makes, about 10 ms apart: [lo, hi).
    writes: (u64, u64),
}

impl Phase {
    fn run(&self, rng: &mut Rng) -> Report {
        let dir = TempDir::new();
        let mut redis = RedisServer::start_with(ServerOpts {
            persist: self.persist,
            ..ServerOpts::default()
        });
        let proxy = Proxy::start(redis.port());
        let store = Store::start(&dir.join("store.sock"));
        // Liveness: after a fault heals the lock is taken again within a few ttls; the constant
        // covers process start-up on a loaded machine.
        let bound = self.ttl * 5 + Duration::from_secs(5);
        let stop = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(Mutex::new(Vec::new()));
        let started = Instant::now();
        let mut clients = Vec::new();
        for client in 0..self.clients {
            // Half the clients reach Redis through the proxy, half directly: a cut-off holder
            // must stop its command before the others can take the lock.
            let url = if client % 2 == 0 {
                proxy.url()
            } else {
                redis.url()
            };
            let ttl = format!("{}ms", self.ttl.as_millis());
            let socket = store.path().to_owned();
            let writes = format!("{} {}", self.writes.0, self.writes.1);
            let (stop, runs) = (Arc::clone(&stop), Arc::clone(&runs));
            clients.push(thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let run = run_client(client, &url, &ttl, &socket, &writes);
                    let unreachable = run.code == 69;
                    runs.lock().unwrap().push(run);
                    if unreachable {
                        thread::sleep(Duration::from_millis(50));
                    }
                }
            }));
        }
        let mut world = World {
            redis: &mut redis,
            proxy: &proxy,
            store: &store,
            ttl: self.ttl,
            lock_key: format!("redlock:{{{KEY}}}"),
            bound,
        };
        let mut faults = Vec::new();
        // Rounds of every fault kind in a random order, with random gaps, until the time is up.
        let deadline = started + Duration::from_secs(self.secs);
        'rounds: loop {
            let mut order = self.kinds.to_vec();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.range(0, i as u64 + 1) as usize);
            }
            for kind in order {
                thread::sleep(self.ttl.mul_f64(0.2 + 0.8 * rng.unit()));
                faults.push(world.inject(kind, rng));
                // At least one whole round, so every kind fires.
                if faults.len() >= self.kinds.len() && Instant::now() >= deadline {
                    break 'rounds;
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        for c in clients {
            c.join().expect("a client thread panicked");
        }
        let wall = started.elapsed();
        let mut report = Report::check(
            format!(
                "{}: {} clients, ttl {} ms",
                self.title,
                self.clients,
                self.ttl.as_millis()
            ),
            wall,
            faults,
            store.snapshot(),
            std::mem::take(&mut runs.lock().unwrap()),
            bound,
        );
        self.afterwards(&redis, &store, &mut report);
        report
    }

    /// Afterwards no lock is left held beyond its ttl and no worker process survives.
    fn afterwards(&self, redis: &RedisServer, store: &Store, report: &mut Report) {
        let key = format!("redlock:{{{KEY}}}");
        let pttl = redis.pttl(&key);
        if pttl > self.ttl.as_millis() as i64 || pttl == -1 {
            report
                .problems
                .push(format!("the lock key is left with PTTL {pttl} ms"));
        }
        thread::sleep(Duration::from_millis(pttl.max(0) as u64 + 50));
        if let Some(v) = redis.get(&key) {
            report
                .problems
                .push(format!("the lock key still holds {v:?} after its ttl"));
        }
        let socket = store.path().to_string_lossy().into_owned();
        let give_up = Instant::now() + Duration::from_secs(5);
        let mut survivors = processes_mentioning(&socket);
        while !survivors.is_empty() && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(20));
            survivors = processes_mentioning(&socket);
        }
        if !survivors.is_empty() {
            report
                .problems
                .push(format!("worker processes survive: {survivors:?}"));
        }
    }
}

/// One `redlock run --wait` of the worker, to its end.
fn run_client(client: usize, url: &str, ttl: &str, socket: &std::path::Path, writes: &str) -> Run {
    let exe = std::env::current_exe().expect("current_exe");
    // Spawned by hand: no patience (a waiter may wait 30 s and then run), stdout not kept.
    let mut cmd = Redlock::run_at(url)
        .key(KEY)
        .ttl(ttl)
        .wait("30s")
        .command([
            exe.as_os_str(),
            OsStr::new("--chaos-worker"),
            socket.as_os_str(),
        ])
        .env("CHAOS_CLIENT", client.to_string())
        .env("CHAOS_WRITES", writes)
        .into_command();
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let spawned = mono_ns();
    let child = cmd.spawn().expect("running redlock");
    let pid = child.id() as i32;
    let out = child.wait_with_output().expect("waiting for redlock");
    let reaped = mono_ns();
    use std::os::unix::process::ExitStatusExt;
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    Run {
        client,
        pid,
        spawned,
        reaped,
        code,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Pids whose command line mentions `needle` (the store socket: the workers of this run).
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if pid != me && common::pid_alive(pid) && String::from_utf8_lossy(&cmdline).contains(needle)
        {
            pids.push(pid);
        }
    }
    pids
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--chaos-worker") {
        std::process::exit(worker::main(&args[2]));
    }
    // `cargo test <filter>` passes the filter to every test binary: run only when it matches.
    if args.iter().any(|a| a == "--list") {
        println!("chaos: test");
        return;
    }
    if let Some(filter) = args[1..].iter().find(|a| !a.starts_with('-'))
        && !"chaos".contains(filter.as_str())
    {
        return;
    }
    let secs = env_num("CHAOS_SECS", 45);
    let clients = env_num("CHAOS_CLIENTS", 8) as usize;
    let ttl = Duration::from_millis(env_num("CHAOS_TTL_MS", 1000));
    let seed = env_num("CHAOS_SEED", mono_ns());
    println!("chaos: seed {seed} (CHAOS_SEED={seed} repeats the fault schedule)");
    let mut rng = Rng::new(seed);
    let phases = [
        Phase {
            title: "Redis with appendfsync always",
            persist: true,
            kinds: faults::MAIN,
            secs,
            clients,
            ttl,
            writes: (5, 16),
        },
        Phase {
            title: "limit: Redis restarted without persistence",
            persist: false,
            kinds: &[Kind::RestartEmpty],
            secs: 0,
            clients,
            ttl,
            // Workers longer than a renewal interval: a holder is still running when Redis comes
            // back empty, and learns it lost the lock only at its next renewal.
            writes: (30, 60),
        },
    ];
    let mut failed = 0;
    for (i, phase) in phases.iter().enumerate() {
        let mut report = phase.run(&mut rng);
        if i == 0 {
            expect_persistent(&mut report);
        } else {
            expect_limit_shown(&mut report);
        }
        println!("{}", report.table());
        for p in &report.problems {
            println!("chaos: FAILED: {p}");
        }
        failed += usize::from(!report.problems.is_empty());
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        phases.len() - failed
    );
    if failed > 0 {
        std::process::exit(1);
    }
}

/// With Redis keeping its data: one worker at a time outside fault windows, tokens never repeat,
/// only robbed holders are refused, and the frozen holders' stale writes were refused.
fn expect_persistent(r: &mut Report) {
    if r.tokens_repeated > 0 {
        r.problems.push(format!(
            "{} fencing tokens repeated although Redis kept its data",
            r.tokens_repeated
        ));
    }
    if r.rejected != r.rejected_stale {
        r.problems.push(format!(
            "{} writes refused from holders no fault had robbed",
            r.rejected - r.rejected_stale
        ));
    }
    let frozen: Vec<i64> = r
        .faults
        .iter()
        .filter(|f| f.kind == Kind::StopJob)
        .filter_map(|f| f.fence)
        .collect();
    if !frozen.is_empty() && r.rejected_stale == 0 {
        r.problems
            .push("a frozen holder resumed but no stale write was refused".into());
    }
    // A holder frozen past its lease ran its command without the lock: redlock must say so.
    // Its run is the one with its pid whose life spans the worker's start: a long run reuses
    // pids (32768 of them, three a run: redlock, its watchdog, its command).
    for w in r.state.workers.iter().filter(|w| frozen.contains(&w.fence)) {
        let code = r
            .runs
            .iter()
            .find(|run| {
                run.pid == w.redlock
                    && run.client == w.client
                    && run.spawned <= w.start
                    && w.start <= run.reaped
            })
            .map(|run| run.code);
        if code != Some(76) {
            r.problems.push(format!(
                "the redlock frozen past its lease with token {} exited {code:?}, not 76",
                w.fence
            ));
        }
    }
}

/// Without persistence the counter restarts: the suite must show tokens handed out twice.
fn expect_limit_shown(r: &mut Report) {
    if r.tokens_repeated == 0 {
        r.problems
            .push("a restart without persistence repeated no fencing token".into());
    }
}
