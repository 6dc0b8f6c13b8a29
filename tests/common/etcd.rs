//! A throwaway etcd cluster per test: N real `etcd` members (3 by default) on free loopback
//! ports, each with its own data dir, killed on drop. Faults on one member (SIGSTOP, SIGKILL, a
//! restart on the same ports and data) and `etcdctl` helpers for what redlock left in it.
//!
//! Made for Debian's etcd 3.4 (`etcd-server` and `etcd-client`). `REDLOCK_TEST_ETCD` and
//! `REDLOCK_TEST_ETCDCTL` name other binaries to run instead.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{Output, PATIENCE, Proc, TempDir, pid_alive, proc_state};

/// The `etcd` the tests start: `REDLOCK_TEST_ETCD`, else `etcd` from PATH. Panics, naming the
/// package, when there is none.
pub fn etcd_binary() -> PathBuf {
    find_binary("REDLOCK_TEST_ETCD", "etcd", "etcd-server")
}

/// The `etcdctl` the fixture runs: `REDLOCK_TEST_ETCDCTL`, else `etcdctl` from PATH. Panics,
/// naming the package, when there is none.
pub fn etcdctl_binary() -> PathBuf {
    find_binary("REDLOCK_TEST_ETCDCTL", "etcdctl", "etcd-client")
}

/// `var`'s path if it names one, else `name` from PATH; panics, naming Debian's `package`, when
/// there is neither.
pub(super) fn find_binary(var: &str, name: &str, package: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no `{name}` on PATH: install Debian's {package} package \
                 (apt-get install {package}), or name one in {var}"
            )
        })
}

/// Settings for [`EtcdCluster::start_with`].
#[derive(Clone)]
pub struct EtcdOpts {
    /// How many members: 3 by default, 1 for a cheap test that needs no quorum.
    pub members: usize,
    /// More `etcd` arguments for every member (`--experimental-enable-lease-checkpoint`, say).
    pub args: Vec<String>,
}

impl Default for EtcdOpts {
    fn default() -> EtcdOpts {
        EtcdOpts {
            members: 3,
            args: Vec::new(),
        }
    }
}

/// How long one `etcdctl` run may take before the fixture kills it: its own dial and command
/// timeouts (2 s and 5 s) and some slack for a busy machine.
const ETCDCTL_PATIENCE: Duration = Duration::from_secs(15);

/// One `etcd` process and what it keeps across restarts: its name, ports and directory.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// Holds `data/` (etcd's `--data-dir`) and `etcd.log` (its stdout and stderr, appended to
    /// across restarts), beside each other: etcd warns of files it did not write in its data dir.
    dir: TempDir,
    child: Option<Child>,
    /// SIGSTOPped by [`EtcdCluster::stop`]: running, but answering nothing.
    stopped: bool,
}

impl Member {
    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// Running and not stopped: the members etcdctl and the health checks talk to.
    fn live(&self) -> bool {
        self.child.is_some() && !self.stopped
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default()
    }

    /// SIGKILL (which ends a stopped process too) and reap.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped = false;
    }
}

/// A real etcd cluster owned by one test: every member on loopback, with fast elections (50 ms
/// heartbeats, 500 ms election timeout) and no auto-compaction. Every member is SIGKILLed and
/// reaped on drop, a panicking test's too, and its directory removed.
pub struct EtcdCluster {
    members: Vec<Member>,
    /// `--initial-cluster`: every member's name and peer URL.
    initial_cluster: String,
    /// `--initial-cluster-token`, unique per cluster so that no two clusters' members take each
    /// other for peers.
    token: String,
    args: Vec<String>,
}

impl EtcdCluster {
    /// Three members; returns once every one of them is healthy (well under a second).
    pub fn start() -> EtcdCluster {
        EtcdCluster::start_with(EtcdOpts::default())
    }

    /// `opts.members` members; returns once every one of them is healthy.
    pub fn start_with(opts: EtcdOpts) -> EtcdCluster {
        assert!(opts.members >= 1, "an etcd cluster needs a member");
        let mut last_err = String::new();
        // The free ports are found by binding :0 and letting go; another process can take one
        // in between, in which case its member exits at once and we try again with new ports
        // (and new directories: a half-started cluster's data names the old ports).
        for _ in 0..3 {
            let mut cluster = EtcdCluster::new(&opts);
            match cluster.try_start() {
                Ok(()) => return cluster,
                Err(e) if e.contains("address already in use") => last_err = e,
                Err(e) => panic!("starting etcd: {e}"),
            }
        }
        panic!("could not start etcd on free ports three times: {last_err}");
    }

