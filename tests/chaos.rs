//! The chaos suite: clients race `redlock run --wait` for one lock while faults are injected at
//! random moments, and a checker proves from the recorded history that no two workers ran at once
//! outside the windows where a fault robbed a holder, and that the fenced store refused the stale
//! writers inside them. Then the same faults hit a semaphore (`--limit 3`: never more than 3 at
//! once outside the windows) and a mix of `--shared` and exclusive clients (an exclusive worker
//! never beside another), with tokens following the order of acquisitions. Redis restarted
//! empty must not send tokens back, and Valkey crashed as a machine crashes (its writes not
//! fsynced are lost), under clients that run with `--fsync`, must come back with every lock it
//! acknowledged: no second holder (`CHAOS_APPENDFSYNC`, `always` by default, sets its policy).
//! Last, the same clients on a real 3-member etcd cluster whose members are stopped, killed and
//! cut to a minority, and whose leases are revoked (tests/chaos/etcd.rs); and on a real
//! PostgreSQL frozen past the lease, restarted, killed, and robbed of its holder's row by hand
//! (tests/chaos/pg.rs); and on a real 3-member ZooKeeper ensemble whose members are stopped,
//! killed and cut to a minority, and whose holder's entry is deleted (tests/chaos/zookeeper.rs).
//! Then partitions: the clients on hosts in network namespaces, the lock
//! on etcd members or Redis masters on hosts of their own, the links between them cut and
//! healed (tests/chaos/partition.rs; needs root, as the partition suite does).
//!
//! `cargo test --test chaos` runs the short form (CI); `CHAOS_SECS=180 CHAOS_CLIENTS=16 cargo
//! test --test chaos` the long one. `CHAOS_TTL_MS` sets the lease (default 1000) and
//! `CHAOS_SEED` the random seed. The semaphore and the mix run one round of every fault unless
//! `CHAOS_MULTI_SECS` says longer, with `CHAOS_MULTI_CLIENTS` clients (6), `CHAOS_MULTI_TTL_MS`
//! (500: a round in about 10 s each) and `CHAOS_LIMIT` (3). The etcd phase runs for
//! `CHAOS_ETCD_SECS` (20) on a lease of `CHAOS_ETCD_TTL_MS` (1000), with `CHAOS_CLIENTS`
//! clients; the PostgreSQL phase for `CHAOS_PG_SECS` (20) on `CHAOS_PG_TTL_MS` (1000); the
//! ZooKeeper phase for `CHAOS_ZK_SECS` (20) on `CHAOS_ZK_TTL_MS` (3000); each
//! partition phase for `CHAOS_PARTITION_SECS` (12) on `CHAOS_PARTITION_TTL_MS` (1000), and
//! scripts/chaos-partition.sh runs them long. `CHAOS_PHASES=semaphore,mix` runs only the
//! phases named (main, empty, fsync, semaphore, mix, etcd, postgres, zookeeper, partition-etcd,
//! partition-quorum, partition-sentinel, or partition for the three; a deterministic replay always runs first, alone
//! with `CHAOS_PHASES=replay`). The binary re-executes itself as the worker (`--chaos-worker <store
//! socket>`).

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
    // The clients' threads, each running redlock again and again, and their runs.
    pub mod clients;
    // What the phases expect beyond the checker's rules.
    pub mod expect;
    // The fault injectors.
    pub mod faults;
    // The etcd phase: a 3-member cluster and its members' faults.
    pub mod etcd;
    // The partition phase: hosts in network namespaces, cut and healed, on etcd and a quorum.
    pub mod partition;
    // The PostgreSQL phase: one server frozen, restarted, killed, a holder's row deleted.
    pub mod pg;
    // The ZooKeeper phase: a 3-member ensemble, its members' faults, a holder's entry deleted.
    pub mod zookeeper;
    // Redis with Sentinel on a network's hosts: a master, two replicas, three sentinels.
    pub mod sentinel_net;
    // A history the semaphore phase met, replayed deterministically.
    pub mod replay;
    // The fenced store.
    pub mod store;
    // The worker the clients run under the lock.
    pub mod worker;
}

use std::thread;
use std::time::{Duration, Instant};

use chaos::check::{Report, Rules, Run};
use chaos::clients::expect_no_survivors;
use chaos::expect::{
    expect_fenced_store, expect_mix, expect_restart_survived, expect_semaphore,
    expect_tokens_in_order,
};
use chaos::faults::{self, Fault, Kind, World};
use chaos::partition::Backend;
use chaos::store::Store;
use chaos::worker;
use common::{Proxy, RedisServer, ServerOpts, TempDir};

