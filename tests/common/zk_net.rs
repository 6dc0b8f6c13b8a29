//! A 3-member ZooKeeper ensemble whose members are hosts of a [`Net`], on their own addresses
//! (client port 2181, quorum port 2888, election port 3888), with the fixture's short tick (200
//! ms) and a `syncLimit` of 5 ticks: a follower that hears nothing from its leader for 1 s (and a
//! leader that hears from no majority) drops its clients and looks for a new one. Sessions may
//! last up to 10 s (50 ticks). The members are asked about themselves with the four-letter word
//! `srvr`, sent from inside a host.
//!
//! ZooKeeper has no command that moves leadership: the leader is made where a case needs it by
//! the election's own rule. The member that is to lead gets the highest id and is started with
//! one other member; two members that have seen nothing elect the higher id, and the third,
//! started once they have, follows. Every member is killed on drop (and by the net's own drop,
//! which kills everything in its namespaces).

use std::fs::OpenOptions;
use std::process::{Child, Stdio};

use super::net::Net;
use super::zookeeper::setup::{Launch, java_binary, server_command_from, write_dir};
use super::{PATIENCE, TempDir, ZkOpts, retry};

/// What a member's followers wait for their leader, in ticks of 200 ms (and what a leader
/// waits for a majority of them): 1 s.
pub const SYNC_LIMIT_TICKS: u32 = 5;

pub struct ZkNet<'n> {
    net: &'n Net,
    /// The member hosts, in member order.
    hosts: Vec<String>,
    children: Vec<Child>,
    /// Each member's CONFDIR, data and `zookeeper.log`, removed on drop.
    dirs: Vec<TempDir>,
}

impl<'n> ZkNet<'n> {
    /// Starts a member on each of `hosts`, `leader` (one of them) leading; returns once every
    /// member serves and `leader` leads.
    #[track_caller]
    pub fn start(net: &'n Net, hosts: &[&str], leader: &str) -> ZkNet<'n> {
        assert!(hosts.contains(&leader), "{leader} is no member");
        // The leader gets the highest id, the others 1, 2, ... in the order given.
        let mut order: Vec<&str> = hosts.iter().copied().filter(|h| *h != leader).collect();
        order.push(leader);
        let servers: String = order
            .iter()
            .enumerate()
            .map(|(i, h)| format!("server.{}={}:2888:3888\n", i + 1, net.host(h).addr))
            .collect();
        let opts = ZkOpts {
            extra_config: vec![
                format!("syncLimit={SYNC_LIMIT_TICKS}"),
                "maxSessionTimeout=10000".to_owned(),
            ],
            ..ZkOpts::default()
        };
        let mut ensemble = ZkNet {
            net,
            hosts: order.iter().map(|h| h.to_string()).collect(),
            children: Vec::new(),
            dirs: Vec::new(),
        };
        for (i, h) in order.iter().enumerate() {
            let dir = TempDir::new();
            write_dir(&dir, i + 1, (&net.host(h).addr, 2181), &servers, &opts);
            ensemble.dirs.push(dir);
        }
        // The leader and the member of id 1 first: they elect the leader.
        let last = order.len() - 1;
        ensemble.spawn(0);
        ensemble.spawn(last);
        retry(PATIENCE, &format!("{leader} to lead"), || {
            match ensemble.mode(leader, leader)?.as_str() {
                "leader" => Ok(()),
                mode => Err(format!("{leader} is {mode}")),
            }
        });
        for i in 1..last {
            ensemble.spawn(i);
        }
        ensemble.wait_healthy(leader);
        assert_eq!(ensemble.leader(leader), leader);
        ensemble
    }

    /// Starts the JVM of the member that is `self.hosts[i]`, inside its host.
    fn spawn(&mut self, i: usize) {
        let host = &self.hosts[i];
        let dir = &self.dirs[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("zookeeper.log"))
            .unwrap();
        let mut cmd = server_command_from(
            self.net.command(host, java_binary()),
            dir.path(),
            Launch::default(),
        );
        cmd.stdout(log.try_clone().unwrap()).stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        self.children.push(child);
    }

    /// `zk://ADDR:2181,...` with every member by address, in member order (the leader last).
    pub fn url(&self) -> String {
        let addr = |h: &String| format!("{}:2181", self.net.host(h).addr);
        let members: Vec<String> = self.hosts.iter().map(addr).collect();
        format!("zk://{}", members.join(","))
    }

    /// What `member` says it is (`leader`, `follower`), asked with `srvr` from host `from`: Err
    /// when it does not answer within a second or does not serve.
    fn mode(&self, from: &str, member: &str) -> Result<String, String> {
        let addr = &self.net.host(member).addr;
        // bash's /dev/tcp: a connection from inside the host, with nothing to install.
        let script = r#"exec 3<>"/dev/tcp/$0/2181" && printf srvr >&3 && cat <&3"#;
        let mut cmd = self.net.command(from, "timeout");
        cmd.args(["1", "bash", "-c", script, addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
        let answer = String::from_utf8_lossy(&out.stdout);
        answer
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|mode| mode.trim().to_owned())
            .ok_or_else(|| {
                let err = String::from_utf8_lossy(&out.stderr);
                format!("{member} says {:?} {}", answer.trim(), err.trim())
            })
    }

    /// The member host that leads, once every member answers `srvr` from `from` and exactly one
    /// says it leads.
    #[track_caller]
    pub fn leader(&self, from: &str) -> String {
        retry(
            PATIENCE,
            "one ZooKeeper leader and every member serving",
            || {
                let mut leaders = Vec::new();
                for host in &self.hosts {
                    match self.mode(from, host)?.as_str() {
                        "leader" => leaders.push(host.clone()),
                        "follower" => {}
                        mode => return Err(format!("{host} is {mode}")),
                    }
                }
                match &leaders[..] {
                    [one] => Ok(one.clone()),
                    _ => Err(format!("leaders: {leaders:?}")),
                }
            },
        )
    }

    /// Waits until every member serves and one leads, asked from host `from`.
    #[track_caller]
    pub fn wait_healthy(&self, from: &str) {
        self.leader(from);
    }

    /// Member `host`'s log, for a failing case to show.
    pub fn log(&self, host: &str) -> String {
        let i = self.hosts.iter().position(|h| h == host).unwrap();
        std::fs::read_to_string(self.dirs[i].join("zookeeper.log")).unwrap_or_default()
    }
}

impl Drop for ZkNet<'_> {
    fn drop(&mut self) {
        // A failing case shows what each member did last: who led, when each gave up whom.
        if std::thread::panicking() {
            for host in &self.hosts {
                let log = self.log(host);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                eprintln!("ZooKeeper member {host}'s log ends:\n{}", tail.join("\n"));
            }
        }
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
