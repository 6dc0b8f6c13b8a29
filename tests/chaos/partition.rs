//! The partition phase: the clients race `redlock run --wait` for one lock from hosts in network
//! namespaces (tests/common/net.rs), two clients a host, while the network between the hosts is
//! cut and healed on a schedule drawn from the seed: the link between the two switches, one
//! host's port, or what one host sends to some others. The lock's three servers live on hosts of
//! their own: a 3-member etcd cluster, a quorum of three Redis masters, or a master with two
//! replicas and a sentinel beside each (tests/chaos/sentinel_net.rs), its clients with
//! `--min-replicas 1`. The workers reach the fenced store over its unix socket, which every
//! namespace shares: a cut never hides a write.
//!
//! A partition excuses nothing: the checks are the main phase's with no fault window at all (at
//! most one worker at any moment, only stale writes refused, and there are none to be, no token
//! repeated or out of order, the lock taken again within the bound of every heal). And its own:
//! a holder whose host the cut left without a working majority made its last write less than a
//! ttl after the cut (its lease was last renewed before it), and redlock stopped it (76). Cuts
//! did leave some holder so, or the phase showed nothing.

use std::fmt;
use std::time::{Duration, Instant};

use super::check::Report;
use super::clients::{Place, expect_no_survivors};
use super::faults::{self, Fault, Kind};
use super::sentinel_net::{DOWN_AFTER_MS, SentinelNet};
use super::store::{Store, Worker};
use crate::common::etcd_net::EtcdNet;
use crate::common::net::{Net, Side};
use crate::common::{PATIENCE, Proc, Redlock, TempDir, server_binary, wait_until};
use crate::{KEY, Phase, Rng, mono_ns};

/// The faults of the phase: every one once a round.
pub const FAULTS: &[Kind] = &[Kind::CutLink, Kind::CutHost, Kind::CutOneWay];

/// What the lock lives on: three servers, on hosts s0 (side A), s1 and s2 (side B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A 3-member etcd cluster: a member works while it reaches another one.
    Etcd,
    /// Three independent Redis masters, redlock with three `--url`: a client needs two.
    Quorum,
    /// A master and two replicas, a sentinel beside each, clients with `--min-replicas 1`: a
    /// client needs the master, and the master a replica.
    Sentinel,
}

const SERVERS: [&str; 3] = ["s0", "s1", "s2"];

/// Side A: one server and two client hosts; side B: two servers and two client hosts. A cut of
/// the link leaves side A's clients with one server of three.
const LAYOUT: [(&str, Side); 7] = [
    ("s0", Side::A),
    ("c0", Side::A),
    ("c1", Side::A),
    ("s1", Side::B),
    ("s2", Side::B),
    ("c2", Side::B),
    ("c3", Side::B),
];

/// The host client `c` runs on: clients 0 and 1 on c0, 2 and 3 on c1, and so on (the long
/// clients, 3 and 7, on c1 and c3: one a side).
fn host_of(client: usize) -> &'static str {
    ["c0", "c1", "c2", "c3"][(client / 2) % 4]
}

fn side_of(host: &str) -> Side {
    LAYOUT
        .iter()
        .find(|(h, _)| *h == host)
        .map(|&(_, s)| s)
        .unwrap()
}

/// One cut, as the hosts live it.
#[derive(Debug, Clone)]
enum Cut {
    /// The link between the switches: side A and side B apart.
    Link,
    /// One host's port: the host alone.
    Host(&'static str),
    /// What `from` sends to `to` dropped (a TCP connection between them then carries nothing).
    OneWay {
        from: &'static str,
        to: Vec<&'static str>,
    },
}

impl Cut {
    /// Whether hosts `a` and `b` still talk through the cut.
    fn joins(&self, a: &str, b: &str) -> bool {
        match self {
            Cut::Link => side_of(a) == side_of(b),
            Cut::Host(h) => a != *h && b != *h,
            Cut::OneWay { from, to } => {
                !((a == *from && to.contains(&b)) || (b == *from && to.contains(&a)))
            }
        }
    }

    /// Whether the cut leaves a client on `host` without a working majority: no etcd member it
    /// reaches reaches another member, it reaches fewer than two masters, or it does not reach
    /// the master Sentinel named before the cut (`master`), or that master no replica. (A
    /// sufficient condition: a member may be without a leader for other reasons; such a
    /// holder's stop is allowed, not required.)
    fn cuts_off(&self, backend: Backend, host: &str, master: Option<&str>) -> bool {
        let reached: Vec<&str> = SERVERS
            .into_iter()
            .filter(|s| self.joins(host, s))
            .collect();
        match backend {
            Backend::Quorum => reached.len() < 2,
            Backend::Etcd => !reached
                .iter()
                .any(|&s| SERVERS.iter().any(|&o| o != s && self.joins(s, o))),
            Backend::Sentinel => master.is_some_and(|m| {
                !reached.contains(&m) || !SERVERS.iter().any(|&r| r != m && self.joins(m, r))
            }),
        }
    }
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cut::Link => write!(f, "A | B"),
            Cut::Host(h) => write!(f, "{h} alone"),
            Cut::OneWay { from, to } => write!(f, "{from} -> {} dropped", to.join(",")),
        }
    }
}

