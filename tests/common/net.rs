//! A network the test can cut: hosts are network namespaces, each with one address in
//! 10.199.0.0/16 on an `eth0` whose other end is a port of one of two bridges (side A and side
//! B). The bridges sit in one more namespace, the switch, joined by a veth pair `ab`/`ba`. The
//! root namespace gets no address and no route into the range: nothing outside the test's own
//! namespaces is ever a target.
//!
//! Faults: [`Net::cut`] sets `ab` down (every packet between the sides dropped, no reset sent);
//! [`Net::cut_host`] sets one host's port down; [`Net::cut_one_way`] drops, with nftables in the
//! sending host's own namespace (no br_netfilter here), what it sends to some addresses.
//!
//! Names are `rlp-<pid>-<n>-<host>`: parallel tests and an earlier run cannot collide, and the
//! namespaces of a run whose process is gone are swept at the next start. On drop every process
//! in the namespaces is SIGKILLed and the namespaces deleted, a panicking test's too.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, OnceLock};

use super::{TempDir, pid_alive};

/// Which switch a host is plugged into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

/// One host: its short name (also its hostname, for redlock's holder records), its namespace
/// and its address.
pub struct Host {
    pub name: String,
    ns: String,
    pub addr: String,
    side: Side,
}

/// The namespaces of one test: hosts on two switches.
pub struct Net {
    switch: String,
    hosts: Vec<Host>,
    /// A working directory per host (`<dir>/<host>`), where [`Net::command`] starts its
    /// processes: what a server writes beside itself (a replica's `dump.rdb`) lands there.
    dir: TempDir,
}

const PREFIX: &str = "rlp-";