    /// Starts the members one after the other, each once the one before answers on its peer
    /// port, and waits until all are healthy.
    ///
    /// Not all at once: before a new member starts, etcd 3.4 asks each peer whether it has
    /// joined already, and gives a peer that listens but does not serve yet (as one that started
    /// a moment before does) 1 s to answer. Started together, three members mostly took 1 to
    /// 2.4 s to be healthy; one by one they take 0.15 to 0.5 s, as each peer either answers or
    /// refuses the connection.
    fn try_start(&mut self) -> Result<(), String> {
        for i in 0..self.members.len() {
            self.spawn(i, "new");
            let deadline = Instant::now() + PATIENCE;
            let port = self.members[i].peer_port;
            while http_get(port, "/members").is_err() {
                self.member_exited(i)?;
                if Instant::now() > deadline {
                    return Err(format!(
                        "etcd member {i} did not answer on its peer port {port} within \
                         {PATIENCE:?}; its log:\n{}",
                        self.members[i].log()
                    ));
                }
                thread::sleep(Duration::from_millis(5));
            }
        }
        self.try_wait_healthy(PATIENCE)
    }

    /// Members not yet started, on ports that were free a moment ago.
    fn new(opts: &EtcdOpts) -> EtcdCluster {
        let ports = free_ports(2 * opts.members);
        let members: Vec<Member> = (0..opts.members)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: ports[2 * i],
                peer_port: ports[2 * i + 1],
                dir: TempDir::new(),
                child: None,
                stopped: false,
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        EtcdCluster {
            members,
            initial_cluster,
            token: unique_token(),
            args: opts.args.clone(),
        }
    }