/// The servers of one backend, running on their hosts until dropped.
struct Servers<'n> {
    etcd: Option<EtcdNet<'n>>,
    _redis: Vec<Proc>,
    _sentinel: Option<SentinelNet>,
}

impl<'n> Servers<'n> {
    fn start(net: &'n Net, backend: Backend) -> Servers<'n> {
        match backend {
            Backend::Etcd => Servers {
                etcd: Some(EtcdNet::start(net, &SERVERS)),
                _redis: Vec::new(),
                _sentinel: None,
            },
            Backend::Sentinel => Servers {
                etcd: None,
                _redis: Vec::new(),
                _sentinel: Some(SentinelNet::start(net, &SERVERS)),
            },
            Backend::Quorum => {
                let procs = SERVERS
                    .iter()
                    .map(|&h| {
                        let addr = &net.host(h).addr;
                        let mut cmd = net.command(h, server_binary());
                        cmd.args(["--bind", addr, "--port", "6379", "--save", ""])
                            .args(["--appendonly", "no", "--protected-mode", "no"]);
                        Proc::spawn(cmd)
                    })
                    .collect();
                for url in urls(net, backend) {
                    wait_until(PATIENCE, &format!("{url} to answer"), || {
                        let status = Redlock::admin_at("status", &url).through(net.within("c0"));
                        let out = status.key(KEY).any_status().any_stdout().any_stderr();
                        out.output().status.success()
                    });
                }
                Servers {
                    etcd: None,
                    _redis: procs,
                    _sentinel: None,
                }
            }
        }
    }
}

/// Each server's URL (for Sentinel, one URL naming every sentinel).
fn urls(net: &Net, backend: Backend) -> Vec<String> {
    let each = |scheme: &str, port: u16| {
        let url = |h: &&str| format!("{scheme}{}:{port}", net.host(h).addr);
        SERVERS.iter().map(url).collect()
    };
    match backend {
        Backend::Etcd => each("", 2379),
        Backend::Quorum => each("redis://", 6379),
        Backend::Sentinel => vec![SentinelNet::url(net, &SERVERS)],
    }
}

/// The net, the servers, the store, the clients and the cuts; then the checker's report. None
/// when network namespaces cannot be made here (Net::new said why).
pub fn run(phase: &Phase, backend: Backend, rng: &mut Rng) -> Option<Report> {
    the_model_holds();
    let net = Net::new(&LAYOUT)?;
    let servers = Servers::start(&net, backend);
    // The socket is a file every namespace sees.
    let dir = TempDir::new();
    let store = Store::start(&dir.join("store.sock"));
    let started = Instant::now();
    let members = urls(&net, backend);
    let clients = phase.start_clients(&store, |client| {
        let urls = match backend {
            // Each client names the members in an order of its own: redlock asks the first one
            // first, so a cut meets a third of the clients there.
            Backend::Etcd => {
                let mut order = members.clone();
                order.rotate_left(client % members.len());
                vec![format!("etcd://{}", order.join(","))]
            }
            Backend::Quorum | Backend::Sentinel => members.clone(),
        };
        Place {
            urls,
            through: net.within(host_of(client)),
        }
    });
    let mut cuts = Vec::new();
    // Whether a cut has aimed at a holder yet: the first cut of one host does, so that even
    // the short form cuts some holder off.
    let mut aimed = false;
    let faults = phase.schedule(started, rng, |kind, rng| {
        let (fault, cut, master) = inject(&net, &store, (phase, backend), kind, rng, &mut aimed);
        cuts.push((cut, master));
        vec![fault]
    });
    let runs = clients.finish();
    let mut report = phase.report(started.elapsed(), faults, &store, runs);
    expect_cut_off_in_time(&mut report, phase.ttl, backend, &cuts);
    nothing_left(&net, &servers, phase.ttl, &mut report);
    expect_no_survivors(&store, &mut report);
    drop(servers);
    Some(report)
}

/// Afterwards, every cut healed, nothing of the lock is left within a few ttls (a holder that
/// could not release leaves its lease to run out): on etcd no entry of its queue and no lease,
/// on every Redis server none of the lock's keys (the lock, its kind, holders and holder).
fn nothing_left(net: &Net, servers: &Servers, ttl: Duration, report: &mut Report) {
    let grace = ttl * 2 + Duration::from_secs(3);
    let give_up = Instant::now() + grace;
    let lock = format!("redlock:{{{KEY}}}");
    let left = || -> Result<String, String> {
        if let Some(etcd) = &servers.etcd {
            let (keys, leases) = etcd.leftovers("c0", &format!("{lock}/q/"))?;
            return Ok(match (keys, leases) {
                (0, 0) => String::new(),
                _ => format!("{keys} entries in {lock}/q/ and {leases} leases in etcd"),
            });
        }
        let keys: Vec<String> = ["", ":kind", ":holders", ":holder"]
            .iter()
            .map(|k| format!("{lock}{k}"))
            .collect();
        let mut found = Vec::new();
        for h in SERVERS {
            let addr = &net.host(h).addr;
            let mut cmd = net.command("c0", "timeout");
            cmd.args(["2", "redis-cli", "-h", addr, "-p", "6379", "exists"])
                .args(&keys);
            let out = cmd.output().map_err(|e| e.to_string())?;
            let n = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            match n.parse::<u32>() {
                Ok(0) => {}
                Ok(n) => found.push(format!("{n} of the lock's keys on {h}")),
                Err(_) => return Err(format!("{h} answered {n:?}")),
            }
        }
        Ok(found.join(", "))
    };
    loop {
        let seen = left();
        if seen.as_deref() == Ok("") {
            return;
        }
        if Instant::now() > give_up {
            let what = seen.unwrap_or_else(|e| format!("no answer: {e}"));
            report.problems.push(format!(
                "{grace:?} after the clients ended, the lock is not gone: {what}"
            ));
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Draw a cut of `kind`, make it for 1.5 to 2.5 ttls, heal it, and wait for the lock to be taken
/// again. Half the cuts of one host, and the first, aim at the host of a long holder that has
/// just started, so that a cut meets a holder that must renew through it. Returns the fault,
/// the cut, and with Sentinel the master its sentinels named just before it.
fn inject(
    net: &Net,
    store: &Store,
    (phase, backend): (&Phase, Backend),
    kind: Kind,
    rng: &mut Rng,
    aimed: &mut bool,
) -> (Fault, Cut, Option<&'static str>) {
    // Every draw first, the same whatever the hosts do: the schedule is the seed's.
    let aim = rng.unit() < 0.5 || (!*aimed && kind != Kind::CutLink);
    let any = LAYOUT[rng.range(0, LAYOUT.len() as u64) as usize].0;
    let mask = rng.range(1, 8);
    let hold = phase.ttl.mul_f64(1.5 + rng.unit());
    let holder = aim
        .then(|| {
            faults::holder(store, phase.bound(), |w| {
                phase.long(w.client) && w.writes <= 3
            })
        })
        .flatten();
    *aimed |= holder.is_some();
    let target = match holder {
        Some(w) => host_of(store.snapshot().workers[w].client),
        None => any,
    };
    let cut = match kind {
        Kind::CutLink => Cut::Link,
        Kind::CutHost => Cut::Host(target),
        Kind::CutOneWay => {
            // Aimed: every server. Otherwise the servers `mask`'s bits name, and no more than
            // the other hosts of a server that sends.
            let to: Vec<&'static str> = SERVERS
                .into_iter()
                .enumerate()
                .filter(|&(i, s)| s != target && (aim || mask & (1 << i) != 0))
                .map(|(_, s)| s)
                .collect();
            let to = if to.is_empty() {
                LAYOUT
                    .iter()
                    .map(|&(h, _)| h)
                    .filter(|h| *h != target)
                    .collect()
            } else {
                to
            };
            Cut::OneWay { from: target, to }
        }
        _ => unreachable!("{kind:?} is not a partition"),
    };
    let master = (backend == Backend::Sentinel)
        .then(|| SentinelNet::master(net, &SERVERS))
        .flatten();
    match &cut {
        Cut::Link => net.cut(),
        Cut::Host(h) => net.cut_host(h),
        Cut::OneWay { from, to } => net.cut_one_way(from, to),
    }
    // Stamped once the cut is made: no renewal sent after this is answered from across it.
    let at = mono_ns();
    std::thread::sleep(hold);
    let healed = mono_ns();
    match &cut {
        Cut::Link => net.heal(),
        Cut::Host(h) => net.heal_host(h),
        Cut::OneWay { from, .. } => net.heal_one_way(from),
    }
    let fault = Fault {
        kind,
        at,
        healed,
        fence: None,
        recovery: faults::recovery(store, healed, phase.bound()),
    };
    (fault, cut, master)
}

/// Holders the cuts left without a working majority: each made its last write less than a ttl
/// after the cut, and one that did not end on its own was stopped by redlock (76). Some holder
/// was cut off, or the phase showed nothing.
fn expect_cut_off_in_time(
    r: &mut Report,
    ttl: Duration,
    backend: Backend,
    cuts: &[(Cut, Option<&str>)],
) {
    let ttl_ns = ttl.as_nanos() as u64;
    let t0 = r.state.workers.first().map_or(0, |w| w.start);
    let ms = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
    let mut problems = Vec::new();
    let (mut cut_off, mut longest) = (0, 0u64);
    for (f, (cut, master)) in r.faults.iter().zip(cuts) {
        // Started before the heal: it took the lock before the cut, for no take gets through
        // one. With Sentinel, before a failover could have given its side a new master: no
        // sooner than a sentinel's wait after the cut.
        let taken_by = match backend {
            Backend::Sentinel => f.healed.min(f.at + DOWN_AFTER_MS * 1_000_000),
            _ => f.healed,
        };
        let held = r.state.workers.iter().filter(|w| w.start < taken_by);
        let off = |w: &&Worker| cut.cuts_off(backend, host_of(w.client), *master);
        for w in held.filter(|w| w.last >= f.at).filter(off) {
            cut_off += 1;
            longest = longest.max(w.last - f.at);
            if w.last >= f.at + ttl_ns {
                problems.push(format!(
                    "client {} on {} token {} ran to {:.0} ms, past its lease: cut {cut} \
                     ({}) at {:.0} ms, healed at {:.0} ms, the ttl is {} ms",
                    w.client,
                    host_of(w.client),
                    w.fence,
                    ms(w.last),
                    f.kind.name(),
                    ms(f.at),
                    ms(f.healed),
                    ttl.as_millis()
                ));
            }
        }
    }
    let mut stopped = 0;
    for w in r.state.workers.iter().filter(|w| !w.ended) {
        stopped += 1;
        let code = r.run_of(w).map(|run| run.code);
        if code != Some(76) {
            problems.push(format!(
                "client {} token {}: its worker was stopped at {:.0} ms, and its redlock exited \
                 {code:?}, not 76",
                w.client,
                w.fence,
                ms(w.last)
            ));
        }
    }
    if cut_off == 0 {
        problems.push(format!(
            "{} cuts left no holder without a majority: the phase showed nothing",
            cuts.len()
        ));
    }
    let lines: Vec<String> = r
        .faults
        .iter()
        .zip(cuts)
        .map(|(f, (cut, master))| {
            let master = master.map_or(String::new(), |m| format!(" (master {m})"));
            format!(
                "{:.1}-{:.1} s {cut}{master}",
                ms(f.at) / 1e3,
                ms(f.healed) / 1e3
            )
        })
        .collect();
    println!("chaos: the cuts: {}", lines.join("; "));
    r.notes.push((
        "holders a cut left without a majority".into(),
        cut_off.to_string(),
    ));
    r.notes.push((
        "longest such holder ran after its cut (ttl)".into(),
        format!("{} ms ({} ms)", longest / 1_000_000, ttl.as_millis()),
    ));
    r.notes.push((
        "workers stopped by redlock (lease lost)".into(),
        stopped.to_string(),
    ));
    r.problems.extend(problems);
}

/// What the check takes as cut off, on cuts whose answer is plain: the phase checks its own
/// model before it relies on it (the binary runs no unit tests).
fn the_model_holds() {
    use Backend::{Etcd, Quorum, Sentinel};
    let one_way = |from, to: &[&'static str]| Cut::OneWay {
        from,
        to: to.to_vec(),
    };
    for (cut, backend, host, off) in [
        // Side A has one server of three.
        (Cut::Link, Quorum, "c0", true),
        (Cut::Link, Etcd, "c1", true),
        (Cut::Link, Etcd, "c2", false),
        (Cut::Host("c3"), Etcd, "c3", true),
        (Cut::Host("s1"), Quorum, "c3", false),
        (Cut::Host("s1"), Etcd, "c0", false),
        // A member cut off from the others: its clients reach the two that are not.
        (one_way("s0", &["s1", "s2"]), Etcd, "c0", false),
        (Cut::Host("s0"), Etcd, "c0", false),
        (one_way("c2", &["s0", "s1"]), Quorum, "c2", true),
        (one_way("c2", &["s0", "s1"]), Etcd, "c2", false),
        (one_way("c2", &["s0", "s1", "s2"]), Etcd, "c2", true),
        // The master on side A has no replica there; side B has no master.
        (Cut::Link, Sentinel, "c0", true),
        (Cut::Link, Sentinel, "c3", true),
        (Cut::Host("s1"), Sentinel, "c0", false),
        (one_way("s0", &["s1", "s2"]), Sentinel, "c2", true),
        (one_way("c1", &["s2"]), Sentinel, "c1", false),
    ] {
        let master = (backend == Sentinel).then_some("s0");
        assert_eq!(
            cut.cuts_off(backend, host, master),
            off,
            "the phase's model: {cut} on {backend:?} for a client on {host}"
        );
    }
}
