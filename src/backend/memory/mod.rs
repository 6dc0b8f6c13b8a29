//! The executable model of the lock: every rule of the contract in the plainest code, in one
//! process's memory. Read `model.rs` first: it is the spec the real backends are held to (by
//! the conformance suite in `src/conformance/`, and the model-based property test), written as
//! a struct whose methods say what the lock does (take, extend, release, wake, leave, force,
//! read), with time an injected [`Clock`] that only the caller moves. This file only adapts it
//! to the boundary's traits, each method a line or two, plus what a server has and a struct
//! does not: being frozen, killed and restarted.
//!
//! Not reachable from a URL a user types, on purpose: a lock in one process's memory excludes
//! nothing across machines, so a `memory://` a user could type would be a lock that silently
//! locks nothing. The conformance suite opens it through its hidden entry ([`open`]) and no
//! other way.
//!
//! Where the real backends answer differently, the model states one rule and says so beside it
//! (a release wakes every waiter here; Redis wakes one, a `--fair` queue its head).
//!
//! May use `lock`; nothing else.

pub(crate) mod model;

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::lock::{
    Acquire, Backend, Capabilities, Failure, Forced, Held, Inspected, Interrupt, Locker, Node,
    Renewal, RunEnding, RunSpec, Runs, Until,
};
pub(crate) use model::Clock;
use model::{Ask, Locks};

/// How the model's server is, as a fixture makes a real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    /// Answers every request.
    Up,
    /// Stopped (SIGSTOP): a request waits out its timeout, by the model's clock, unanswered.
    Frozen,
    /// Gone (killed): a request is refused at once. What it kept is kept, as a server that
    /// persists its data keeps it.
    Down,
}

/// The model's one server: the locks, how the server is, and the clock.
pub(crate) struct Server {
    state: Mutex<(Locks, Health)>,
    /// Signalled on every change a waiter may be waiting for (a release, an interrupt, time).
    changed: Condvar,
    pub(crate) clock: Clock,
}

/// A fresh model with its clock at `unix_ms` (the hidden test entry; see the header).
pub(crate) fn open(unix_ms: u64) -> Memory {
    Memory(Arc::new(Server {
        state: Mutex::new((Locks::default(), Health::Up)),
        changed: Condvar::new(),
        clock: Clock::at(unix_ms),
    }))
}

impl Server {
    fn state(&self) -> MutexGuard<'_, (Locks, Health)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One request within `timeout`: `step` applied to the locks at the clock's time, or the
    /// failure a frozen or killed server gives.
    fn request<T>(
        &self,
        timeout: Duration,
        step: impl FnOnce(&mut Locks, u64) -> T,
    ) -> Result<T, Failure> {
        let mut state = self.state();
        match state.1 {
            Health::Up => {
                let answer = step(&mut state.0, self.clock.now_ms());
                self.changed.notify_all();
                Ok(answer)
            }
            Health::Frozen => {
                self.clock.advance(timeout);
                Err(Failure::Unreachable(
                    format!("no answer within {timeout:?}").into(),
                ))
            }
            Health::Down => Err(Failure::Unreachable("connection refused".into())),
        }
    }

    /// Set how the server is (a fixture's freeze, thaw, kill, restart).
    pub(crate) fn set(&self, health: Health) {
        self.state().1 = health;
        self.changed.notify_all();
    }

    /// Step the clock, waking the waiters whose time came.
    pub(crate) fn advance(&self, by: Duration) {
        let _state = self.state();
        self.clock.advance(by);
        self.changed.notify_all();
    }

    /// Block until `token`'s wait on `name` ends: woken, interrupted, or `hold` passed on the
    /// model's clock.
    fn wait(&self, name: &str, token: &str, hold: Duration) -> Result<bool, Failure> {
        let until = self.clock.now_ms() + u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
        let mut state = self.state();
        loop {
            if state.1 != Health::Up {
                return Err(Failure::Unreachable("connection lost while waiting".into()));
            }
            let now = self.clock.now_ms();
            if let Some(woken) = state.0.woken(name, token, now) {
                return Ok(woken);
            }
            if now >= until {
                return Ok(false);
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The model as a [`Backend`].
#[derive(Clone)]
pub(crate) struct Memory(pub(crate) Arc<Server>);

impl Backend for Memory {
    fn nodes(&self) -> Vec<String> {
        vec!["memory".to_owned()]
    }

    fn described(&self) -> String {
        "the in-memory model".to_owned()
    }

    /// Everything the contract has; no backend options, no tables.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            quorum: false,
            fair: Ok(()),
            several_holders: Ok(()),
            options: Vec::new(),
            init: false,
        }
    }

    fn locker(&self, run: &RunSpec) -> Box<dyn Locker> {
        let ask = Ask {
            kind: run.kind,
            fair: run.fair,
            min_interval: run.min_interval,
            holder: run.holder.clone(),
        };
        Box::new(MemoryLocker {
            server: Arc::clone(&self.0),
            name: run.key.clone(),
            token: run.token.clone(),
            ask,
        })
    }

    fn node(&self, _index: usize) -> Box<dyn Node> {
        Box::new(self.clone())
    }
}

/// One run's view of the model.
struct MemoryLocker {
    server: Arc<Server>,
    name: String,
    token: String,
    ask: Ask,
}

impl Locker for MemoryLocker {
    /// Until the pause, counted on the model's clock from now (the model's server answers a
    /// wait on time: it has no allowances to add).
    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        self.server
            .wait(&self.name, &self.token, until.pause.until())
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        Box::new(MemoryInterrupt {
            server: Arc::clone(&self.server),
            name: self.name.clone(),
            token: self.token.clone(),
        })
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let (name, token) = (&self.name, &self.token);
        self.server
            .request(timeout, |l, now| l.leave(name, token, busy, now))
    }

    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        let (name, token, ask) = (&self.name, &self.token, &self.ask);
        self.server
            .request(timeout, |l, now| l.acquire(name, ask, token, ttl, now))
    }

    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let (name, token) = (&self.name, &self.token);
        self.server
            .request(timeout, |l, now| l.extend(name, token, ttl, now).into())
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        let (name, token) = (&self.name, &self.token);
        self.server
            .request(timeout, |l, now| l.release(name, token, ended, now))
    }
}

/// Cuts one waiter's wait short.
struct MemoryInterrupt {
    server: Arc<Server>,
    name: String,
    token: String,
}

impl Interrupt for MemoryInterrupt {
    fn interrupt(&self, timeout: Duration) -> Result<(), Failure> {
        let (name, token) = (&self.name, &self.token);
        self.server
            .request(timeout, |l, _| l.interrupt(name, token))
    }
}

impl Node for Memory {
    fn names(&mut self, timeout: Duration) -> Result<BTreeSet<String>, Failure> {
        self.0.request(timeout, |l, now| l.names(now))
    }

    fn inspect(&mut self, name: &str, timeout: Duration) -> Result<Inspected, Failure> {
        self.0.request(timeout, |l, now| {
            Inspected::Lock(Box::new(l.inspect(name, now)))
        })
    }

    fn runs(&mut self, name: &str, timeout: Duration) -> Result<Runs, Failure> {
        self.0.request(timeout, |l, now| l.runs(name, now))
    }

    fn force_release(
        &mut self,
        name: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        self.0
            .request(timeout, |l, now| l.force_release(name, token, now))
    }
}
