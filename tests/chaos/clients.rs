//! The clients: threads that each run `redlock run --wait` of the worker again and again, on a
//! URL or from a host of a network, and what the checker needs of every run.

use std::ffi::OsStr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::check::{Report, Run};
use super::partition::Backend;
use super::store::Store;
use crate::common::Redlock;
use crate::{KEY, Persistence, Phase, Server, mono_ns};

/// Where a client runs redlock: the lock's URLs (three for a quorum), and the words that run it
/// inside a host (none: here).
pub struct Place {
    pub urls: Vec<String>,
    pub through: Vec<String>,
}

impl From<String> for Place {
    fn from(url: String) -> Place {
        Place {
            urls: vec![url],
            through: Vec::new(),
        }
    }
}

/// The clients' threads: each runs `redlock run --wait` again and again until told to stop.
pub struct Clients {
    stop: Arc<AtomicBool>,
    runs: Arc<Mutex<Vec<Run>>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Clients {
    /// Stop the loops, wait for the runs under way to end, and return every run.
    pub fn finish(self) -> Vec<Run> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().expect("a client thread panicked");
        }
        std::mem::take(&mut self.runs.lock().unwrap())
    }
}

impl Phase {
    /// Start the clients, client `c` against `url(c)`: a URL, or a [`Place`].
    pub(crate) fn start_clients<P: Into<Place>>(
        &self,
        store: &Store,
        url: impl Fn(usize) -> P,
    ) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for client in 0..self.clients {
            let place = url(client).into();
            let ttl = format!("{}ms", self.ttl.as_millis());
            let socket = store.path().to_owned();
            let (lo, hi) = match self.long_writes {
                Some(long) if self.long(client) => long,
                _ => self.writes,
            };
            let writes = format!("{lo} {hi}");
            let mut flags = self.how.flags(client);
            if let Server::Redis(Persistence::MachineCrash { .. }) = self.server {
                flags.push("--fsync".into());
            }
            // Sentinel's promise across a partition needs the replicas' acknowledgements.
            if self.server == Server::Partition(Backend::Sentinel) {
                flags.extend(["--min-replicas".into(), "1".into()]);
            }
            let (stop, runs) = (Arc::clone(&stop), Arc::clone(&runs));
            threads.push(thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let run = run_client(client, &place, &ttl, &flags, &socket, &writes);
                    // Unreachable, or (a semaphore's client) refused beside the intruder's key.
                    let pause = matches!(run.code, 64 | 69);
                    runs.lock().unwrap().push(run);
                    if pause {
                        thread::sleep(Duration::from_millis(50));
                    }
                }
            }));
        }
        Clients {
            stop,
            runs,
            threads,
        }
    }
}

/// No worker process of this phase is left running (after 5 s of grace).
pub fn expect_no_survivors(store: &Store, report: &mut Report) {
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

/// One `redlock run --wait` of the worker, to its end.
fn run_client(
    client: usize,
    place: &Place,
    ttl: &str,
    flags: &[String],
    socket: &std::path::Path,
    writes: &str,
) -> Run {
    let exe = std::env::current_exe().expect("current_exe");
    // Spawned by hand: no patience (a waiter may wait 30 s and then run), stdout not kept.
    let run = Redlock::sub("run").through(&place.through);
    let mut cmd = place
        .urls
        .iter()
        .fold(run, |r, url| r.url(url))
        .key(KEY)
        .ttl(ttl)
        .wait("30s")
        .args(flags)
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
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if pid != me
            && crate::common::pid_alive(pid)
            && String::from_utf8_lossy(&cmdline).contains(needle)
        {
            pids.push(pid);
        }
    }
    pids
}
