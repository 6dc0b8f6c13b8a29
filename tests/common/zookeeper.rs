//! A throwaway ZooKeeper ensemble per test: N real members (3 by default, 1 for a cheap
//! standalone server) on free loopback ports, each a JVM in a directory of its own (its
//! `zoo.cfg`, `log4j.properties`, `data/myid` and `zookeeper.log`), SIGKILLed and reaped on drop.
//! Faults on one member (SIGSTOP, SIGKILL, a restart on the same ports and data, one with its
//! wall clock moved by libfaketime), the four-letter words, and a small client of the fixture's own ([`ZkClient`]) for what redlock
//! left in it.
//!
//! Made for Debian's ZooKeeper 3.8: the jars of `libzookeeper-java` (and of `libslf4j-java` and
//! `liblog4j1.2-java`, which it depends on), run by `default-jre-headless`'s java. Debian's
//! `zookeeper` package adds only scripts and /etc/zookeeper, `zookeeperd` a service on port 2181:
//! the tests need neither. Each member runs as `java -cp
//! CONFDIR:zookeeper.jar:slf4j-log4j12.jar:log4j-1.2.jar QuorumPeerMain CONFDIR/zoo.cfg`, not
//! through `zkServer.sh`, which on Debian reads /etc/zookeeper/conf whatever ZOOCFGDIR says.
//! zookeeper.jar's manifest names the jars it needs but no logging backend for slf4j (without
//! one a member logs nothing at all): the fixture adds log4j 1.2's, which Debian's package uses,
//! with a `log4j.properties` that writes to stdout, which goes to the member's log.
//!
//! `REDLOCK_TEST_JAVA` names another `java` to run (else `java` from PATH: Debian's
//! `default-jre-headless`), and `REDLOCK_TEST_ZOOKEEPER_JARS` another directory laid out as
//! Debian's /usr/share/java (`zookeeper.jar`, whose manifest names its dependencies by full path,
//! `slf4j-log4j12.jar`, `log4j-1.2.jar`, and `slf4j-nop.jar` for [`ZkEnsemble::zkcli`]).
//!
//! Time: a tick of 200 ms (not ZooKeeper's 2 s) so that sessions of 0.4 s to 4 s (2 to 20
//! ticks, ZooKeeper's default bounds) fit tests whose leases last 1 to 3 s, and sessions expire
//! to within a tick. `syncLimit` is 10 ticks: a member that stops answering (SIGSTOP) is
//! dropped, and a leader or follower left without a quorum drops its clients, after 2 s.
//! `initLimit` is 20 ticks: 4 s to join a leader and catch up. With 3 CPU hogs on 2 cores,
//! 25 s of writes through every member elected no new leader with 5 or 10 ticks either. No
//! fsync per write (`forceSync=no`): a member killed loses nothing the kernel took, and beside
//! a disk hog the slowest write took 0.03 s where fsyncs took it to 0.6 s. Three members serve
//! 1.3 to 2 s after their start, a standalone one 0.3 to 0.7 s; the leader killed, the next one
//! leads after about 0.4 s.

mod client;
pub(crate) mod setup;

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub use self::client::*;
use super::etcd::{free_ports, retry};
use super::{Output, PATIENCE, Proc, TempDir, pid_alive, proc_state};

/// Settings for [`ZkEnsemble::start_with`].
#[derive(Clone)]
pub struct ZkOpts {
    /// How many members: 3 by default; 1 for a standalone server, cheap for a test that needs no
    /// quorum (it serves sooner, with no election).
    pub members: usize,
    /// ZooKeeper's tick, in milliseconds (200). Session timeouts may be 2 to 20 ticks.
    pub tick_ms: u32,
    /// More `zoo.cfg` lines for every member, after the fixture's own: one of the same key
    /// replaces it (`maxSessionTimeout=10000`, `syncLimit=5`).
    pub extra_config: Vec<String>,
    /// Netty's codec on the members' classpath, for the TLS that `extra_config` sets up.
    pub tls: bool,
}

