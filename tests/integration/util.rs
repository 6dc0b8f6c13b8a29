//! Test fixtures: a throwaway `redis-server` per test, temp dirs, the redlock command, and
//! polling helpers that synchronise on files the worker scripts write instead of on sleeps.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// Generous upper bound for anything that should "happen soon"; only reached when something is broken.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Every environment variable redlock reads; cleared so the developer's shell cannot leak into a test.
const REDLOCK_ENV: &[&str] = &[
    "REDLOCK_URL",
    "REDLOCK_TTL",
    "REDLOCK_WAIT",
    "REDLOCK_FAIR",
    "REDLOCK_PREFIX",
    "REDLOCK_KILL_AFTER",
    "REDLOCK_STOP_SIGNAL",
    "REDLOCK_CONFLICT_EXIT_CODE",
    "REDLOCK_MAX_RUNTIME",
    "REDLOCK_MIN_INTERVAL",
    "REDLOCK_METRICS_FILE",
    "REDLOCK_LOG_FORMAT",
    "REDLOCK_PASSWORD",
    "REDLOCK_PASSWORD_FILE",
    "REDLOCK_TLS_CA_CERT",
    "REDLOCK_TLS_CERT",
    "REDLOCK_TLS_KEY",
    "REDLOCK_TLS_INSECURE",
    "REDLOCK_KEY",
    "REDLOCK_TOKEN",
    "REDLOCK_FENCING_TOKEN",
];

// ---------------------------------------------------------------------------------------------
// Temp dirs