    /// Starts member `i`'s process; `state` is `new` for a new cluster, `existing` for a restart
    /// (etcd ignores it once the data dir holds a member).
    fn spawn(&mut self, i: usize, state: &str) {
        let member = &self.members[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(member.dir.join("etcd.log"))
            .unwrap_or_else(|e| panic!("opening {}'s log: {e}", member.name));
        let client_url = format!("http://{}", member.endpoint());
        let mut cmd = Command::new(etcd_binary());
        clear_etcd_env(&mut cmd);
        cmd.current_dir(member.dir.path())
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(member.dir.join("data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &member.peer_url()])
            .args(["--initial-advertise-peer-urls", &member.peer_url()])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", &self.token])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--auto-compaction-retention", "0"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let member = &mut self.members[i];
        member.child = Some(child);
        member.stopped = false;
    }

    /// How many members the cluster has.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Every member's client address, `127.0.0.1:port`, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::endpoint).collect()
    }

    /// The URL redlock takes: `etcd://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoints().join(","))
    }

    /// The pid of member `i`; panics if it is not running.
    pub fn pid(&self, i: usize) -> i32 {
        self.members[i]
            .pid()
            .unwrap_or_else(|| panic!("etcd member {i} is not running"))
    }

    /// Member `i`'s log (etcd's JSON lines, every start of it), for a failing test to show.
    pub fn log(&self, i: usize) -> String {
        self.members[i].log()
    }

    /// Runs `etcdctl` with `args` against every running, unstopped member (a stopped one would
    /// hold a request until its timeout), with a 2 s dial timeout and a 5 s command timeout;
    /// killed, and the test failed, if it is still running after 15 s. Its status unchecked.
    #[track_caller]
    pub fn etcdctl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let endpoints: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.live())
            .map(Member::endpoint)
            .collect();
        assert!(
            !endpoints.is_empty(),
            "no etcd member running (and not stopped) to run etcdctl against"
        );
        let mut cmd = Command::new(etcdctl_binary());
        clear_etcd_env(&mut cmd);
        cmd.arg(format!("--endpoints={}", endpoints.join(",")))
            .args(["--dial-timeout=2s", "--command-timeout=5s"])
            .args(args)
            .stdin(Stdio::null());
        let shown = format!("{cmd:?}");
        let mut proc = Proc::spawn(cmd);
        if proc.wait_timeout(ETCDCTL_PATIENCE).is_none() {
            let stderr = proc.stderr_so_far();
            drop(proc);
            panic!(
                "{shown} still running after {ETCDCTL_PATIENCE:?}; killed it\nstderr:\n{stderr}"
            );
        }
        proc.finish_within(Duration::ZERO)
    }

    /// `etcdctl` that must succeed; its stdout.
    #[track_caller]
    fn etcdctl_ok(&self, args: &[&str]) -> String {
        let out = self.etcdctl(args);
        assert!(
            out.status.success(),
            "etcdctl {args:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// `etcdctl endpoint status -w json` of every member that answers: what each one says of
    /// itself. A member that does not answer is left out (etcdctl then exits 1 but still prints
    /// the others).
    fn statuses(&self) -> Result<Vec<Status>, String> {
        let out = self.etcdctl(["endpoint", "status", "-w", "json"]);
        let json = Json::parse(&out.stdout).map_err(|e| {
            format!(
                "endpoint status printed no JSON ({e})\nstdout:\n{}\nstderr:\n{}",
                out.stdout, out.stderr
            )
        })?;
        json.items()
            .iter()
            .map(|entry| {
                let field = |value: Option<&Json>, name: &str| {
                    value
                        .and_then(Json::u64)
                        .ok_or_else(|| format!("no {name} in endpoint status: {entry:?}"))
                };
                let status = entry.get("Status");
                let header = status.and_then(|s| s.get("header"));
                Ok(Status {
                    endpoint: entry
                        .get("Endpoint")
                        .and_then(Json::str)
                        .ok_or_else(|| format!("no Endpoint in endpoint status: {entry:?}"))?
                        .to_owned(),
                    member_id: field(header.and_then(|h| h.get("member_id")), "member_id")?,
                    revision: field(header.and_then(|h| h.get("revision")), "revision")?,
                    leader: field(status.and_then(|s| s.get("leader")), "leader")?,
                })
            })
            .collect()
    }

    /// The index of the current leader: waits (up to 20 s) until every running, unstopped
    /// member answers and names the same leader, and that leader is one of them. So right after
    /// a leader is killed or stopped, this waits for the election of the next one.
    #[track_caller]
    pub fn leader(&self) -> usize {
        let live = self.members.iter().filter(|m| m.live()).count();
        let what = "every running etcd member to agree on a leader";
        retry(PATIENCE, what, || {
            let statuses = self.statuses()?;
            if statuses.len() < live {
                return Err(format!("{} of {live} members answered", statuses.len()));
            }
            let leader = statuses[0].leader;
            if leader == 0 || statuses.iter().any(|s| s.leader != leader) {
                return Err(format!("members name different leaders: {statuses:?}"));
            }
            let Some(status) = statuses.iter().find(|s| s.member_id == leader) else {
                let running = format!("leader {leader:x} is not a running member");
                return Err(format!("{running}: {statuses:?}"));
            };
            self.members
                .iter()
                .position(|m| m.endpoint() == status.endpoint)
                .ok_or_else(|| format!("endpoint status named {}", status.endpoint))
        })
    }

    /// The store's current revision: the highest any member reports.
    #[track_caller]
    pub fn revision(&self) -> i64 {
        let statuses = self
            .statuses()
            .unwrap_or_else(|e| panic!("etcd endpoint status: {e}"));
        let revision = statuses.iter().map(|s| s.revision).max();
        revision.expect("no etcd member answered endpoint status") as i64
    }

    /// SIGSTOP member `i` (and wait until it is stopped): it keeps its sockets but answers
    /// nothing, to its peers or to clients.
    #[track_caller]
    pub fn stop(&mut self, i: usize) {
        let pid = self.pid(i);
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let what = format!("etcd member {i} to stop");
        retry(Duration::from_secs(5), &what, || match proc_state(pid) {
            Some('T') => Ok(()),
            state => Err(format!("state {state:?}")),
        });
        self.members[i].stopped = true;
    }

    /// SIGCONT after [`stop`](Self::stop).
    pub fn resume(&mut self, i: usize) {
        kill(Pid::from_raw(self.pid(i)), Signal::SIGCONT).unwrap();
        self.members[i].stopped = false;
    }

    /// SIGKILL member `i` and reap it; its data dir stays for [`restart`](Self::restart).
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Kill member `i` if it runs and start it again with the same name, ports and data dir
    /// (`--initial-cluster-state existing`). Waits (up to 20 s) until it is healthy when a
    /// majority of the members then run; with fewer it cannot be, and this only waits until it
    /// answers on its peer port.
    #[track_caller]
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i, "existing");
        let live = self.members.iter().filter(|m| m.live()).count();
        if 2 * live > self.members.len() {
            let what = format!("restarted etcd member {i} to be healthy");
            retry(PATIENCE, &what, || self.member_health(i));
        } else {
            let what = format!("restarted etcd member {i} to answer its peers");
            let port = self.members[i].peer_port;
            retry(PATIENCE, &what, || {
                self.member_exited(i)?;
                http_get(port, "/members")
                    .map(drop)
                    .map_err(|e| format!("GET http://127.0.0.1:{port}/members: {e}"))
            });
        }
    }

    /// Kill every member and start them all again on their data; returns once all are healthy.
    #[track_caller]
    pub fn restart_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        for i in 0..self.members.len() {
            self.spawn(i, "existing");
        }
        self.wait_healthy();
    }

    /// Waits (up to 20 s) until every running, unstopped member says it is healthy: it has a
    /// leader and serves a linearizable read (etcd's `GET /health`).
    #[track_caller]
    pub fn wait_healthy(&self) {
        if let Err(e) = self.try_wait_healthy(PATIENCE) {
            panic!("{e}");
        }
    }

    fn try_wait_healthy(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut sick = Vec::new();
            for (i, member) in self.members.iter().enumerate() {
                if !member.live() {
                    continue;
                }
                // A member that exited will not get well: say why at once, with its log.
                self.member_exited(i)?;
                if let Err(e) = self.member_health(i) {
                    sick.push((i, e));
                }
            }
            if sick.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let mut msg = format!("timed out after {timeout:?} waiting for etcd to be healthy");
                for (i, e) in sick {
                    let log = self.members[i].log();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    msg += &format!("\nmember {i}: {e}; its log ends:\n{}", tail.join("\n"));
                }
                return Err(msg);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Err, with the member's log, if member `i`'s process has exited (or is a zombie).
    fn member_exited(&self, i: usize) -> Result<(), String> {
        let member = &self.members[i];
        match member.pid() {
            Some(pid) if !pid_alive(pid) => Err(format!(
                "etcd member {i} ({}) exited; its log:\n{}",
                member.endpoint(),
                member.log()
            )),
            _ => Ok(()),
        }
    }

    /// Member `i`'s `GET /health`, Ok if it says `"health":"true"`.
    fn member_health(&self, i: usize) -> Result<(), String> {
        self.member_exited(i)?;
        let port = self.members[i].client_port;
        let answer = http_get(port, "/health")
            .map_err(|e| format!("GET http://127.0.0.1:{port}/health: {e}"))?;
        if answer.contains(r#""health":"true""#) {
            Ok(())
        } else {
            let body = answer.split("\r\n\r\n").nth(1).unwrap_or(&answer);
            Err(format!("GET http://127.0.0.1:{port}/health: {body}"))
        }
    }

    /// The ids of every lease, in hex as `etcdctl lease revoke` takes them.
    #[track_caller]
    pub fn leases(&self) -> Vec<String> {
        // `found N leases` and then one id a line.
        let out = self.etcdctl_ok(&["lease", "list"]);
        out.lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The ids of the runs' leases, in hex: every lease but the lock names' records' (granted
    /// for 40 days, kept by design after every run ended).
    #[track_caller]
    pub fn run_leases(&self) -> Vec<String> {
        self.leases()
            .into_iter()
            .filter(|id| {
                let id = u64::from_str_radix(id, 16).expect("a lease id in hex");
                self.lease_ttl(id).is_some_and(|(_, granted)| {
                    granted < crate::common::etcd_net::RECORD_LEASE_SECS
                })
            })
            .collect()
    }

    /// Revokes lease `id` (hex), deleting every key attached to it. A lease that expired
    /// meanwhile is no error.
    #[track_caller]
    pub fn revoke(&self, id: &str) {
        let out = self.etcdctl(["lease", "revoke", id]);
        assert!(
            out.status.success() || out.stderr.contains("requested lease not found"),
            "etcdctl lease revoke {id} failed with {}\nstderr:\n{}",
            out.status,
            out.stderr
        );
    }

    /// Revokes every lease, as if every holder's lease had run out at once; returns how many
    /// there were.
    #[track_caller]
    pub fn revoke_all_leases(&self) -> usize {
        let leases = self.leases();
        for id in &leases {
            self.revoke(id);
        }
        leases.len()
    }

    /// Compacts the history up to the current [`revision`](Self::revision), which it returns:
    /// no older revision can be read or watched from any more. Compacting to where it already is
    /// is no error.
    #[track_caller]
    pub fn compact_to_current(&self) -> i64 {
        let revision = self.revision();
        let out = self.etcdctl(["compact", &revision.to_string()]);
        assert!(
            out.status.success() || out.stderr.contains("required revision has been compacted"),
            "etcdctl compact {revision} failed with {}\nstderr:\n{}",
            out.status,
            out.stderr
        );
        revision
    }

    /// Every key under `prefix` with its value, in key order (an empty prefix: every key).
    #[track_caller]
    pub fn get_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        self.range(&["get", "--prefix", "-w", "json", "--", prefix])
    }

    /// The value of `key`, if there is one.
    #[track_caller]
    pub fn get(&self, key: &str) -> Option<String> {
        let found = self.range(&["get", "-w", "json", "--", key]);
        found.into_iter().next().map(|(_, value)| value)
    }

    /// The keys and values an `etcdctl get -w json` printed, base64 in its JSON.
    #[track_caller]
    fn range(&self, args: &[&str]) -> Vec<(String, String)> {
        let out = self.etcdctl_ok(args);
        let json = Json::parse(&out)
            .unwrap_or_else(|e| panic!("etcdctl {args:?} printed no JSON ({e}):\n{out}"));
        let text = |kv: &Json, field: &str| {
            let encoded = kv.get(field).and_then(Json::str).unwrap_or("");
            let bytes = base64_decode(encoded)
                .unwrap_or_else(|e| panic!("{field} {encoded:?} in etcdctl's JSON: {e}"));
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let kvs = json.get("kvs").map(Json::items).unwrap_or_default();
        kvs.iter()
            .map(|kv| (text(kv, "key"), text(kv, "value")))
            .collect()
    }

    /// Every key under `prefix`, in key order, with the ID of its lease (0: none) and its
    /// version (how many puts since it was created).
    #[track_caller]
    pub fn leased_keys(&self, prefix: &str) -> Vec<(String, u64, u64)> {
        let out = self.etcdctl_ok(&["get", "--prefix", "-w", "json", "--", prefix]);
        let json = Json::parse(&out).unwrap_or_else(|e| panic!("etcdctl printed no JSON ({e})"));
        let kvs = json.get("kvs").map(Json::items).unwrap_or_default();
        kvs.iter()
            .map(|kv| {
                let key = kv.get("key").and_then(Json::str).unwrap_or("");
                let key = String::from_utf8_lossy(&base64_decode(key).unwrap()).into_owned();
                let num = |field| kv.get(field).and_then(Json::u64).unwrap_or(0);
                (key, num("lease"), num("version"))
            })
            .collect()
    }

    /// The seconds lease `id` has left and was granted for (None: it is gone).
    #[track_caller]
    pub fn lease_ttl(&self, id: u64) -> Option<(u64, u64)> {
        let out = self.etcdctl_ok(&["lease", "timetolive", &format!("{id:x}"), "-w", "json"]);
        let json = Json::parse(&out).unwrap_or_else(|e| panic!("etcdctl printed no JSON ({e})"));
        let ttl = json.get("ttl").and_then(Json::u64)?;
        Some((ttl, json.get("granted-ttl").and_then(Json::u64)?))
    }

    /// Sets `key` to `value`, with no lease.
    #[track_caller]
    pub fn put(&self, key: &str, value: &str) {
        self.etcdctl_ok(&["put", "--", key, value]);
    }

    /// Deletes `key`.
    #[track_caller]
    pub fn del(&self, key: &str) {
        self.etcdctl_ok(&["del", "--", key]);
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            member.kill();
        }
    }
}

