//! Fixtures for deployments of several servers: a master, a replica and three sentinels; a
//! three-master Redis Cluster made with `redis-cli --cluster create`. Loopback, free ports,
//! short failure-detection timeouts so the tests take seconds.

use std::fs;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use crate::common::*;

/// The service name the sentinels monitor.
pub const SERVICE: &str = "mymaster";

/// One `redis-server --sentinel`, killed on drop.
pub struct Sentinel {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

impl Sentinel {
    pub fn start(master_port: u16) -> Sentinel {
        let mut last = String::new();
        for _ in 0..20 {
            let dir = TempDir::new();
            let port = free_port();
            let conf = dir.join("sentinel.conf");
            fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                     logfile {dir}/sentinel.log\n\
                     sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {SERVICE} 1000\n\
                     sentinel failover-timeout {SERVICE} 10000\n",
                    dir = dir.path().display()
                ),
            )
            .unwrap();
            let mut child = Command::new(server_binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawning redis-server --sentinel");
            let up = Instant::now() + Duration::from_secs(10);
            while Instant::now() < up {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if let Ok(mut c) = conn_at(port)
                    && redis::cmd("PING").query::<String>(&mut c).is_ok()
                {
                    return Sentinel {
                        child,
                        port,
                        _dir: dir,
                    };
                }
                thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
            last = fs::read_to_string(dir.join("sentinel.log")).unwrap_or_default();
        }
        panic!("could not start a sentinel:\n{last}");
    }

    pub fn conn(&self) -> redis::Connection {
        conn_at(self.port).unwrap()
    }

    /// SIGKILLs the sentinel, as a crash does.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the sentinel and starts it again on its port, from the config it rewrote with
    /// what it learnt; returns once it answers PING.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Command::new(server_binary())
            .arg(self._dir.join("sentinel.conf"))
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning redis-server --sentinel");
        wait_until(PATIENCE, "the restarted sentinel to answer", || {
            conn_at(self.port)
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        });
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn conn_at(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}").as_str())?;
    let con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    con.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(con)
}

/// A master, one replica and three sentinels that monitor them as [`SERVICE`].
pub struct SentinelSetup {
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<Sentinel>,
}

impl SentinelSetup {
    pub fn start() -> SentinelSetup {
        let master = RedisServer::start();
        let replica = replica_of(&master);
        let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(master.port())).collect();
        // Each sentinel must know the replica (learnt from the master's INFO) before a
        // failover can pick it.
        for s in &sentinels {
            wait_until(PATIENCE, "the sentinels to find the replica", || {
                let replicas: Value = redis::cmd("SENTINEL")
                    .arg("REPLICAS")
                    .arg(SERVICE)
                    .query(&mut s.conn())
                    .unwrap();
                format!("{replicas:?}").contains(&replica.port().to_string())
                    && !format!("{replicas:?}").contains("disconnected")
            });
        }
        SentinelSetup {
            master,
            replica,
            sentinels,
        }
    }

    /// `redis+sentinel://` URL naming every sentinel.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
    }

    /// The master's port as the first sentinel names it.
    pub fn master_port(&self) -> u16 {
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(SERVICE)
            .query(&mut self.sentinels[0].conn())
            .unwrap();
        port
    }

    /// SENTINEL FAILOVER, then wait until every sentinel names the replica as the master.
    pub fn failover(&self) {
        let started = Instant::now();
        let replica = self.replica.port();
        wait_until(PATIENCE, "SENTINEL FAILOVER to be accepted", || {
            redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(SERVICE)
                .query::<String>(&mut self.sentinels[0].conn())
                .is_ok()
        });
        for s in &self.sentinels {
            wait_until(PATIENCE, "the sentinels to name the new master", || {
                let (_, port): (String, u16) = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(SERVICE)
                    .query(&mut s.conn())
                    .unwrap();
                port == replica
            });
        }
        eprintln!("sentinel failover took {:?}", started.elapsed());
    }
}

/// Waits until a renewal of the lock `key` that `holder` holds reaches `server` (the new
/// owner after a failover or a slot move): the lock key's expiry there rises, as only a
/// renewal's PEXPIRE can raise it; between renewals it only falls, to -2 once the key is gone.
/// Panics if the holder ends first, or no renewal lands there in time.
#[track_caller]
pub fn wait_for_renewal_on(server: &RedisServer, key: &str, holder: &mut Proc) {
    let mut lowest = i64::MAX;
    let mut renewed = false;
    wait_until(PATIENCE, "a renewal to reach the new owner", || {
        let pttl = server.pttl(&lock_key(key));
        renewed = pttl > lowest;
        lowest = lowest.min(pttl);
        renewed || !holder.running()
    });
    assert!(
        renewed,
        "the holder ended before any renewal reached port {} (PTTL {lowest}):\n{}",
        server.port(),
        holder.stderr_so_far()
    );
}

/// A replica of `master`, in sync with it.
pub fn replica_of(master: &RedisServer) -> RedisServer {
    let replica = RedisServer::start_with(ServerOpts {
        args: vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            master.port().to_string(),
        ],
        ..ServerOpts::default()
    });
    wait_until(PATIENCE, "the replica to sync", || {
        info(&replica, "replication").contains("master_link_status:up")
    });
    // The replica's link can be up before the master counts it online and its acks flow: a
    // test's first WAIT (ttl/10) could then time out on a busy machine. One write the master
    // has seen acknowledged settles that.
    let mut conn = master.conn();
    redis::cmd("SET")
        .arg("redlock-test:replica-probe")
        .arg(1)
        .exec(&mut conn)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(PATIENCE.as_millis() as u64)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "the replica never acknowledged a write");
    redis::cmd("DEL")
        .arg("redlock-test:replica-probe")
        .exec(&mut conn)
        .unwrap();
    replica
}