const KEY: &str = "chaos";

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine.
pub fn mono_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC exists on every Linux");
    Duration::from(now).as_nanos() as u64
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

/// How the clients take the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `redlock run` alone: one holder at a time.
    Exclusive,
    /// `redlock run --limit N`: a semaphore.
    Limit(u32),
    /// Every `exclusive_every`-th client exclusive (the first of all among them), the others
    /// `--shared`.
    Mix { exclusive_every: usize },
}

impl How {
    fn shared(self, client: usize) -> bool {
        match self {
            How::Mix { exclusive_every } => !client.is_multiple_of(exclusive_every),
            _ => false,
        }
    }

    fn flags(self, client: usize) -> Vec<String> {
        match self {
            How::Limit(n) => vec!["--limit".into(), n.to_string()],
            _ if self.shared(client) => vec!["--shared".into()],
            _ => Vec::new(),
        }
    }

    fn rules(self, clients: usize) -> Rules {
        match self {
            How::Exclusive => Rules::Limit(1),
            How::Limit(n) => Rules::Limit(n as usize),
            How::Mix { .. } => Rules::Mix((0..clients).map(|c| self.shared(c)).collect()),
        }
    }
}

/// What the server keeps across a SIGKILL and restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persistence {
    /// Redis with `appendfsync always`: every acknowledged write.
    Always,
    /// Redis without an append-only file: nothing (the lock and the counter are lost).
    Nothing,
    /// Valkey 8 whose SIGKILL is a machine's crash (its writes not fsynced are lost), with
    /// `appendfsync` as given, and clients run with `--fsync`.
    MachineCrash { appendfsync: &'static str },
}

/// What the clients take the lock on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// One Redis (or Valkey) server, kept as given, with a fault-injecting proxy before it.
    Redis(Persistence),
    /// A real 3-member etcd cluster (tests/chaos/etcd.rs).
    Etcd,
    /// A real PostgreSQL server (tests/chaos/pg.rs).
    Postgres,
    /// A real 3-member ZooKeeper ensemble (tests/chaos/zookeeper.rs).
    ZooKeeper,
    /// Three servers on hosts in network namespaces, the clients on others
    /// (tests/chaos/partition.rs).
    Partition(chaos::partition::Backend),
}

/// One phase: a server, a fenced store, clients and faults.
struct Phase {
    /// What `CHAOS_PHASES` calls it.
    name: &'static str,
    title: String,
    how: How,
    server: Server,
    kinds: &'static [Kind],
    secs: u64,
    clients: usize,
    ttl: Duration,
    /// How many writes each worker makes, about 10 ms apart: [lo, hi).
    writes: (u64, u64),
    /// Every fourth client's writes instead, if set: workers that outlive their lease's first
    /// renewals, so that a fault can cut a holder off in the middle of its run.
    long_writes: Option<(u64, u64)>,
}

impl Phase {
    /// None when the phase cannot run here, and said why.
    fn run(&self, rng: &mut Rng) -> Option<Report> {
        match self.server {
            Server::Redis(persistence) => Some(self.run_redis(persistence, rng)),
            Server::Etcd => Some(chaos::etcd::run(self, rng)),
            Server::Postgres => Some(chaos::pg::run(self, rng)),
            Server::ZooKeeper => Some(chaos::zookeeper::run(self, rng)),
            Server::Partition(backend) => chaos::partition::run(self, backend, rng),
        }
    }

    fn run_redis(&self, persistence: Persistence, rng: &mut Rng) -> Report {
        let dir = TempDir::new();
        let mut redis = RedisServer::start_with(match persistence {
            Persistence::Always => ServerOpts {
                persist: true,
                ..ServerOpts::default()
            },
            Persistence::Nothing => ServerOpts::default(),
            Persistence::MachineCrash { appendfsync } => ServerOpts {
                binary: Some(common::valkey_binary()),
                args: ["--appendonly", "yes", "--appendfsync", appendfsync]
                    .map(String::from)
                    .to_vec(),
                lose_unsynced: true,
                ..ServerOpts::default()
            },
        });
        let proxy = Proxy::start(redis.port());
        let store = Store::start(&dir.join("store.sock"));
        let bound = self.bound();
        let started = Instant::now();
        // Half the clients reach Redis through the proxy, half directly: a cut-off holder must
        // stop its command before the others can take the lock.
        let (via_proxy, direct) = (proxy.url(), redis.url());
        let clients = self.start_clients(&store, |client| {
            if client % 2 == 0 {
                via_proxy.clone()
            } else {
                direct.clone()
            }
        });
        let mut world = World {
            redis: &mut redis,
            proxy: &proxy,
            store: &store,
            ttl: self.ttl,
            lock_key: format!("redlock:{{{KEY}}}"),
            bound,
        };
        let faults = self.schedule(started, rng, |kind, rng| vec![world.inject(kind, rng)]);
        let runs = clients.finish();
        let mut report = self.report(started.elapsed(), faults, &store, runs);
        self.afterwards(&redis, &store, &mut report);
        report
    }

