//! One conformance suite at the boundary, run in-process against the model (`backend/memory`)
//! and every real backend: each rule of the contract and the faults every backend must
//! survive, written once as `fn(&Subject) -> Result<(), String>` over the [`Backend`] the
//! run and the admin commands use (`cases`), and a model-based property test that drives the
//! model and a real backend with the same random operations and compares their answers
//! (`props`).
//!
//! Public only because the integration tests, which start the real servers, reach nothing
//! else of the library: `#[doc(hidden)]`, and not an interface. A fixture gives the suite its
//! server through [`Service`], one verb set for every backend; the suite opens the backend
//! from URLs as a run does (`backend::open`), or the model through its hidden entry.
//!
//! May use `backend`, `lock`, `lease` (the renewal schedule a run keeps), `clock` and `exit`.

mod cases;
mod props;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::memory::{self, Health, Server};
use crate::backend::{Connect, Tls};
use crate::clock::Moment;
use crate::lock::{Backend, Holder, Kind, RunSpec};

pub use props::{Op, compare};

/// What a fixture does to the lock's server (every member of a cluster at once), the same verbs
/// for every backend.
pub trait Service: Send + Sync {
    /// Stop it answering (SIGSTOP): it keeps its connections and its data.
    fn freeze(&self);
    /// Let it answer again (SIGCONT).
    fn thaw(&self);
    /// Kill it (SIGKILL): a request is refused.
    fn kill(&self);
    /// Start it again after [`Service::kill`], on the same address, with what it kept.
    fn restart(&self);
    /// Let `by` pass on the server's clock: the model steps its clock, a real server sleeps.
    fn advance(&self, by: Duration);
}

/// The backend under test, the service beneath it, and the timings its cases use.
pub struct Subject {
    backend: Box<dyn Backend>,
    service: Box<dyn Service>,
    /// The model's server, whose clock is the suite's; None for a real one (real time).
    model: Option<Arc<Server>>,
    /// The lease the cases take: short, and at least what the backend accepts (etcd's leases
    /// are whole seconds).
    pub lease: Duration,
    /// The bound of one request.
    pub timeout: Duration,
    /// The prefix of this subject's lock names: each case names its locks under it.
    pub name: String,
}

impl Subject {
    /// The model, with its clock at an arbitrary unix time.
    pub fn model() -> Subject {
        let memory = memory::open(1_700_000_000_000);
        let server = Arc::clone(&memory.0);
        Subject {
            backend: Box::new(memory),
            service: Box::new(Model(Arc::clone(&server))),
            model: Some(server),
            lease: Duration::from_millis(1000),
            timeout: Duration::from_secs(1),
            name: "model".to_owned(),
        }
    }

    /// The backend `urls` name, as a run opens it (its tables made where it needs them), over
    /// the server `service` controls, with leases of `lease`.
    pub fn open(
        urls: &[&str],
        service: Box<dyn Service>,
        lease: Duration,
    ) -> Result<Subject, String> {
        let backend = crate::backend::open(Connect {
            urls: urls.to_vec(),
            tls: Tls::default(),
            password: None,
            prefix: "conformance:".to_owned(),
            options: Vec::new(),
        })?;
        let timeout = Duration::from_secs(2);
        if backend.tables().is_some() {
            backend.init(timeout).map_err(|e| e.to_string())?;
        }
        Ok(Subject {
            backend,
            service,
            model: None,
            lease,
            timeout,
            name: format!("c{}", uuid::Uuid::new_v4().simple()),
        })
    }

    /// Now, on the subject's clock.
    fn now(&self) -> Moment {
        match &self.model {
            Some(server) => Moment::from_boot(Duration::from_millis(server.clock.now_ms())),
            None => Moment::now(),
        }
    }

    /// Let time pass until `at` on the subject's clock.
    fn until(&self, at: Moment) {
        let left = at.saturating_since(self.now());
        if !left.is_zero() {
            self.service.advance(left);
        }
    }

    /// What a run of lock `key` (a name under this subject's) asks, as `kind`, with a token
    /// of its own.
    fn spec(&self, key: &str, kind: Kind) -> RunSpec {
        RunSpec {
            key: format!("{}-{key}", self.name),
            token: uuid::Uuid::new_v4().to_string(),
            kind,
            fair: false,
            min_interval: None,
            holder: Holder {
                host: "conformance".to_owned(),
                pid: std::process::id(),
                command: format!("case {key}"),
                started: 0,
            },
            ttl: self.lease,
            waiting: self.lease,
        }
    }
}

/// The model as a service: its server's health and its clock.
struct Model(Arc<Server>);

impl Service for Model {
    fn freeze(&self) {
        self.0.set(Health::Frozen);
    }
    fn thaw(&self) {
        self.0.set(Health::Up);
    }
    fn kill(&self) {
        self.0.set(Health::Down);
    }
    fn restart(&self) {
        self.0.set(Health::Up);
    }
    fn advance(&self, by: Duration) {
        self.0.advance(by);
    }
}

/// What one case came to.
#[derive(Debug)]
pub struct Report {
    pub case: &'static str,
    pub took: Duration,
    /// Why it failed; None when it passed.
    pub failed: Option<String>,
}

/// The names of the cases, in the order [`run`] runs them.
pub fn names() -> Vec<&'static str> {
    cases::ALL.iter().map(|(name, _)| *name).collect()
}

/// Run the cases named in `only` (every case when empty) against `subject`, one after another,
/// each on locks of its own; a case that panics fails with the panic's message.
pub fn run(subject: &Subject, only: &[&str]) -> Vec<Report> {
    cases::ALL
        .iter()
        .filter(|(name, _)| only.is_empty() || only.contains(name))
        .map(|(case, check)| {
            let started = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(subject)))
                .unwrap_or_else(|panic| {
                    Err(panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".to_owned()))
                });
            Report {
                case,
                took: started.elapsed(),
                failed: result.err(),
            }
        })
        .collect()
}