/// What one member said of itself in `etcdctl endpoint status`.
#[derive(Debug)]
struct Status {
    endpoint: String,
    member_id: u64,
    revision: u64,
    leader: u64,
}

/// A plain HTTP/1.0 GET of `path` on a loopback port: the whole answer, headers and all. A
/// member answers nothing on its client port until it has joined its cluster, so a read waits up
/// to 2 s. The answer ends at its `Content-Length`: etcd's peer port keeps the connection open
/// after answering, HTTP/1.0 or not.
fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut answer = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        answer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&answer);
        if !text.starts_with("HTTP/") && (n == 0 || answer.len() >= 5) {
            return Err(std::io::Error::other(format!("not HTTP: {text:?}")));
        }
        let whole = text.split_once("\r\n\r\n").is_some_and(|(head, body)| {
            head.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, length)| length.trim().parse::<usize>().ok())
                .is_some_and(|length| body.len() >= length)
        });
        if n == 0 || whole || answer.len() > 64 * 1024 {
            return Ok(text.into_owned());
        }
    }
}

/// Calls `attempt` every 50 ms (each may run etcdctl, a Go program: no busier than that on a
/// small machine) until it is Ok; panics with `what` and the last error after `timeout`.
#[track_caller]
pub(super) fn retry<T>(
    timeout: Duration,
    what: &str,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(e) if Instant::now() > deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last: {e}")
            }
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// `n` distinct loopback ports that were free a moment ago: all bound at once, so none repeats,
/// then let go. None is a port where a system's etcd or ZooKeeper may listen: etcd's 2379 and
/// 2380, ZooKeeper's 2181, 2888 and 3888, its admin server's 8080.
pub fn free_ports(n: usize) -> Vec<u16> {
    let mut held = Vec::new();
    while held.len() < n {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        if ![2379, 2380, 2181, 2888, 3888, 8080].contains(&port) {
            held.push(listener);
        }
    }
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// A cluster token no other cluster on this machine has.
fn unique_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("redlock-it-{}-{n}-{nanos:x}", std::process::id())
}

