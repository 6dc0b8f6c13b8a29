//! A 3-member etcd cluster whose members are hosts of a [`Net`], on their own addresses (client
//! port 2379, peer port 2380), with the fast elections of tests/common/etcd.rs (50 ms heartbeats,
//! 500 ms election timeout), with `--pre-vote` as etcd 3.5 has by default. The members are asked about themselves with etcdctl run inside a
//! host; leadership is put where a case needs it with `etcdctl move-leader`. Every member is
//! killed on drop (and by the net's own drop, which kills everything in its namespaces).

use std::fs::File;
use std::process::{Child, Output, Stdio};

use super::net::Net;
use super::{PATIENCE, TempDir, clear_etcd_env, etcd_binary, etcdctl_binary, retry};

/// A lease granted for at least this long is a lock name's record's (granted for 40 days, kept
/// by design after every run ended), not a run's.
pub const RECORD_LEASE_SECS: u64 = 24 * 3600;

/// The election timeout the members run with, in ms (and 50 ms heartbeats).
pub const ELECTION_MS: u64 = 500;

pub struct EtcdNet<'n> {
    net: &'n Net,
    /// The member hosts, in member order.
    hosts: Vec<String>,
    children: Vec<Child>,
    /// The members' data and logs (`<host>.log`), removed on drop.
    _dir: TempDir,
}

/// What one member said of itself in `etcdctl endpoint status`.
#[derive(Debug)]
struct Status {
    endpoint: String,
    id: String,
    leader: bool,
}