    /// Liveness: after a fault heals the lock is taken again within a few ttls; the constant
    /// covers process start-up on a loaded machine.
    fn bound(&self) -> Duration {
        self.ttl * 5 + Duration::from_secs(5)
    }

    /// Whether `client` runs the long workers.
    fn long(&self, client: usize) -> bool {
        self.long_writes.is_some() && client % 4 == 3
    }

    /// Rounds of every fault kind in a random order, with random gaps, until the time is up:
    /// at least one whole round, so every kind fires. `inject` returns what it recorded: the
    /// fault, and on etcd what an old leader did after it.
    fn schedule(
        &self,
        started: Instant,
        rng: &mut Rng,
        mut inject: impl FnMut(Kind, &mut Rng) -> Vec<Fault>,
    ) -> Vec<Fault> {
        let mut faults = Vec::new();
        let deadline = started + Duration::from_secs(self.secs);
        let mut injected = 0;
        loop {
            let mut order = self.kinds.to_vec();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.range(0, i as u64 + 1) as usize);
            }
            for kind in order {
                thread::sleep(self.ttl.mul_f64(0.2 + 0.8 * rng.unit()));
                faults.extend(inject(kind, rng));
                injected += 1;
                if injected >= self.kinds.len() && Instant::now() >= deadline {
                    return faults;
                }
            }
        }
    }

    /// The checker's verdict on what the phase recorded.
    fn report(&self, wall: Duration, faults: Vec<Fault>, store: &Store, runs: Vec<Run>) -> Report {
        Report::check(
            format!(
                "{}: {} clients, ttl {} ms",
                self.title,
                self.clients,
                self.ttl.as_millis()
            ),
            self.how.rules(self.clients),
            wall,
            faults,
            store.snapshot(),
            runs,
            self.bound(),
        )
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
        // The lock (a string or a sorted set of holders), how a set is used, its holders'
        // details, the exclusive holder's details: all gone with the last lease.
        for k in ["", ":kind", ":holders", ":holder"] {
            let k = format!("{key}{k}");
            let exists: bool = redis::cmd("EXISTS")
                .arg(&k)
                .query(&mut redis.conn())
                .unwrap();
            if exists {
                let kind: String = redis::cmd("TYPE").arg(&k).query(&mut redis.conn()).unwrap();
                report.problems.push(format!(
                    "{k} (a {kind}) is still there after the lock's ttl"
                ));
            }
        }
        expect_no_survivors(store, report);
    }
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
    // The semaphore and the shared/exclusive mix: one round of every fault unless told more.
    let multi_secs = env_num("CHAOS_MULTI_SECS", 0);
    let multi_clients = env_num("CHAOS_MULTI_CLIENTS", 6) as usize;
    let multi_ttl = Duration::from_millis(env_num("CHAOS_MULTI_TTL_MS", 500));
    let limit = env_num("CHAOS_LIMIT", 3) as u32;
    // The etcd phase: rounds of its five faults for this long, on this lease.
    let etcd_secs = env_num("CHAOS_ETCD_SECS", 20);
    let etcd_ttl = Duration::from_millis(env_num("CHAOS_ETCD_TTL_MS", 1000));
    // The PostgreSQL phase: rounds of its four faults for this long, on this lease.
    let pg_secs = env_num("CHAOS_PG_SECS", 20);
    let pg_ttl = Duration::from_millis(env_num("CHAOS_PG_TTL_MS", 1000));
    // The ZooKeeper phase: rounds of its five faults for this long, on this lease (3 s: a
    // frozen leader keeps every member from serving for the fixture's syncLimit of 2 s, and
    // then an election, which a lease must outlast for its holder to run on).
    let zk_secs = env_num("CHAOS_ZK_SECS", 20);
    let zk_ttl = Duration::from_millis(env_num("CHAOS_ZK_TTL_MS", 3000));
    // The partition phase: rounds of its three cuts for this long on each backend.
    let part_secs = env_num("CHAOS_PARTITION_SECS", 12);
    let part_ttl = Duration::from_millis(env_num("CHAOS_PARTITION_TTL_MS", 1000));
    let seed = env_num("CHAOS_SEED", mono_ns());
    // The fsync phase's policy: `always` (CI). With `everysec` the phase shows what Valkey 8's
    // WAITAOF acknowledges before the fsync (redis/redis#13793): see docs/high-availability.md.
    let fsync_policy: &'static str = match std::env::var("CHAOS_APPENDFSYNC").as_deref() {
        Ok("everysec") => "everysec",
        Ok("no") => "no",
        _ => "always",
    };
    println!("chaos: seed {seed} (CHAOS_SEED={seed} repeats the fault schedule)");
    let mut rng = Rng::new(seed);
    let phases = [
        Phase {
            name: "main",
            title: "Redis with appendfsync always".into(),
            how: How::Exclusive,
            server: Server::Redis(Persistence::Always),
            kinds: faults::MAIN,
            secs,
            clients,
            ttl,
            writes: (5, 16),
            long_writes: None,
        },
        Phase {
            name: "empty",
            title: "Redis restarted without persistence: tokens carried by its clock".into(),
            how: How::Exclusive,
            server: Server::Redis(Persistence::Nothing),
            kinds: &[Kind::RestartEmpty],
            secs: 0,
            clients,
            ttl,
            // Workers longer than a renewal interval: a holder is still running when Redis comes
            // back empty, and learns it lost the lock only at its next renewal.
            writes: (30, 60),
            long_writes: None,
        },
        Phase {
            name: "fsync",
            title: format!(
                "machine crashes: Valkey with appendfsync {fsync_policy}, clients with --fsync"
            ),
            how: How::Exclusive,
            server: Server::Redis(Persistence::MachineCrash {
                appendfsync: fsync_policy,
            }),
            // Only crashes: a lock acknowledged but not on disk would be lost with one, and a
            // second holder let in beside the first.
            kinds: &[Kind::RedisRestart, Kind::RedisRestart, Kind::RedisRestart],
            secs: 0,
            clients,
            ttl,
            writes: (5, 16),
            long_writes: None,
        },
        Phase {
            name: "semaphore",
            title: format!("semaphore: --limit {limit}, Redis with appendfsync always"),
            how: How::Limit(limit),
            server: Server::Redis(Persistence::Always),
            kinds: faults::MAIN,
            secs: multi_secs,
            clients: multi_clients,
            ttl: multi_ttl,
            writes: (5, 16),
            long_writes: None,
        },
        Phase {
            name: "mix",
            title: "shared and exclusive: every third client exclusive, the others --shared".into(),
            how: How::Mix { exclusive_every: 3 },
            server: Server::Redis(Persistence::Always),
            kinds: faults::MAIN,
            secs: multi_secs,
            clients: multi_clients,
            ttl: multi_ttl,
            writes: (5, 16),
            long_writes: None,
        },
        Phase {
            name: "etcd",
            title: "etcd: 3 members stopped, killed, cut to a minority, leases revoked".into(),
            how: How::Exclusive,
            server: Server::Etcd,
            kinds: chaos::etcd::FAULTS,
            secs: etcd_secs,
            clients,
            ttl: etcd_ttl,
            writes: (5, 16),
            // About 1.1 to 1.6 s: a holder that outlives its lease's renewals, for a majority
            // stopped to cut off.
            long_writes: Some((100, 140)),
        },
        Phase {
            name: "postgres",
            title: "PostgreSQL: frozen, restarted, killed, a holder's row deleted".into(),
            how: How::Exclusive,
            server: Server::Postgres,
            kinds: chaos::pg::FAULTS,
            secs: pg_secs,
            clients,
            ttl: pg_ttl,
            writes: (5, 16),
            // A holder that outlives its lease's renewals, for a freeze to cut off.
            long_writes: Some((100, 140)),
        },
        Phase {
            name: "zookeeper",
            title: "ZooKeeper: 3 members stopped, killed, cut to a minority, an entry deleted"
                .into(),
            how: How::Exclusive,
            server: Server::ZooKeeper,
            kinds: chaos::zookeeper::FAULTS,
            secs: zk_secs,
            clients,
            ttl: zk_ttl,
            writes: (5, 16),
            // About 3.3 to 4.8 s: a holder that outlives its lease's renewals, for a majority
            // stopped to cut off.
            long_writes: Some((300, 420)),
        },
        partition(
            "partition-etcd",
            "partitions: etcd, 3 members on 3 hosts",
            Backend::Etcd,
            (part_secs, clients, part_ttl),
        ),
        partition(
            "partition-quorum",
            "partitions: a quorum of 3 Redis masters on 3 hosts",
            Backend::Quorum,
            (part_secs, clients, part_ttl),
        ),
        partition(
            "partition-sentinel",
            "partitions: Redis with Sentinel, --min-replicas 1, on 3 hosts",
            Backend::Sentinel,
            (part_secs, clients, part_ttl),
        ),
    ];
    // CHAOS_PHASES=semaphore,mix runs only those (all by default); `partition` names every
    // partition-* phase.
    let only = std::env::var("CHAOS_PHASES").unwrap_or_default();
    let named =
        |p: &Phase, n: &str| n == p.name || (n == "partition" && p.name.starts_with("partition-"));
    let chosen: Vec<&Phase> = phases
        .iter()
        .filter(|p| only.is_empty() || only.split(',').any(|n| named(p, n.trim())))
        .collect();
    // The replay always runs first; CHAOS_PHASES=replay runs it alone.
    assert!(
        !chosen.is_empty() || only == "replay",
        "CHAOS_PHASES={only:?} names no phase"
    );
    let mut failed = 0;
    let replayed = chaos::replay::retried_acquire();
    for p in &replayed {
        println!("chaos: FAILED: {p}");
    }
    failed += usize::from(!replayed.is_empty());
    // The etcd phase draws from a generator of its own, seeded from the seed alone: with
    // CHAOS_PHASES=etcd the same seed gives the same schedule as in the whole run.
    // ("etcd" in ASCII).
    let mut etcd_rng = Rng::new(seed ^ 0x6574_6364);
    // And the PostgreSQL phase its own ("pg" in ASCII).
    let mut pg_rng = Rng::new(seed ^ 0x7067);
    // And the ZooKeeper phase its own ("zk" in ASCII).
    let mut zk_rng = Rng::new(seed ^ 0x7a6b);
    // And the partition phases theirs, each its own ("cut" in ASCII).
    let part_rng = |backend| Rng::new(seed ^ 0x0063_7574 ^ ((backend as u64) << 24));
    let mut skipped = 0;
    for phase in &chosen {
        let forgetful = phase.server == Server::Redis(Persistence::Nothing);
        let report = match phase.server {
            Server::Etcd => phase.run(&mut etcd_rng),
            Server::Postgres => phase.run(&mut pg_rng),
            Server::ZooKeeper => phase.run(&mut zk_rng),
            Server::Redis(_) => phase.run(&mut rng),
            Server::Partition(backend) => phase.run(&mut part_rng(backend)),
        };
        let Some(mut report) = report else {
            println!("chaos: {} skipped", phase.name);
            skipped += 1;
            continue;
        };
        expect_tokens_in_order(&mut report);
        if forgetful {
            expect_restart_survived(&mut report);
        }
        if phase.server == Server::Etcd {
            chaos::etcd::expect(&mut report, phase.ttl);
        }
        if phase.server == Server::Postgres {
            chaos::pg::expect(&mut report, phase.ttl);
        }
        if phase.server == Server::ZooKeeper {
            chaos::zookeeper::expect(&mut report, phase.ttl);
        }
        match phase.how {
            How::Exclusive if !forgetful => expect_fenced_store(&mut report),
            How::Exclusive => {}
            How::Limit(n) => expect_semaphore(&mut report, n as usize),
            How::Mix { .. } => expect_mix(&mut report),
        }
        println!("{}", report.table());
        for p in &report.problems {
            println!("chaos: FAILED: {p}");
        }
        failed += usize::from(!report.problems.is_empty());
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed; {skipped} skipped",
        if failed == 0 { "ok" } else { "FAILED" },
        chosen.len() + 1 - failed - skipped
    );
    if failed > 0 {
        std::process::exit(1);
    }
}

/// A partition phase on `backend`: (secs, clients, ttl). A fourth of the clients write 100 to
/// 140 times (about 1.1 to 1.6 s): holders that must renew through a cut.
fn partition(
    name: &'static str,
    title: &str,
    backend: Backend,
    (secs, clients, ttl): (u64, usize, Duration),
) -> Phase {
    Phase {
        name,
        title: title.into(),
        how: How::Exclusive,
        server: Server::Partition(backend),
        kinds: chaos::partition::FAULTS,
        secs,
        clients,
        ttl,
        writes: (5, 16),
        long_writes: Some((100, 140)),
    }
}