impl Default for ZkOpts {
    fn default() -> ZkOpts {
        ZkOpts {
            members: 3,
            tick_ms: 200,
            extra_config: Vec::new(),
            tls: false,
        }
    }
}

/// How long a helper's request, or a four-letter word, may wait on a socket.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the health checks wait for a member's `srvr`, which a live one answers in a few
/// milliseconds, before they ask again on a new connection.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// One member's process and what it keeps across restarts: its ports and directory.
struct Member {
    client_port: u16,
    /// Followers connect to the leader here.
    quorum_port: u16,
    election_port: u16,
    /// The member's CONFDIR: `zoo.cfg`, `log4j.properties`, `data/` (with `myid`) and
    /// `zookeeper.log` (its stdout and stderr, appended to across restarts).
    dir: TempDir,
    child: Option<Child>,
    /// SIGSTOPped by [`ZkEnsemble::stop`]: running, but answering nothing.
    stopped: bool,
    /// How far the member's wall clock is moved (libfaketime's offset, `+41d`), from
    /// [`ZkEnsemble::restart_with_clock`] on.
    clock: Option<String>,
    /// [`ZkOpts::tls`].
    tls: bool,
}

impl Member {
    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Running and not stopped: the members the helpers and health checks talk to.
    fn live(&self) -> bool {
        self.child.is_some() && !self.stopped
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("zookeeper.log")).unwrap_or_default()
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

/// A real ZooKeeper ensemble owned by one test, every member on loopback. Every member is
/// SIGKILLed and reaped on drop, a panicking test's too, and its directory removed.
pub struct ZkEnsemble {
    members: Vec<Member>,
}

impl ZkEnsemble {
    /// Three members; returns once each serves and one of them leads.
    pub fn start() -> ZkEnsemble {
        ZkEnsemble::start_with(ZkOpts::default())
    }

    /// `opts.members` members; returns once each serves and one of them leads.
    pub fn start_with(opts: ZkOpts) -> ZkEnsemble {
        assert!(opts.members >= 1, "a ZooKeeper ensemble needs a member");
        let mut last_err = String::new();
        // The free ports are found by binding :0 and letting go; another process can take one
        // in between: then a member logs that it is in use (and exits, or runs on without its
        // election port), and we try again with new ports and new directories.
        for _ in 0..3 {
            let mut ensemble = ZkEnsemble::new(&opts);
            for i in 0..opts.members {
                ensemble.spawn(i);
            }
            match ensemble.try_wait_healthy(PATIENCE, true) {
                Ok(_) => return ensemble,
                Err(e) if e.contains("Address already in use") => last_err = e,
                Err(e) => panic!("starting ZooKeeper: {e}"),
            }
        }
        panic!("could not start ZooKeeper on free ports three times: {last_err}");
    }