impl Net {
    /// Hosts named and placed as `layout` says, addressed 10.199.0.1, .2, ... in that order.
    /// None when namespaces cannot be made here: one line on stderr says why. Under `CI` (which
    /// always runs as root) that is a failure instead.
    pub fn new(layout: &[(&str, Side)]) -> Option<Net> {
        // Probed once per process: parallel tests would otherwise race on the probe's name.
        static USABLE: OnceLock<Result<(), String>> = OnceLock::new();
        if let Err(why) = USABLE.get_or_init(usable) {
            if std::env::var_os("CI").is_some() {
                panic!("partition tests need network namespaces, and CI must have them: {why}");
            }
            eprintln!("skipped: partition tests need network namespaces: {why}");
            return None;
        }
        static SWEEP: Once = Once::new();
        SWEEP.call_once(sweep_stale);
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let base = format!("{PREFIX}{}-{n}-", std::process::id());
        let switch = format!("{base}sw");
        // Made before anything that could fail, so that Drop removes whatever was made.
        let mut net = Net {
            switch: switch.clone(),
            hosts: Vec::new(),
            dir: TempDir::new(),
        };
        ip(&["netns", "add", &switch]);
        let sw = switch.as_str();
        ip_in(sw, &["link", "set", "lo", "up"]);
        for br in ["brA", "brB"] {
            ip_in(sw, &["link", "add", br, "type", "bridge"]);
            ip_in(sw, &["link", "set", br, "up"]);
        }
        ip_in(
            sw,
            &["link", "add", "ab", "type", "veth", "peer", "name", "ba"],
        );
        ip_in(sw, &["link", "set", "ab", "master", "brA", "up"]);
        ip_in(sw, &["link", "set", "ba", "master", "brB", "up"]);
        for (i, &(name, side)) in layout.iter().enumerate() {
            let ns = format!("{base}{name}");
            let host = Host {
                name: name.to_owned(),
                ns: ns.clone(),
                addr: format!("10.199.0.{}", i + 1),
                side,
            };
            ip(&["netns", "add", &ns]);
            net.hosts.push(host);
            std::fs::create_dir(net.dir.join(name)).unwrap();
            let port = format!("p{i}");
            let br = match side {
                Side::A => "brA",
                Side::B => "brB",
            };
            // The pair is made in the switch with its far end already in the host, so no name
            // but the port's is ever taken in the switch.
            let pair = [
                "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ];
            ip_in(sw, &[&["link"], &pair[..]].concat());
            ip_in(sw, &["link", "set", &port, "master", br, "up"]);
            ip_in(&ns, &["link", "set", "lo", "up"]);
            let cidr = format!("{}/16", net.hosts[i].addr);
            ip_in(&ns, &["addr", "add", &cidr, "dev", "eth0"]);
            ip_in(&ns, &["link", "set", "eth0", "up"]);
        }
        Some(net)
    }

    /// The host named `name`; panics if there is none.
    #[track_caller]
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name} in this net"))
    }

    /// `program` run inside host `name`: in its network namespace, with its own hostname (a UTS
    /// namespace of its own), as the same process (`ip netns exec`, `unshare` and `sh` exec),
    /// in the host's working directory.
    pub fn command(&self, name: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let words = self.within(name);
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]).arg(program).stdin(Stdio::null());
        cmd.current_dir(self.dir.join(name));
        cmd
    }

    /// The words that run a program inside host `name` (what [`command`](Self::command)
    /// puts before it), for a builder that takes a prefix (`Redlock::through`).
    pub fn within(&self, name: &str) -> Vec<String> {
        let host = self.host(name);
        let words = [
            "ip", "netns", "exec", &host.ns, "unshare", "--uts", "--", "sh", "-c",
        ];
        let mut words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        words.push(r#"hostname "$0" && exec "$@""#.to_owned());
        words.push(host.name.clone());
        words
    }

    /// Drops every packet between side A and side B (the link between the switches down).
    pub fn cut(&self) {
        self.switch_link("ab", "down");
    }

    /// Undoes [`cut`](Self::cut).
    pub fn heal(&self) {
        self.switch_link("ab", "up");
    }

    /// Drops every packet to and from host `name` (its switch port down).
    pub fn cut_host(&self, name: &str) {
        let port = self.port(name);
        self.switch_link(&port, "down");
    }

    /// Undoes [`cut_host`](Self::cut_host).
    pub fn heal_host(&self, name: &str) {
        let port = self.port(name);
        self.switch_link(&port, "up");
    }

    /// Drops what host `from` sends to the hosts `to` (an nftables output rule in `from`'s
    /// namespace); what they send to it still arrives.
    pub fn cut_one_way(&self, from: &str, to: &[&str]) {
        let addrs: Vec<&str> = to.iter().map(|h| self.host(h).addr.as_str()).collect();
        let rules = format!(
            "table ip rlp_cut {{\n chain out {{\n  type filter hook output priority 0; \
             policy accept;\n  ip daddr {{ {} }} drop\n }}\n}}\n",
            addrs.join(", ")
        );
        let ns = &self.host(from).ns;
        run_with_stdin(&["ip", "netns", "exec", ns, "nft", "-f", "-"], &rules);
    }

    /// Undoes [`cut_one_way`](Self::cut_one_way) from `from`.
    pub fn heal_one_way(&self, from: &str) {
        let ns = &self.host(from).ns;
        run_with_stdin(
            &[
                "ip", "netns", "exec", ns, "nft", "delete", "table", "ip", "rlp_cut",
            ],
            "",
        );
    }

    /// The names of the hosts on `side`.
    pub fn side(&self, side: Side) -> Vec<&str> {
        let on = self.hosts.iter().filter(|h| h.side == side);
        on.map(|h| h.name.as_str()).collect()
    }

    fn port(&self, name: &str) -> String {
        let i = self.hosts.iter().position(|h| h.name == name);
        format!(
            "p{}",
            i.unwrap_or_else(|| panic!("no host {name} in this net"))
        )
    }

    fn switch_link(&self, dev: &str, state: &str) {
        ip_in(&self.switch, &["link", "set", dev, state]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let mut names: Vec<&str> = self.hosts.iter().map(|h| h.ns.as_str()).collect();
        names.push(&self.switch);
        for ns in names {
            remove_namespace(ns);
        }
    }
}

/// Root, `ip` and `nft` on PATH, and a namespace can be made; Err says which is missing.
fn usable() -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("not root".into());
    }
    for tool in ["ip", "nft", "unshare"] {
        let path = std::env::var_os("PATH").unwrap_or_default();
        if !std::env::split_paths(&path).any(|d| d.join(tool).is_file()) {
            return Err(format!("no `{tool}` on PATH"));
        }
    }
    let probe = format!("{PREFIX}{}-probe", std::process::id());
    let made = Command::new("ip").args(["netns", "add", &probe]).output();
    match made {
        Ok(out) if out.status.success() => {
            remove_namespace(&probe);
            Ok(())
        }
        Ok(out) => Err(format!(
            "`ip netns add` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("running `ip`: {e}")),
    }
}

/// Removes the namespaces an earlier run left behind: those whose test process is gone.
pub fn sweep_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() as i32 && !pid_alive(pid)) {
            remove_namespace(name);
        }
    }
}

/// SIGKILLs every process in namespace `ns` and deletes it. Errors are ignored: this runs in
/// Drop, and a namespace that is already gone is what it wants.
fn remove_namespace(ns: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                let pid = nix::unistd::Pid::from_raw(pid);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_file(Path::new("/run/netns").join(ns));
}

/// Runs `ip args`, which must succeed.
#[track_caller]
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Runs `ip -n ns args` (`args` inside namespace `ns`), which must succeed.
#[track_caller]
fn ip_in(ns: &str, args: &[&str]) {
    ip(&[&["-n", ns], args].concat());
}

/// Runs `argv` with `input` on its stdin; it must succeed.
#[track_caller]
fn run_with_stdin(argv: &[&str], input: &str) {
    use std::io::Write;
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {argv:?}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        argv.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}
