//! The in-process conformance suite (`redlock::conformance`): the same cases against the model
//! of the lock, one Redis server, a 3-member etcd cluster, PostgreSQL and a 3-member ZooKeeper
//! ensemble, each fixture doing
//! what the suite asks of its server through one `Service`; then the model-based property test,
//! the model beside each real backend. One server per backend, its cases one after another,
//! each on locks of its own.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redlock::boundary::Kind;
use redlock::conformance::{self, Op, Service, Subject};

use crate::common::*;

/// Where a backend answers otherwise than the model today, by case: the suite found these, and
/// each is to be fixed in its backend (or the rule changed in the model, if the model is
/// wrong). A case listed here that passes fails the test, so that the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[];

/// Every case against `subject`; the test fails with each case that did, and why, unless
/// [`KNOWN`] lists it.
fn conforms(backend: &str, subject: &Subject) {
    let started = Instant::now();
    let reports = conformance::run(subject, &[]);
    for report in &reports {
        eprintln!("{backend}: {} {:?}", report.case, report.took);
    }
    eprintln!("{backend}: all cases in {:?}", started.elapsed());
    let known = |case: &str| KNOWN.iter().any(|(b, c, _)| *b == backend && *c == case);
    let wrong: Vec<String> = reports
        .iter()
        .filter_map(|r| match (&r.failed, known(r.case)) {
            (Some(why), false) => Some(format!("{}: {why}", r.case)),
            (None, true) => Some(format!("{}: passes now; take it off KNOWN", r.case)),
            (Some(why), true) => {
                eprintln!("{backend}: known: {}: {why}", r.case);
                None
            }
            (None, false) => None,
        })
        .collect();
    assert!(wrong.is_empty(), "{backend}:\n{}", wrong.join("\n"));
    assert_eq!(reports.len(), conformance::names().len());
}

/// One Redis server; its data gone when killed (no persistence), as the cases allow.
struct Redis(Mutex<RedisServer>);

impl Service for Redis {
    fn freeze(&self) {
        self.0.lock().unwrap().pause();
    }
    fn thaw(&self) {
        self.0.lock().unwrap().resume();
    }
    fn kill(&self) {
        self.0.lock().unwrap().kill();
    }
    fn restart(&self) {
        self.0.lock().unwrap().restart();
    }
    fn advance(&self, by: Duration) {
        std::thread::sleep(by);
    }
}

/// Every member of one etcd cluster at once.
struct Etcd(Mutex<EtcdCluster>);

impl Service for Etcd {
    fn freeze(&self) {
        let mut etcd = self.0.lock().unwrap();
        (0..etcd.size()).for_each(|i| etcd.stop(i));
    }
    fn thaw(&self) {
        let mut etcd = self.0.lock().unwrap();
        (0..etcd.size()).for_each(|i| etcd.resume(i));
    }
    fn kill(&self) {
        let mut etcd = self.0.lock().unwrap();
        (0..etcd.size()).for_each(|i| etcd.kill(i));
    }
    fn restart(&self) {
        self.0.lock().unwrap().restart_all();
    }
    fn advance(&self, by: Duration) {
        std::thread::sleep(by);
    }
}

/// One PostgreSQL server.
struct Postgres(Mutex<PgServer>);

impl Service for Postgres {
    fn freeze(&self) {
        self.0.lock().unwrap().freeze();
    }
    fn thaw(&self) {
        self.0.lock().unwrap().thaw();
    }
    fn kill(&self) {
        self.0.lock().unwrap().kill();
    }
    fn restart(&self) {
        self.0.lock().unwrap().restart();
    }
    fn advance(&self, by: Duration) {
        std::thread::sleep(by);
    }
}

/// Every member of one ZooKeeper ensemble at once.
struct ZooKeeper(Mutex<ZkEnsemble>);

impl Service for ZooKeeper {
    fn freeze(&self) {
        let mut zk = self.0.lock().unwrap();
        (0..zk.size()).for_each(|i| zk.stop(i));
    }
    fn thaw(&self) {
        let mut zk = self.0.lock().unwrap();
        (0..zk.size()).for_each(|i| zk.resume(i));
    }
    fn kill(&self) {
        let mut zk = self.0.lock().unwrap();
        (0..zk.size()).for_each(|i| zk.kill(i));
    }
    fn restart(&self) {
        self.0.lock().unwrap().restart_all();
    }
    fn advance(&self, by: Duration) {
        std::thread::sleep(by);
    }
}