/// A fresh directory under `std::env::temp_dir()`, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new() -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("redlock-it-{}-{n}-{nanos:x}", std::process::id()));
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// `join` as a single-quoted shell word, for splicing into worker scripts.
    pub fn sh(&self, name: &str) -> String {
        shell_quote(&self.join(name))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Quotes a path for `sh -c`.
pub fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

// ---------------------------------------------------------------------------------------------
// Redis server

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

    fn socket_path(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let mut cmd = Command::new("redis-server");
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

/// `redlock <sub> --url <each server> <args...>`: an admin subcommand against a quorum.
pub fn admin_quorum(servers: &[RedisServer], sub: &str, args: &[&str]) -> Command {
    let mut cmd = redlock();
    cmd.arg(sub);
    for server in servers {
        cmd.args(["--url", &server.url()]);
    }
    cmd.args(args);
    cmd
}

/// `redlock run --url <each server> --key <key> <opts...> -- sh -c <script>`: a quorum run.
pub fn run_quorum(servers: &[RedisServer], key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.arg("run");
    for server in servers {
        cmd.args(["--url", &server.url()]);
    }
    cmd.args(["--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

/// The lock key for `name` under the default prefix.
pub fn lock_key(name: &str) -> String {
    format!("redlock:{{{name}}}")
}

/// The fencing counter key for `name` under the default prefix.
pub fn fence_key(name: &str) -> String {
    format!("redlock:{{{name}}}:fence")
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------------------------
// Running redlock

/// The redlock binary with every `REDLOCK_*` variable cleared and stdin closed.
pub fn redlock() -> Command {
    let mut cmd = Command::new(BIN);
    clear_redlock_env(&mut cmd);
    cmd.stdin(Stdio::null());
    cmd
}

/// Removes every `REDLOCK_*` variable from `cmd`'s environment.
pub fn clear_redlock_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("REDLOCK_") {
            cmd.env_remove(&name);
        }
    }
    for name in REDLOCK_ENV {
        cmd.env_remove(name);
    }
}

/// `redlock run --url <server> --key <key> <opts...> -- sh -c <script>`.
pub fn run_sh(server: &RedisServer, key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.args(["run", "--url", &server.url(), "--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

/// `redlock run --url <url> --key <key> <opts...> -- sh -c <script>`, for URLs that name more
/// than one server (Sentinel, Cluster).
pub fn run_url(url: &str, key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.args(["run", "--url", url, "--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

/// `redlock <sub> --url <server> <args...>`: an admin subcommand against `server`.
pub fn admin(server: &RedisServer, sub: &str, args: &[&str]) -> Command {
    let mut cmd = redlock();
    cmd.args([sub, "--url", &server.url()]).args(args);
    cmd
}

/// What a finished redlock left behind.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From spawn to the moment the exit was observed.
    pub elapsed: Duration,
}

impl Output {
    /// The exit code; panics (showing stderr) if redlock itself died of a signal.
    pub fn code(&self) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        match self.status.code() {
            Some(c) => c,
            None => panic!(
                "redlock was killed by signal {:?} instead of exiting\nstderr:\n{}",
                self.status.signal(),
                self.stderr
            ),
        }
    }

    #[track_caller]
    pub fn assert_code(&self, want: i32) {
        let got = self.code();
        assert_eq!(
            got, want,
            "redlock exited {got}, expected {want}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
    }

    /// Every diagnostic line carries the `redlock: ` prefix.
    #[track_caller]
    pub fn assert_stderr_prefixed(&self) {
        for line in self.stderr.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                line.starts_with("redlock: "),
                "stderr line without `redlock: ` prefix: {line:?}\nfull stderr:\n{}",
                self.stderr
            );
        }
    }
}

/// A spawned redlock with captured stdout/stderr; SIGKILLed on drop if still running.
pub struct Proc {
    child: Child,
    started: Instant,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    eof: mpsc::Receiver<()>,
    status: Option<(ExitStatus, Instant)>,
}

fn pump(mut from: impl Read + Send + 'static, done: mpsc::Sender<()>) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
        let _ = done.send(());
    });
    buf
}

impl Proc {
    /// Spawns with stdout and stderr piped (stdin as configured on `cmd`).
    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let (tx, eof) = mpsc::channel();
        let stdout = pump(child.stdout.take().unwrap(), tx.clone());
        let stderr = pump(child.stderr.take().unwrap(), tx);
        Proc {
            child,
            started,
            stdout,
            stderr,
            eof,
            status: None,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.pid()), sig).unwrap();
    }

    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Polls for exit for up to `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some((s, _)) = self.status {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                self.status = Some((s, Instant::now()));
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Still running right now?
    pub fn running(&mut self) -> bool {
        self.wait_timeout(Duration::ZERO).is_none()
    }

    /// Waits for exit (SIGKILL and panic after `timeout`) and collects the output.
    #[track_caller]
    pub fn finish(mut self, timeout: Duration) -> Output {
        if self.wait_timeout(timeout).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "redlock still running after {timeout:?}; killed it\nstderr:\n{}",
                self.stderr_so_far()
            );
        }
        // A leftover grandchild may hold the pipes open; don't wait for it forever.
        for _ in 0..2 {
            let _ = self.eof.recv_timeout(Duration::from_secs(3));
        }
        let (status, at) = self.status.unwrap();
        Output {
            status,
            stdout: String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned(),
            stderr: String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned(),
            elapsed: at - self.started,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawns `cmd` and waits for it, killing it (and failing) after `timeout`.
#[track_caller]
pub fn run_timeout(cmd: Command, timeout: Duration) -> Output {
    Proc::spawn(cmd).finish(timeout)
}

// ---------------------------------------------------------------------------------------------
// Polling

/// Polls `cond` every ~10 ms until it holds; panics with `what` after `timeout`.
#[track_caller]
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `path` to exist.
#[track_caller]
pub fn wait_for_file(path: &Path) {
    wait_until(PATIENCE, &format!("file {}", path.display()), || {
        path.exists()
    });
}

/// Waits for `path` to hold at least one complete line and returns its trimmed contents.
#[track_caller]
pub fn wait_for_line(path: &Path) -> String {
    let mut out = String::new();
    wait_until(
        PATIENCE,
        &format!("a complete line in {}", path.display()),
        || match fs::read_to_string(path) {
            Ok(s) if s.contains('\n') => {
                out = s;
                true
            }
            _ => false,
        },
    );
    out.trim().to_string()
}

/// Reads a pid written by `echo $$ > file`.
#[track_caller]
pub fn wait_for_pid(path: &Path) -> i32 {
    let s = wait_for_line(path);
    s.parse()
        .unwrap_or_else(|_| panic!("{} holds {s:?}, not a pid", path.display()))
}

/// Reads a whole file, or "" if it is missing.
pub fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// Writes an empty file (the "go" signal to a worker).
pub fn touch(path: &Path) {
    fs::write(path, "").unwrap();
}

/// Writes a file and makes it non-executable or executable.
pub fn write_file(path: &Path, contents: &str, mode: u32) {
    fs::write(path, contents).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Nanoseconds since the epoch, the same clock as `date +%s%N`.
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

/// Parses every line of a `date +%s%N` stamp file.
pub fn read_stamps(path: &Path) -> Vec<i128> {
    read(path)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|_| panic!("bad stamp {l:?} in {}", path.display()))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Processes

/// `(state, pgrp)` from /proc/<pid>/stat, or None if the pid is gone.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses; the fields we want follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

fn live(state: char) -> bool {
    !matches!(state, 'Z' | 'X' | 'x')
}

/// The pid exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| live(state))
}

/// Live (non-zombie) members of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((state, pgrp)) = proc_stat(pid)
            && pgrp == pgid
            && live(state)
        {
            pids.push(pid);
        }
    }
    pids
}

pub fn group_alive(pgid: i32) -> bool {
    !group_members(pgid).is_empty()
}

/// Waits until `pid` is gone or a zombie.
#[track_caller]
pub fn wait_pid_dead(pid: i32, timeout: Duration) {
    wait_until(timeout, &format!("pid {pid} to die"), || !pid_alive(pid));
}

/// Polls (every ~2 ms) until process group `pgid` has no live member and returns the wall-clock
/// time (ns since the epoch) at which that was first seen; panics after `timeout`.
#[track_caller]
pub fn wait_group_dead_at(pgid: i32, timeout: Duration) -> i128 {
    let deadline = Instant::now() + timeout;
    loop {
        if !group_alive(pgid) {
            return now_ns();
        }
        if Instant::now() > deadline {
            panic!(
                "process group {pgid} still alive after {timeout:?}: {:?}",
                group_members(pgid)
            );
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Does `pid` have an established TCP connection to 127.0.0.1:`port`?
pub fn has_tcp_connection(pid: i32, port: u16) -> bool {
    tcp_connections(pid, port) > 0
}

/// How many established TCP connections `pid` has to 127.0.0.1:`port`.
pub fn tcp_connections(pid: i32, port: u16) -> usize {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let inodes: HashSet<String> = fds
        .flatten()
        .filter_map(|fd| fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let l = link.to_string_lossy().into_owned();
            l.strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .map(str::to_string)
        })
        .collect();
    let tcp = fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    let want = format!(":{port:04X}");
    tcp.lines()
        .skip(1)
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() > 9 && f[2].ends_with(&want) && f[3] == "01" && inodes.contains(f[9])
        })
        .count()
}

// ---------------------------------------------------------------------------------------------
// Worker scripts (run as `sh -c`); files are named `<tag>.<what>` inside the test's temp dir.

/// Records REDLOCK_TOKEN, REDLOCK_FENCING_TOKEN and its pid, creates `<tag>.ready`, then runs
/// until the test creates `<tag>.go`, and exits 0.
pub fn hold_script(dir: &TempDir, tag: &str) -> String {
    format!(
        "echo \"$REDLOCK_TOKEN\" > {token}; echo \"$REDLOCK_FENCING_TOKEN\" > {fence}; \
         echo $$ > {pid}; touch {ready}; while [ ! -e {go} ]; do sleep 0.02; done",
        token = dir.sh(&format!("{tag}.token")),
        fence = dir.sh(&format!("{tag}.fence")),
        pid = dir.sh(&format!("{tag}.pid")),
        ready = dir.sh(&format!("{tag}.ready")),
        go = dir.sh(&format!("{tag}.go")),
    )
}

/// Starts redlock running [`hold_script`] on lock `key` and waits until it holds the lock;
/// returns the process and the owner token the command saw.
pub fn spawn_holder(
    redis: &RedisServer,
    key: &str,
    opts: &[&str],
    dir: &TempDir,
    tag: &str,
) -> (Proc, String) {
    let proc = Proc::spawn(run_sh(redis, key, opts, &hold_script(dir, tag)));
    wait_for_file(&dir.join(&format!("{tag}.ready")));
    let token = wait_for_line(&dir.join(&format!("{tag}.token")));
    (proc, token)
}

/// Records its pid, creates `<tag>.ready`, then appends a `date +%s%N` heartbeat to `<tag>.hb`
/// every ~50 ms forever.
pub fn heartbeat_script(dir: &TempDir, tag: &str) -> String {
    format!(
        "echo $$ > {pid}; date +%s%N >> {hb}; touch {ready}; \
         while :; do date +%s%N >> {hb}; sleep 0.05; done",
        pid = dir.sh(&format!("{tag}.pid")),
        hb = dir.sh(&format!("{tag}.hb")),
        ready = dir.sh(&format!("{tag}.ready")),
    )
}

/// A command that only creates `marker`: proves whether redlock ran the command at all.
pub fn marker_script(dir: &TempDir) -> String {
    format!("touch {}", dir.sh("marker"))
}

/// [`spawn_holder`] on a URL that names several servers (Sentinel, Cluster).
pub fn spawn_holder_at(
    url: &str,
    key: &str,
    opts: &[&str],
    dir: &TempDir,
    tag: &str,
) -> (Proc, String) {
    let proc = Proc::spawn(run_url(url, key, opts, &hold_script(dir, tag)));
    wait_for_file(&dir.join(&format!("{tag}.ready")));
    let token = wait_for_line(&dir.join(&format!("{tag}.token")));
    (proc, token)
}