    /// Members not yet started, their directories written, on ports that were free a moment ago.
    fn new(opts: &ZkOpts) -> ZkEnsemble {
        let ports = free_ports(3 * opts.members);
        let members: Vec<Member> = (0..opts.members)
            .map(|i| Member {
                client_port: ports[3 * i],
                quorum_port: ports[3 * i + 1],
                election_port: ports[3 * i + 2],
                dir: TempDir::new(),
                child: None,
                stopped: false,
                clock: None,
                tls: opts.tls,
            })
            .collect();
        // A single member has no server lines: ZooKeeper then runs it standalone.
        let servers: String = match members.len() {
            1 => String::new(),
            _ => members
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let id = i + 1;
                    format!(
                        "server.{id}=127.0.0.1:{}:{}\n",
                        m.quorum_port, m.election_port
                    )
                })
                .collect(),
        };
        for (i, member) in members.iter().enumerate() {
            setup::write_dir(
                &member.dir,
                i + 1,
                ("127.0.0.1", member.client_port),
                &servers,
                opts,
            );
        }
        ZkEnsemble { members }
    }

    /// Starts member `i`'s JVM on its directory.
    fn spawn(&mut self, i: usize) {
        let member = &self.members[i];
        let dir = member.dir.path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(member.dir.join("zookeeper.log"))
            .unwrap_or_else(|e| panic!("opening member {i}'s log: {e}"));
        let launch = setup::Launch {
            clock: member.clock.as_deref(),
            tls: member.tls,
        };
        let mut cmd = setup::server_command(dir, launch);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let member = &mut self.members[i];
        member.child = Some(child);
        member.stopped = false;
    }

    /// How many members the ensemble has.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Every member's client address, `127.0.0.1:port`, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::endpoint).collect()
    }

    /// The URL redlock takes: `zk://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub fn url(&self) -> String {
        format!("zk://{}", self.endpoints().join(","))
    }

    /// The pid of member `i`; panics if it is not running.
    pub fn pid(&self, i: usize) -> i32 {
        self.members[i]
            .pid()
            .unwrap_or_else(|| panic!("ZooKeeper member {i} is not running"))
    }

    /// Member `i`'s log (every start of it), for a failing test to show.
    pub fn log(&self, i: usize) -> String {
        self.members[i].log()
    }

    /// Member `i`'s answer to a four-letter word (`srvr`, `mntr`, `conf`, ...): Err if it does
    /// not answer within 5 s.
    pub fn four_letter(&self, i: usize, word: &str) -> Result<String, String> {
        self.ask(i, word, IO_TIMEOUT)
    }

    fn ask(&self, i: usize, word: &str, timeout: Duration) -> Result<String, String> {
        let port = self.members[i].client_port;
        let ask = || -> std::io::Result<String> {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
            stream.set_read_timeout(Some(timeout))?;
            stream.set_write_timeout(Some(timeout))?;
            stream.write_all(word.as_bytes())?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer)
        };
        ask().map_err(|e| format!("`{word}` on member {i} (port {port}): {e}"))
    }

    /// What member `i` says it is (`leader`, `follower`, `standalone`): Err if it does not
    /// serve (it has exited, or has no quorum and says so).
    fn mode(&self, i: usize) -> Result<String, String> {
        self.member_exited(i)?;
        // Not 5 s: a standalone server that has just bound its port sometimes never answers
        // its first connection (in about one start in four here); the next is answered at once.
        let answer = self.ask(i, "srvr", PROBE_TIMEOUT)?;
        answer
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|mode| mode.trim().to_owned())
            .ok_or_else(|| format!("member {i} says {:?}", answer.trim()))
    }

    /// Err, with the member's log, if member `i`'s process has exited (or is a zombie).
    fn member_exited(&self, i: usize) -> Result<(), String> {
        let member = &self.members[i];
        match member.pid() {
            Some(pid) if !pid_alive(pid) => Err(format!(
                "ZooKeeper member {i} ({}) exited; its log:\n{}",
                member.endpoint(),
                member.log()
            )),
            _ => Ok(()),
        }
    }

    /// The index of the current leader (0 for a standalone server): waits (up to 20 s) until
    /// every running, unstopped member serves and one of them leads. So right after a leader is
    /// killed or stopped, this waits for the election of the next one.
    #[track_caller]
    pub fn leader(&self) -> usize {
        self.try_wait_healthy(PATIENCE, false)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits (up to 20 s) until every running, unstopped member serves and one of them leads.
    #[track_caller]
    pub fn wait_healthy(&self) {
        self.leader();
    }

    /// The leader, once every live member serves and exactly one of them leads; Err, with the
    /// logs of the members that did not serve, after `timeout`. `starting`: fail at once when
    /// a member says that one of its ports is taken.
    fn try_wait_healthy(&self, timeout: Duration, starting: bool) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut sick = Vec::new();
            let mut leaders = Vec::new();
            for (i, member) in self.members.iter().enumerate() {
                if !member.live() {
                    continue;
                }
                if starting && member.log().contains("Address already in use") {
                    return Err(format!(
                        "member {i}'s port is taken; its log:\n{}",
                        member.log()
                    ));
                }
                match self.mode(i) {
                    Ok(mode) if mode == "leader" || mode == "standalone" => leaders.push(i),
                    Ok(mode) if mode == "follower" => {}
                    Ok(mode) => sick.push((i, format!("mode {mode}"))),
                    // A member that exited will not get well: say why at once, with its log.
                    Err(e) if e.contains("exited; its log") => return Err(e),
                    Err(e) => sick.push((i, e)),
                }
            }
            if sick.is_empty() && leaders.len() == 1 {
                return Ok(leaders[0]);
            }
            if Instant::now() > deadline {
                let mut msg = format!(
                    "timed out after {timeout:?} waiting for every live ZooKeeper member to \
                     serve and one to lead; leaders: {leaders:?}"
                );
                for (i, e) in sick {
                    let log = self.members[i].log();
                    let tail: Vec<&str> = log.lines().rev().take(30).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    msg += &format!("\nmember {i}: {e}; its log ends:\n{}", tail.join("\n"));
                }
                return Err(msg);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP member `i` (and wait until it is stopped): it keeps its sockets (the kernel
    /// still accepts connections on them) but answers nothing, to its peers or to clients.
    #[track_caller]
    pub fn stop(&mut self, i: usize) {
        let pid = self.pid(i);
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let what = format!("ZooKeeper member {i} to stop");
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

    /// SIGKILL member `i` and reap it; its directory stays for [`restart`](Self::restart).
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Kill member `i` if it runs and start it again on the same ports and data. Waits (up to
    /// 20 s) until every live member serves when a majority then runs; with fewer none can,
    /// and this only waits until it answers a four-letter word.
    #[track_caller]
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        let live = self.members.iter().filter(|m| m.live()).count();
        if 2 * live > self.members.len() {
            self.wait_healthy();
        } else {
            let what = format!("restarted ZooKeeper member {i} to answer");
            retry(PATIENCE, &what, || {
                self.member_exited(i)?;
                self.ask(i, "srvr", PROBE_TIMEOUT).map(drop)
            });
        }
    }

    /// [`restart`](Self::restart) member `i` with its wall clock moved by `shift` (libfaketime's
    /// offset: `-41d`), or back to the host's with None, from now on; its monotonic clock,
    /// which times sessions, is left alone. The clock of the nodes' `ctime` and `mtime`, as the
    /// leader writes them.
    #[track_caller]
    pub fn restart_with_clock(&mut self, i: usize, shift: Option<&str>) {
        self.members[i].clock = shift.map(str::to_owned);
        self.restart(i);
    }

    /// Adds `line` to member `i`'s `zoo.cfg` (a key given again replaces the earlier one): it
    /// counts from the member's next [`restart`](Self::restart).
    pub fn add_config(&mut self, i: usize, line: &str) {
        let path = self.members[i].dir.join("zoo.cfg");
        let mut cfg = OpenOptions::new().append(true).open(&path).unwrap();
        writeln!(cfg, "{line}").unwrap();
    }

    /// Kill every member and start them all again on their data; returns once each serves and
    /// one of them leads.
    #[track_caller]
    pub fn restart_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        for i in 0..self.members.len() {
            self.spawn(i);
        }
        self.wait_healthy();
    }

    /// A session on member `i` alone, whose reads are its own copy: waits (up to 20 s) until it
    /// grants one.
    #[track_caller]
    pub fn client(&self, i: usize) -> ZkClient {
        let endpoint = self.members[i].endpoint();
        let what = format!("a session on ZooKeeper member {i} ({endpoint})");
        retry(PATIENCE, &what, || {
            self.member_exited(i)?;
            ZkClient::connect(&endpoint, IO_TIMEOUT).map_err(|e| e.to_string())
        })
    }

    /// A session on the first live member that grants one, in member order.
    fn session(&self) -> Result<ZkClient, String> {
        let mut errors = Vec::new();
        for member in self.members.iter().filter(|m| m.live()) {
            match ZkClient::connect(&member.endpoint(), IO_TIMEOUT) {
                Ok(client) => return Ok(client),
                Err(e) => errors.push(format!("{}: {e}", member.endpoint())),
            }
        }
        Err(format!(
            "no live member granted a session: {}",
            errors.join("; ")
        ))
    }

    /// Runs `read` after a sync on a session of some live member: it sees every write committed
    /// before the call, whichever member answers. Tried again (up to 20 s) while no member
    /// grants a session or the connection fails; an error the member answers fails the test.
    #[track_caller]
    fn read<T>(&self, path: &str, mut read: impl FnMut(&mut ZkClient) -> Result<T, ZkError>) -> T {
        let answer = retry(PATIENCE, &format!("ZooKeeper to read {path}"), || {
            let mut client = self.session()?;
            client.sync(path).map_err(|e| format!("sync {path}: {e}"))?;
            match read(&mut client) {
                Err(ZkError::Io(e)) => Err(format!("reading {path}: {e}")),
                answered => Ok(answered),
            }
        });
        answer.unwrap_or_else(|e| panic!("ZooKeeper read of {path}: {e}"))
    }

    /// Runs `write` once on a session of some live member: waits (up to 20 s) for a session,
    /// not after the request was sent, whose outcome is then unknown.
    #[track_caller]
    fn write<T>(&self, what: &str, write: impl FnOnce(&mut ZkClient) -> Result<T, ZkError>) -> T {
        let mut client = retry(PATIENCE, "a ZooKeeper session", || self.session());
        write(&mut client).unwrap_or_else(|e| panic!("ZooKeeper {what}: {e}"))
    }

    /// The names of `path`'s children, sorted; panics if there is no such node.
    #[track_caller]
    pub fn ls(&self, path: &str) -> Vec<String> {
        self.read(path, |c| c.ls(path))
    }

    /// `path`'s data (as text, lossily), if there is such a node.
    #[track_caller]
    pub fn get(&self, path: &str) -> Option<String> {
        let found = self.read(path, |c| c.get(path));
        found.map(|(data, _)| String::from_utf8_lossy(&data).into_owned())
    }

    /// `path`'s stat, if there is such a node.
    #[track_caller]
    pub fn stat(&self, path: &str) -> Option<ZkStat> {
        self.read(path, |c| c.stat(path))
    }

    /// Creates the persistent node `path` holding `data`; panics if it exists or its parent
    /// does not.
    #[track_caller]
    pub fn create(&self, path: &str, data: &str) {
        self.write(&format!("create {path}"), |c| {
            c.create(path, data.as_bytes())
        });
    }

    /// One try at [`create`](Self::create) on the first live member that grants a session, for
    /// a test of what happens without a quorum: no wait, and each step gives up after 5 s.
    pub fn try_create(&self, path: &str, data: &str) -> Result<(), String> {
        let mut client = self.session()?;
        let created = client.create(path, data.as_bytes());
        created.map_err(|e| format!("create {path} on session {:x}: {e}", client.session_id()))
    }

    /// Replaces `path`'s data, whatever its version; panics if there is no such node.
    #[track_caller]
    pub fn set(&self, path: &str, data: &str) {
        self.write(&format!("set {path}"), |c| c.set(path, data.as_bytes()));
    }

    /// Deletes `path`, whatever its version; false if there was no such node. Panics if it has
    /// children.
    #[track_caller]
    pub fn delete(&self, path: &str) -> bool {
        self.write(&format!("delete {path}"), |c| match c.delete(path) {
            Err(e) if e.is(ZkError::NO_NODE) => Ok(false),
            done => done.map(|()| true),
        })
    }

    /// Runs ZooKeeper's own command-line client (`zkCli.sh`'s class, one JVM per call, about
    /// half a second) with `args` against every live member; killed, and the test failed, if
    /// it still runs after 20 s. Its status unchecked.
    #[track_caller]
    pub fn zkcli(&self, args: &[&str]) -> Output {
        let servers: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.live())
            .map(Member::endpoint)
            .collect();
        let mut cmd = setup::cli_command(&servers.join(","), args);
        cmd.stdin(Stdio::null());
        let shown = format!("{cmd:?}");
        let mut proc = Proc::spawn(cmd);
        if proc.wait_timeout(PATIENCE).is_none() {
            let stderr = proc.stderr_so_far();
            drop(proc);
            panic!("{shown} still running after {PATIENCE:?}; killed it\nstderr:\n{stderr}");
        }
        proc.finish_within(Duration::ZERO)
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        for member in &mut self.members {
            member.kill();
        }
    }
}