fn redis() -> Subject {
    let server = RedisServer::start();
    let url = server.url();
    let service = Box::new(Redis(Mutex::new(server)));
    Subject::open(&[&url], service, Duration::from_millis(400)).unwrap()
}

/// etcd's leases are whole seconds, at least 2 (docs/etcd.md).
fn etcd() -> Subject {
    let cluster = EtcdCluster::start();
    let url = cluster.url();
    let service = Box::new(Etcd(Mutex::new(cluster)));
    Subject::open(&[&url], service, Duration::from_secs(2)).unwrap()
}

/// A session's timeout is the lease. ZooKeeper ends a session at the first tick after its
/// timeout (the fixture's ticks are 200 ms): with a lease of 2 s, that is at most a tenth of
/// a lease late, short of the cases' margins (a quarter of a lease after a thaw; the property
/// test's steps of 0.4 of a lease, the nearest 1.2 leases).
fn zookeeper() -> Subject {
    let ensemble = ZkEnsemble::start();
    let url = ensemble.url();
    let service = Box::new(ZooKeeper(Mutex::new(ensemble)));
    Subject::open(&[&url], service, Duration::from_secs(2)).unwrap()
}

fn postgres() -> Subject {
    let server = PgServer::start();
    let url = server.url();
    let service = Box::new(Postgres(Mutex::new(server)));
    Subject::open(&[&url], service, Duration::from_millis(400)).unwrap()
}

#[test]
fn the_model() {
    conforms("model", &Subject::model());
}

#[test]
fn redis_conforms() {
    conforms("redis", &redis());
}

#[test]
fn etcd_conforms() {
    conforms("etcd", &etcd());
}

#[test]
fn zookeeper_conforms() {
    conforms("zookeeper", &zookeeper());
}

#[test]
fn postgres_conforms() {
    conforms("postgres", &postgres());
}

/// An operation of a random sequence: mostly takes, renewals and releases by three holders;
/// now and then a forced release, or time passing (rarely past a lease, which costs real time).
fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize).prop_map(Op::Take),
        2 => (0..3usize).prop_map(Op::Renew),
        3 => (0..3usize).prop_map(Op::Release),
        1 => Just(Op::Force),
        1 => Just(Op::Step(1)),
        1 => (2..4u8).prop_map(Op::Step),
    ]
}

/// `cases` random sequences of up to 12 operations, by three holders of one kind (a kind
/// drawn per sequence), on the model and on `real`, answers compared.
fn model_beside(backend: &str, real: &Subject, cases: u32) {
    let started = Instant::now();
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let kinds = prop_oneof![Just(Kind::Exclusive), Just(Kind::Limit(2))];
    let sequence = (kinds, proptest::collection::vec(op(), 1..12));
    let n = std::sync::atomic::AtomicU32::new(0);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&sequence, |(kind, ops)| {
        let n = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut model = Subject::model();
        model.lease = real.lease;
        let key = format!("prop{n}");
        conformance::compare(&model, real, &key, &[kind; 3], &ops).map_err(TestCaseError::fail)
    });
    eprintln!(
        "{backend}: {} sequences beside the model in {:?}",
        n.into_inner(),
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("{backend}: {e}");
    }
}

#[test]
fn redis_answers_as_the_model() {
    model_beside("redis", &redis(), 16);
}

#[test]
fn etcd_answers_as_the_model() {
    let etcd = etcd();
    // The first random sequence etcd once answered otherwise: a renewal by a client turned
    // away, which never held the lock, answered Extended.
    let mut model = Subject::model();
    model.lease = etcd.lease;
    let first = [Op::Take(1), Op::Take(0), Op::Renew(0)];
    conformance::compare(&model, &etcd, "first", &[Kind::Exclusive; 3], &first).unwrap();
    model_beside("etcd", &etcd, 8);
}

#[test]
fn zookeeper_answers_as_the_model() {
    model_beside("zookeeper", &zookeeper(), 8);
}

#[test]
fn postgres_answers_as_the_model() {
    model_beside("postgres", &postgres(), 16);
}