/// Removes every `ETCD_*` and `ETCDCTL_*` variable from `cmd`'s environment: etcd and etcdctl
/// read them as flags, and refuse to start when one shadows a flag given on the command line.
pub(super) fn clear_etcd_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ETCD") {
            cmd.env_remove(&name);
        }
    }
}

/// Standard base64 (with or without padding), as Go's JSON encodes bytes.
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("{:?} is not base64", c as char)),
        };
        acc = (acc << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// A JSON value as etcdctl's `-w json` prints it. Numbers keep their text: member ids are
/// 64-bit, past what a float holds exactly. (No JSON crate: the fixture adds no dependency.)
#[derive(Debug)]
enum Json {
    /// `null`, `true` or `false`: none that the fixture reads.
    Word,
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let mut parser = JsonParser {
            text: text.as_bytes(),
            at: 0,
        };
        let value = parser.value()?;
        parser.skip_space();
        if parser.at != parser.text.len() {
            return Err(format!("text after the JSON value at byte {}", parser.at));
        }
        Ok(value)
    }

    /// An object's field.
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// An array's items (none for anything else).
    fn items(&self) -> &[Json] {
        match self {
            Json::Arr(items) => items,
            _ => &[],
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => n.parse().ok(),
            _ => None,
        }
    }
}

