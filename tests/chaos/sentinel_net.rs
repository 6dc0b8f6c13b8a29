//! Redis with Sentinel on the partition phase's hosts: a master on the first host, a replica on
//! each of the others, and a sentinel beside each (quorum 2, a master down after 1 s). A
//! side with two sentinels promotes a replica it reaches; the other replica follows the new
//! master, so clients with `--min-replicas 1` get on there while the old master, alone, can
//! have nothing acknowledged.

use std::process::Stdio;

use crate::common::net::Net;
use crate::common::{PATIENCE, Proc, TempDir, server_binary, wait_until};

pub const SERVICE: &str = "svc";

/// How long a sentinel waits before it takes a silent master for down, in ms: no failover can
/// end sooner after a cut.
pub const DOWN_AFTER_MS: u64 = 1000;

/// The servers and sentinels, running until dropped (the net's drop kills them too).
pub struct SentinelNet {
    _procs: Vec<Proc>,
    /// Their configuration files, which the sentinels rewrite as they go.
    _dir: TempDir,
}

/// `redis-cli -h addr -p port args` from host `from`: its stdout, or "" when it failed.
fn cli(net: &Net, from: &str, addr: &str, port: u16, args: &[&str]) -> String {
    let mut cmd = net.command(from, "timeout");
    cmd.args(["2", "redis-cli", "-h", addr, "-p", &port.to_string()])
        .args(args)
        .stderr(Stdio::null());
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl SentinelNet {
    /// The master on `hosts[0]`, its replicas on the others, a sentinel on each: started, and
    /// every sentinel knows every replica and the other sentinels.
    pub fn start(net: &Net, hosts: &[&str]) -> SentinelNet {
        let dir = TempDir::new();
        let master = net.host(hosts[0]).addr.clone();
        let mut procs = Vec::new();
        for (i, &h) in hosts.iter().enumerate() {
            let addr = &net.host(h).addr;
            let mut cmd = net.command(h, server_binary());
            cmd.args(["--bind", addr, "--port", "6379", "--save", ""])
                .args(["--appendonly", "no", "--protected-mode", "no"]);
            if i > 0 {
                cmd.args(["--replicaof", &master, "6379"]);
            }
            procs.push(Proc::spawn(cmd));
        }
        for &h in &hosts[1..] {
            let addr = net.host(h).addr.clone();
            wait_until(PATIENCE, &format!("the replica on {h} to follow"), || {
                cli(net, h, &addr, 6379, &["info", "replication"]).contains("master_link_status:up")
            });
        }
        for &h in hosts {
            let conf = dir.join(&format!("sentinel-{h}.conf"));
            let addr = &net.host(h).addr;
            let text = format!(
                "bind {addr}\nport 26379\nprotected-mode no\n\
                 sentinel monitor {SERVICE} {master} 6379 2\n\
                 sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {SERVICE} 3000\n"
            );
            std::fs::write(&conf, text).unwrap();
            let mut cmd = net.command(h, server_binary());
            cmd.arg(&conf).arg("--sentinel");
            procs.push(Proc::spawn(cmd));
        }
        let (replicas, others) = ((hosts.len() - 1).to_string(), (hosts.len() - 1).to_string());
        for &h in hosts {
            let addr = net.host(h).addr.clone();
            wait_until(PATIENCE, &format!("sentinel {h} to know its peers"), || {
                let info = cli(net, h, &addr, 26379, &["sentinel", "master", SERVICE]);
                let lines: Vec<&str> = info.lines().collect();
                let field = |name: &str| {
                    let at = lines.iter().position(|l| *l == name)?;
                    lines.get(at + 1).copied()
                };
                field("num-slaves") == Some(&replicas)
                    && field("num-other-sentinels") == Some(&others)
            });
        }
        SentinelNet {
            _procs: procs,
            _dir: dir,
        }
    }

    /// The host the sentinels name as the master, asked on each of `hosts` from that host: the
    /// name most of them give, or None.
    pub fn master<'h>(net: &Net, hosts: &[&'h str]) -> Option<&'h str> {
        let named: Vec<String> = hosts
            .iter()
            .map(|&h| {
                let addr = net.host(h).addr.clone();
                let args = ["sentinel", "get-master-addr-by-name", SERVICE];
                let out = cli(net, h, &addr, 26379, &args);
                out.lines().next().unwrap_or("").to_owned()
            })
            .collect();
        hosts.iter().copied().find(|&h| {
            let addr = &net.host(h).addr;
            named.iter().filter(|n| *n == addr).count() * 2 > hosts.len()
        })
    }

    /// `redis+sentinel://` every sentinel.
    pub fn url(net: &Net, hosts: &[&str]) -> String {
        let all: Vec<String> = hosts
            .iter()
            .map(|h| format!("{}:26379", net.host(h).addr))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", all.join(","))
    }
}
