//! The fenced resource: a unix-socket store that accepts a write only if its fencing token is at
//! least the highest it has accepted, and logs every worker's start, write and end.

use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;

use crate::mono_ns;

/// One run of the worker, as the store saw it. Stamps are CLOCK_MONOTONIC nanoseconds.
#[derive(Debug, Clone)]
pub struct Worker {
    pub client: usize,
    pub fence: i64,
    pub pid: i32,
    /// The redlock process that ran it.
    pub redlock: i32,
    /// The worker's own stamp when it started.
    pub start: u64,
    /// The worker's own stamp of its last action (its end, or its last write if it was killed).
    pub last: u64,
    /// When the store heard of it (the store's clock: same CLOCK_MONOTONIC).
    pub seen: u64,
    pub writes: u32,
    /// It said it was done (rather than vanishing: killed).
    pub ended: bool,
    /// Its connection closed.
    pub gone: bool,
}

impl Worker {
    pub fn active(&self) -> bool {
        !self.ended && !self.gone
    }
}

/// One write attempt, in the order the store decided on them.
#[derive(Debug, Clone)]
pub struct Write {
    pub worker: usize,
    pub fence: i64,
    pub accepted: bool,
    /// The highest accepted token before this write.
    pub highest_before: i64,
}

#[derive(Debug, Clone, Default)]
pub struct State {
    pub highest: i64,
    pub workers: Vec<Worker>,
    pub writes: Vec<Write>,
}

/// The store's server thread and its shared log.
pub struct Store {
    path: PathBuf,
    state: Arc<Mutex<State>>,
}

impl Store {
    /// Listen on a unix socket at `path`, a thread per connection.
    pub fn start(path: &Path) -> Store {
        let listener = UnixListener::bind(path).expect("binding the store socket");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                thread::spawn(move || serve(stream, &state));
            }
        });
        Store {
            path: path.to_owned(),
            state,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn snapshot(&self) -> State {
        self.state.lock().unwrap().clone()
    }

    pub fn highest(&self) -> i64 {
        self.state.lock().unwrap().highest
    }
}

fn serve(stream: UnixStream, state: &Mutex<State>) {
    let mut out = stream.try_clone().expect("cloning a store connection");
    let mut me = None;
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<i64>().ok()).unwrap_or(-1);
        let mut st = state.lock().unwrap();
        let reply = match (f.first().copied(), me) {
            (Some("B"), None) => {
                me = Some(st.workers.len());
                st.workers.push(Worker {
                    client: num(1) as usize,
                    fence: num(2),
                    pid: num(3) as i32,
                    redlock: num(4) as i32,
                    start: num(5) as u64,
                    last: num(5) as u64,
                    seen: mono_ns(),
                    writes: 0,
                    ended: false,
                    gone: false,
                });
                "ok"
            }
            (Some("W"), Some(w)) => {
                let fence = st.workers[w].fence;
                let highest_before = st.highest;
                let accepted = fence >= highest_before;
                if accepted {
                    st.highest = fence;
                }
                st.writes.push(Write {
                    worker: w,
                    fence,
                    accepted,
                    highest_before,
                });
                st.workers[w].writes += 1;
                st.workers[w].last = num(1) as u64;
                if accepted { "ok" } else { "no" }
            }
            (Some("E"), Some(w)) => {
                st.workers[w].ended = true;
                st.workers[w].last = num(1) as u64;
                "ok"
            }
            _ => "?",
        };
        drop(st);
        if writeln!(out, "{reply}").is_err() {
            break;
        }
    }
    if let Some(w) = me {
        state.lock().unwrap().workers[w].gone = true;
    }
}