struct JsonParser<'a> {
    text: &'a [u8],
    at: usize,
}

impl JsonParser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// Skips blanks and then `byte` if it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        let found = self.text.get(self.at) == Some(&byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", byte as char, self.at))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.skip_space();
        let rest = &self.text[self.at..];
        for word in ["null", "true", "false"] {
            if rest.starts_with(word.as_bytes()) {
                self.at += word.len();
                return Ok(Json::Word);
            }
        }
        match rest.first() {
            Some(b'{') => {
                self.at += 1;
                let mut fields = Vec::new();
                if self.eat(b'}') {
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.skip_space();
                    let key = self.string()?;
                    self.expect(b':')?;
                    fields.push((key, self.value()?));
                    if !self.eat(b',') {
                        self.expect(b'}')?;
                        return Ok(Json::Obj(fields));
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    if !self.eat(b',') {
                        self.expect(b']')?;
                        return Ok(Json::Arr(items));
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                while matches!(
                    self.text.get(self.at),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.at += 1;
                }
                let number = String::from_utf8_lossy(&self.text[start..self.at]);
                Ok(Json::Num(number.into_owned()))
            }
            _ => Err(format!("no JSON value at byte {}", self.at)),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        if self.text.get(self.at) != Some(&b'"') {
            return Err(format!("expected a string at byte {}", self.at));
        }
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&byte) = self.text.get(self.at) else {
                return Err("unterminated string".into());
            };
            self.at += 1;
            match byte {
                b'"' => return Ok(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    let Some(&escape) = self.text.get(self.at) else {
                        return Err("unterminated string".into());
                    };
                    self.at += 1;
                    let ch = match escape {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'u' => {
                            let hex = self.text.get(self.at..self.at + 4).unwrap_or_default();
                            self.at += 4;
                            let code = std::str::from_utf8(hex)
                                .ok()
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .ok_or_else(|| format!("bad \\u escape before byte {}", self.at))?;
                            // Halves of a surrogate pair (never in etcdctl's ASCII output) become
                            // U+FFFD.
                            char::from_u32(code).unwrap_or('\u{fffd}')
                        }
                        other => other as char,
                    };
                    out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(byte),
            }
        }
    }
}