impl<'n> EtcdNet<'n> {
    /// Starts a member on each of `hosts` and waits until every one is healthy.
    #[track_caller]
    pub fn start(net: &'n Net, hosts: &[&str]) -> EtcdNet<'n> {
        let dir = TempDir::new();
        let peer = |h: &str| format!("http://{}:2380", net.host(h).addr);
        let initial: Vec<String> = hosts.iter().map(|h| format!("{h}={}", peer(h))).collect();
        let token = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let children = hosts
            .iter()
            .map(|&h| {
                let client = format!("http://{}:2379", net.host(h).addr);
                let log = File::create(dir.join(&format!("{h}.log"))).unwrap();
                let mut cmd = net.command(h, etcd_binary());
                clear_etcd_env(&mut cmd);
                cmd.args(["--name", h])
                    .arg("--data-dir")
                    .arg(dir.join(&format!("{h}.data")))
                    .args(["--listen-client-urls", &client])
                    .args(["--advertise-client-urls", &client])
                    .args(["--listen-peer-urls", &peer(h)])
                    .args(["--initial-advertise-peer-urls", &peer(h)])
                    .args(["--initial-cluster", &initial.join(",")])
                    .args(["--initial-cluster-state", "new"])
                    .args(["--initial-cluster-token", &token])
                    .args(["--heartbeat-interval", "50"])
                    .args(["--election-timeout", &ELECTION_MS.to_string()])
                    // A member back from the minority side then cannot depose the majority's
                    // leader with the terms it ran up alone; without it (3.4's default), the
                    // election that follows a heal left the new holder without a renewal for
                    // long enough to be stopped (76) in 2 runs of 4.
                    .arg("--pre-vote")
                    .args(["--logger", "zap", "--log-outputs", "stderr"])
                    .stdout(log.try_clone().unwrap())
                    .stderr(log);
                cmd.spawn()
                    .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"))
            })
            .collect();
        let cluster = EtcdNet {
            net,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            children,
            _dir: dir,
        };
        cluster.wait_healthy(hosts[0]);
        cluster
    }

    /// `etcd://m0:2379,m1:2379,m2:2379` by address.
    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoints().join(","))
    }

    fn endpoints(&self) -> Vec<String> {
        let addr = |h: &String| format!("{}:2379", self.net.host(h).addr);
        self.hosts.iter().map(addr).collect()
    }

    /// Runs etcdctl inside host `from` against `endpoints`, with short timeouts (a member cut
    /// off answers nothing).
    fn etcdctl(&self, from: &str, endpoints: &[String], args: &[&str]) -> Output {
        let mut cmd = self.net.command(from, etcdctl_binary());
        clear_etcd_env(&mut cmd);
        cmd.arg(format!("--endpoints={}", endpoints.join(",")))
            .args(["--dial-timeout=1s", "--command-timeout=2s"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
    }

    /// Every member's `endpoint status` as seen from `from`; Err unless all answered.
    fn statuses(&self, from: &str) -> Result<Vec<Status>, String> {
        let out = self.etcdctl(
            from,
            &self.endpoints(),
            &["endpoint", "status", "-w", "simple"],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        // `http://10.199.0.1:2379, 8e9e05c52164694d, 3.4.23, 20 kB, true, false, 2, 8, 8, `
        let statuses: Vec<Status> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(", ").collect();
                Some(Status {
                    endpoint: f.first()?.trim_start_matches("http://").to_owned(),
                    id: f.get(1)?.to_string(),
                    leader: *f.get(4)? == "true",
                })
            })
            .collect();
        if statuses.len() < self.hosts.len() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "{} of {} answered: {err}",
                statuses.len(),
                self.hosts.len()
            ));
        }
        Ok(statuses)
    }

    /// The member host that leads, once every member answers from `from` and exactly one says
    /// it leads.
    #[track_caller]
    pub fn leader(&self, from: &str) -> String {
        retry(PATIENCE, "one etcd leader every member agrees on", || {
            let statuses = self.statuses(from)?;
            let leaders: Vec<&Status> = statuses.iter().filter(|s| s.leader).collect();
            match leaders[..] {
                [one] => Ok(self.host_of(&one.endpoint)),
                _ => Err(format!("leaders: {statuses:?}")),
            }
        })
    }

    /// Moves leadership to member `to`, and waits until every member names it.
    #[track_caller]
    pub fn move_leader(&self, to: &str) {
        let from = self.hosts[0].clone();
        retry(PATIENCE, &format!("{to} to lead"), || {
            let statuses = self.statuses(&from)?;
            let leader = statuses.iter().find(|s| s.leader).ok_or("no leader")?;
            let target = statuses
                .iter()
                .find(|s| self.host_of(&s.endpoint) == to)
                .ok_or("no such member")?;
            if leader.endpoint == target.endpoint {
                return Ok(());
            }
            let endpoint = vec![leader.endpoint.clone()];
            let out = self.etcdctl(&from, &endpoint, &["move-leader", &target.id]);
            Err(format!(
                "move-leader: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        });
        assert_eq!(self.leader(&from), to);
    }

    /// How many keys under `prefix`, and how many runs' leases (the record's lease, granted
    /// for 40 days, outlives the runs by design), asked from host `from`; Err when the cluster
    /// did not answer.
    pub fn leftovers(&self, from: &str, prefix: &str) -> Result<(usize, usize), String> {
        let lines = |args: &[&str], skip: usize| {
            let out = self.etcdctl(from, &self.endpoints(), args);
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).into_owned());
            }
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok(text
                .lines()
                .skip(skip)
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>())
        };
        // `get --keys-only` prints each key; `lease list` prints `found N leases`, then ids;
        // `lease timetolive` says `lease ID granted with TTL(Ns), remaining(Ms)`.
        let keys = lines(&["get", "--prefix", "--keys-only", "--", prefix], 0)?.len();
        let mut runs = 0;
        for id in lines(&["lease", "list"], 1)? {
            let said = lines(&["lease", "timetolive", &id], 0)?.join(" ");
            let granted = said
                .split_once("TTL(")
                .and_then(|(_, rest)| rest.split_once("s)"))
                .and_then(|(secs, _)| secs.parse::<u64>().ok());
            // Gone meanwhile ("already expired"), or a run's: counted unless the record's.
            if granted.is_none_or(|secs| secs < RECORD_LEASE_SECS) {
                runs += usize::from(granted.is_some());
            }
        }
        Ok((keys, runs))
    }

    /// Waits until every member says it is healthy (a leader, a linearizable read), asked
    /// from host `from`.
    #[track_caller]
    pub fn wait_healthy(&self, from: &str) {
        retry(PATIENCE, "every etcd member to be healthy", || {
            let out = self.etcdctl(from, &self.endpoints(), &["endpoint", "health"]);
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        });
    }

    fn host_of(&self, endpoint: &str) -> String {
        let i = self.endpoints().iter().position(|e| e == endpoint);
        let i = i.unwrap_or_else(|| panic!("{endpoint} is no member's"));
        self.hosts[i].clone()
    }
}

impl Drop for EtcdNet<'_> {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