/// Make `server` a replica of `port` (a port nobody listens on: it stops following its
/// master and keeps its data), or a master with `None` (promoted, as a sentinel does).
pub fn replicaof(server: &RedisServer, port: Option<u16>) {
    let cmd = match port {
        Some(port) => redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port).clone(),
        None => redis::cmd("REPLICAOF").arg("NO").arg("ONE").clone(),
    };
    cmd.exec(&mut server.conn()).unwrap();
}

/// One section of INFO.
pub fn info(server: &RedisServer, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut server.conn())
        .unwrap()
}

/// A Redis Cluster of three masters, each slot range on one node, with one replica each when
/// asked (nodes 3..6 then start as replicas, redis-cli chooses of which master).
pub struct Cluster {
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with(false)
    }

    pub fn start_with(replicas: bool) -> Cluster {
        let count = if replicas { 6 } else { 3 };
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| {
                RedisServer::start_with(ServerOpts {
                    args: [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1000",
                    ]
                    .map(String::from)
                    .to_vec(),
                    ..ServerOpts::default()
                })
            })
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())))
            .args([
                "--cluster-replicas",
                if replicas { "1" } else { "0" },
                "--cluster-yes",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("running redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for n in &nodes {
            wait_until(PATIENCE, "the cluster to be ok on every node", || {
                let i: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut n.conn())
                    .unwrap();
                i.contains("cluster_state:ok")
                    && i.contains(&format!("cluster_known_nodes:{count}\r"))
            });
            if replicas {
                wait_until(PATIENCE, "every replica to sync", || {
                    let r = info(n, "replication");
                    r.contains("role:master") || r.contains("master_link_status:up")
                });
            }
        }
        Cluster { nodes }
    }

    /// `redis+cluster://` URL with the given nodes as seeds.
    pub fn url_of(&self, seeds: &[usize]) -> String {
        let hosts: Vec<String> = seeds
            .iter()
            .map(|&i| format!("127.0.0.1:{}", self.nodes[i].port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    pub fn slot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.nodes[0].conn())
            .unwrap()
    }

    /// The index of the node that owns `slot`, as `via` sees it.
    pub fn owner(&self, slot: u16, via: usize) -> usize {
        let ranges: Vec<Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.nodes[via].conn())
            .unwrap();
        for range in ranges {
            let Value::Array(f) = range else { continue };
            let (Value::Int(lo), Value::Int(hi), Value::Array(m)) = (&f[0], &f[1], &f[2]) else {
                continue;
            };
            if (*lo..=*hi).contains(&i64::from(slot)) {
                let Value::Int(port) = m[1] else {
                    panic!("{m:?}")
                };
                return self
                    .nodes
                    .iter()
                    .position(|n| i64::from(n.port()) == port)
                    .unwrap();
            }
        }
        panic!("slot {slot} has no owner");
    }

    /// The index of a replica of node `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        let id = self.id(master);
        (0..self.nodes.len())
            .find(|&i| {
                info(&self.nodes[i], "replication")
                    .contains(&format!("master_port:{}\r", self.nodes[master].port()))
            })
            .unwrap_or_else(|| panic!("no replica of {id}"))
    }

    /// CLUSTER FAILOVER on `replica` (a coordinated manual failover: its master pauses
    /// writes until the replica has caught up), then wait until every node agrees that
    /// `replica` owns `slot`.
    pub fn failover(&self, replica: usize, slot: u16) {
        let started = Instant::now();
        redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .exec(&mut self.nodes[replica].conn())
            .unwrap();
        for via in 0..self.nodes.len() {
            wait_until(PATIENCE, "every node to see the promoted replica", || {
                self.owner(slot, via) == replica
            });
        }
        eprintln!("cluster failover took {:?}", started.elapsed());
    }

    pub fn id(&self, i: usize) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.nodes[i].conn())
            .unwrap()
    }

    fn setslot(&self, node: usize, slot: u16, how: &str, id: &str) {
        redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(how)
            .arg(id)
            .exec(&mut self.nodes[node].conn())
            .unwrap();
    }

    /// Start moving `slot` from node `from` to node `to` as redis-cli --cluster reshard does:
    /// IMPORTING / MIGRATING, then MIGRATE every key. The slot stays in migration (requests
    /// get ASK, and multi-key ones TRYAGAIN) until [`Cluster::finish_migration`].
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let (from_id, to_id) = (self.id(from), self.id(to));
        self.setslot(to, slot, "IMPORTING", &from_id);
        self.setslot(from, slot, "MIGRATING", &to_id);
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut self.nodes[from].conn())
                .unwrap();
            if keys.is_empty() {
                break;
            }
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.nodes[to].port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .exec(&mut self.nodes[from].conn())
                .unwrap();
        }
    }

    /// SETSLOT NODE on every node: `slot` belongs to `to` from now on.
    pub fn finish_migration(&self, slot: u16, from: usize, to: usize) {
        let to_id = self.id(to);
        self.setslot(to, slot, "NODE", &to_id);
        self.setslot(from, slot, "NODE", &to_id);
        for other in (0..self.nodes.len()).filter(|&i| i != from && i != to) {
            self.setslot(other, slot, "NODE", &to_id);
        }
    }
}
