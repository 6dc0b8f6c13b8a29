//! A throwaway PostgreSQL server per test: a fresh cluster (`initdb`) in a temp dir, on a free
//! loopback port and on a unix socket in a directory of its own, fsync off; killed on drop with
//! every process it started. Faults on the whole server (every process stopped and continued,
//! SIGKILLed, restarted on the same port and data) and `psql` as the superuser.
//!
//! Made for Debian's `postgresql` (scripts/test.sh installs it): the newest
//! /usr/lib/postgresql/N/bin. PostgreSQL refuses to run as root, so as root the server runs as
//! the `postgres` user the package creates (or nobody).

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{PATIENCE, Proc, TempDir, free_port, pid_alive, proc_state, read, wait_until};

/// Where Debian puts a server's binaries: the newest /usr/lib/postgresql/N/bin with `initdb`,
/// `postgres` and `psql`. None where PostgreSQL is not installed, for a test that would rather
/// say so than fail; [`PgServer::start`] panics instead.
pub fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            let has = |name| bin.join(name).is_file();
            (has("initdb") && has("postgres") && has("psql")).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// A real PostgreSQL server owned by one test: superuser `postgres`, database `postgres`, on
/// 127.0.0.1:[`port`](Self::port) and a unix socket in [`socket_dir`](Self::socket_dir).
/// `fsync`, `synchronous_commit` and `full_page_writes` are off: a [`kill`](Self::kill) loses
/// nothing the server wrote before it (the OS keeps it), but a commit made without
/// `SET synchronous_commit = on` may still sit in the server's WAL buffers for a few hundred
/// milliseconds. Every process of the server is killed on drop, and its temp dir removed.
pub struct PgServer {
    bin: PathBuf,
    dir: TempDir,
    /// The uid and gid the server runs as, when we are root.
    user: Option<(u32, u32)>,
    port: u16,
    password: Option<String>,
    /// The postmaster; None once killed.
    child: Option<Child>,
}

impl PgServer {
    /// A server where every connection is trusted, over TCP and the unix socket. Panics if
    /// PostgreSQL is not installed, or with the server's log if it does not start accepting
    /// connections within [`PATIENCE`].
    #[track_caller]
    pub fn start() -> PgServer {
        PgServer::start_with(false)
    }

    /// A server where TCP connections must give a password (`scram-sha-256`): the superuser's is
    /// [`password`](Self::password); roles a test makes need their own. The unix socket stays
    /// trusted, for [`psql`](Self::psql).
    #[track_caller]
    pub fn start_with_passwords() -> PgServer {
        PgServer::start_with(true)
    }

    #[track_caller]
    fn start_with(passwords: bool) -> PgServer {
        let bin = postgres_bin().unwrap_or_else(|| {
            panic!(
                "no PostgreSQL server under /usr/lib/postgresql/N/bin: install Debian's \
                 postgresql package (apt-get install postgresql; scripts/test.sh does)"
            )
        });
        let dir = TempDir::new();
        let password = passwords.then(|| {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            format!("pg-secret-{}-{nanos:x}", std::process::id())
        });
        let mut pg = PgServer {
            bin,
            dir,
            user: None,
            port: 0,
            password,
            child: None,
        };
        pg.init();
        // The free port is found by binding :0 and letting go of it; another test can take it
        // in between, in which case the server cannot listen and we try another one.
        for _ in 0..20 {
            pg.port = free_port();
            match pg.spawn() {
                Ok(()) => return pg,
                Err(log) if log.contains("could not create any TCP/IP sockets") => continue,
                Err(log) => panic!("postgres did not start:\n{log}"),
            }
        }
        panic!("postgres found no free port:\n{}", pg.log());
    }

    /// The home (working directory), data directory and socket directory, made and owned by
    /// the server's user; a fresh cluster in the data directory; pg_hba.conf as asked.
    fn init(&mut self) {
        self.make_dirs();
        self.initdb();
    }

    /// The home and the socket directory, owned by the server's user.
    fn make_dirs(&mut self) {
        let home = self.home();
        fs::create_dir(&home).unwrap();
        fs::create_dir(self.socket_dir()).unwrap();
        // Made by this process, so owned by its effective user.
        let root = fs::metadata(&home).unwrap().uid() == 0;
        self.user = root.then(|| passwd("postgres").or_else(|| passwd("nobody")).unwrap());
        if let Some((uid, gid)) = self.user {
            // Its way in, whatever the umask, and directories of its own.
            fs::set_permissions(self.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
            for own in [home.clone(), self.socket_dir()] {
                std::os::unix::fs::chown(&own, Some(uid), Some(gid)).unwrap();
            }
        }
    }

    /// A fresh cluster in the data directory; pg_hba.conf as asked.
    fn initdb(&mut self) {
        let mut initdb = self.as_user(self.bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "--auth=trust", "--no-sync"])
            .args(["--no-instructions", "-E", "UTF8", "--locale=C"]);
        let pwfile = self.dir.join("pwfile");
        if let Some(password) = &self.password {
            // Read by initdb as the server's user: in the world-readable temp dir, for a moment.
            fs::write(&pwfile, format!("{password}\n")).unwrap();
            fs::set_permissions(&pwfile, fs::Permissions::from_mode(0o644)).unwrap();
            initdb.arg(format!("--pwfile={}", pwfile.display()));
        }
        let out = Proc::spawn(initdb).finish();
        let _ = fs::remove_file(&pwfile);
        assert!(
            out.status.success(),
            "initdb failed ({}):\n{}{}",
            out.status,
            out.stdout,
            out.stderr
        );
        let host = if self.password.is_some() {
            "scram-sha-256"
        } else {
            "trust"
        };
        // Rewritten in place: the file keeps its owner.
        fs::write(
            self.data_dir().join("pg_hba.conf"),
            format!(
                "local all all trust\nlocal replication all trust\nhost all all 127.0.0.1/32 {host}\n"
            ),
        )
        .unwrap();
    }

    /// Starts the postmaster on `self.port` and waits until it accepts connections; the log,
    /// if it exited first. Panics with the log if it is not ready within [`PATIENCE`].
    fn spawn(&mut self) -> Result<(), String> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let mut postgres = self.as_user(self.bin.join("postgres"));
        postgres
            .arg("-D")
            .arg(self.data_dir())
            .arg("-k")
            .arg(self.socket_dir())
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "max_connections=100", "-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            // Dynamic shared memory in the data directory, not /dev/shm: nothing of it outlives
            // a SIGKILLed server's temp dir.
            .args(["-c", "dynamic_shared_memory_type=mmap"])
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = postgres.spawn().expect("starting postgres");
        let pid = child.id() as i32;
        self.child = Some(child);
        let deadline = Instant::now() + PATIENCE;
        loop {
            let child = self.child.as_mut().unwrap();
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                // Its backends, if any got started, die with it (postmaster death).
                return Err(format!("postgres exited with {status}:\n{}", self.log()));
            }
            if self.pid_file_says_ready(pid) && self.psql_output("SELECT 1").status.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                panic!(
                    "postgres not accepting connections after {PATIENCE:?}:\n{}",
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// postmaster.pid names `pid` and says `ready`: it accepts connections.
    fn pid_file_says_ready(&self, pid: i32) -> bool {
        let file = read(&self.data_dir().join("postmaster.pid"));
        let lines: Vec<&str> = file.lines().collect();
        lines.first() == Some(&pid.to_string().as_str())
            && lines.get(7).is_some_and(|l| l.trim() == "ready")
    }

    /// `program` as the server's user, in its home, with nothing on stdin.
    fn as_user(&self, program: PathBuf) -> Command {
        let mut cmd = Command::new(program);
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        clear_pg_env(&mut cmd);
        cmd.current_dir(self.home()).stdin(Stdio::null());
        cmd
    }

    fn home(&self) -> PathBuf {
        self.dir.join("pg")
    }

    fn data_dir(&self) -> PathBuf {
        self.home().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`: the superuser, over TCP, with no password.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port on 127.0.0.1, the same across [`restart`](Self::restart)s.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the server's unix socket (`.s.PGSQL.PORT`): a `host=` or `PGHOST`.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// The superuser's password over TCP, for a server from
    /// [`start_with_passwords`](Self::start_with_passwords); None where TCP is trusted.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Everything the server logged, across restarts: for a failing test's message.
    pub fn log(&self) -> String {
        read(&self.log_path())
    }

    /// The postmaster's pid; panics once it was [`kill`](Self::kill)ed.
    pub fn postmaster_pid(&self) -> i32 {
        self.child.as_ref().expect("postgres is not running").id() as i32
    }

    /// Runs `sql` with `psql -X -q -At -v ON_ERROR_STOP=1` as the superuser over the unix
    /// socket in database `postgres`; its stdout, trimmed. Panics with stderr if it fails.
    #[track_caller]
    pub fn psql(&self, sql: &str) -> String {
        let out = self.psql_output(sql);
        assert!(
            out.status.success(),
            "psql -c {sql:?} failed ({}):\n{}\nserver log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// [`psql`](Self::psql)'s run, whatever its end: for a test that expects an error. Bounded:
    /// `PGCONNECT_TIMEOUT` is [`PATIENCE`], and the run is killed (a panic) a little after it.
    #[track_caller]
    pub fn psql_output(&self, sql: &str) -> std::process::Output {
        let mut cmd = Command::new(self.bin.join("psql"));
        clear_pg_env(&mut cmd);
        cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket_dir())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-c", sql])
            .env("PGCONNECT_TIMEOUT", PATIENCE.as_secs().to_string())
            .stdin(Stdio::null());
        let out = Proc::spawn(cmd).finish_within(PATIENCE + Duration::from_secs(5));
        std::process::Output {
            status: out.status,
            stdout: out.stdout.into_bytes(),
            stderr: out.stderr.into_bytes(),
        }
    }

    /// SIGSTOP the postmaster and then every process it started (backends, checkpointer,
    /// walwriter...), and wait until all are stopped: the server keeps its sockets, and TCP
    /// connections are even accepted by the kernel, but nothing answers.
    #[track_caller]
    pub fn freeze(&self) {
        let postmaster = self.postmaster_pid();
        // First, so that it starts nothing once its children are listed.
        signal(postmaster, Signal::SIGSTOP);
        wait_stopped(postmaster);
        let children = descendants(postmaster);
        for &pid in &children {
            signal(pid, Signal::SIGSTOP);
        }
        for pid in children {
            wait_stopped(pid);
        }
    }

    /// SIGCONT every process of the server after [`freeze`](Self::freeze): the postmaster last.
    pub fn thaw(&self) {
        let postmaster = self.postmaster_pid();
        for pid in descendants(postmaster) {
            signal(pid, Signal::SIGCONT);
        }
        signal(postmaster, Signal::SIGCONT);
    }

    /// SIGKILL the postmaster and every process it started, as a crash would, and reap it; the
    /// data directory stays for [`restart`](Self::restart). Nothing if it is not running.
    pub fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let postmaster = child.id() as i32;
        // Stopped first, so that it starts nothing once its children are listed; SIGKILL ends
        // a stopped process too.
        signal(postmaster, Signal::SIGSTOP);
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc_state(postmaster).is_some_and(|s| s != 'T' && s != 'Z')
            && Instant::now() < deadline
        {
            thread::sleep(Duration::from_millis(1));
        }
        let children = descendants(postmaster);
        for &pid in &children {
            signal(pid, Signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        // Reparented and reaped elsewhere: gone or a zombie, which holds no shared memory.
        for pid in children {
            wait_until(PATIENCE, &format!("postgres process {pid} to die"), || {
                !pid_alive(pid)
            });
        }
    }

    /// A hot standby of this server, streaming from it (`pg_basebackup -R`), on a port and in a
    /// temp dir of its own; asynchronous unless the primary names it in
    /// `synchronous_standby_names` (`*` does). Dropped like any server.
    #[track_caller]
    pub fn standby(&self) -> PgServer {
        let mut standby = PgServer {
            bin: self.bin.clone(),
            dir: TempDir::new(),
            user: None,
            port: 0,
            password: None,
            child: None,
        };
        standby.make_dirs();
        let mut backup = standby.as_user(self.bin.join("pg_basebackup"));
        backup
            .arg("-h")
            .arg(self.socket_dir())
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-D"])
            .arg(standby.data_dir())
            .args(["-R", "-X", "stream", "--no-sync", "--checkpoint=fast"]);
        let out = Proc::spawn(backup).finish();
        assert!(
            out.status.success(),
            "pg_basebackup failed ({}):\n{}{}",
            out.status,
            out.stdout,
            out.stderr
        );
        for _ in 0..20 {
            standby.port = free_port();
            match standby.spawn() {
                Ok(()) => return standby,
                Err(log) if log.contains("could not create any TCP/IP sockets") => continue,
                Err(log) => panic!("the standby did not start:\n{log}"),
            }
        }
        panic!("the standby found no free port:\n{}", standby.log());
    }

    /// Promote this standby to a primary, and wait until it is one.
    #[track_caller]
    pub fn promote(&self) {
        assert_eq!(
            self.psql("SELECT pg_promote(true, 20)"),
            "t",
            "{}",
            self.log()
        );
    }

    /// The pid of this standby's WAL receiver, once it streams.
    #[track_caller]
    pub fn walreceiver_pid(&self) -> i32 {
        let mut pid = 0;
        wait_until(PATIENCE, "the standby's WAL receiver to stream", || {
            pid = self
                .psql("SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'")
                .parse()
                .unwrap_or(0);
            pid > 0
        });
        pid
    }

    /// Start the server again on the same port and data directory, and wait until it accepts
    /// connections (after crash recovery, if it was [`kill`](Self::kill)ed). A running server
    /// is stopped first, thawed if frozen, with a fast shutdown (SIGINT).
    #[track_caller]
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.thaw();
            signal(self.postmaster_pid(), Signal::SIGINT);
            let deadline = Instant::now() + PATIENCE;
            while self.child.as_mut().unwrap().try_wait().unwrap().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "postgres did not shut down after {PATIENCE:?}:\n{}",
                    self.log()
                );
                thread::sleep(Duration::from_millis(10));
            }
            self.child = None;
        }
        if let Err(log) = self.spawn() {
            panic!("postgres did not restart on port {}:\n{log}", self.port);
        }
    }

    /// After a SIGKILL the small System V segment PostgreSQL keeps to tell whether a data
    /// directory is in use is left behind; the next start would reuse it, but none comes.
    fn remove_leftover_shm(&self) {
        let pid_file = read(&self.data_dir().join("postmaster.pid"));
        // Line 7: the segment's key and id.
        let Some(id) = pid_file
            .lines()
            .nth(6)
            .and_then(|l| l.split_whitespace().nth(1))
        else {
            return;
        };
        let _ = Command::new("ipcrm")
            .args(["-m", id])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            // Thawed, then an immediate shutdown (SIGQUIT): the backends with it, and its
            // shared memory removed; SIGKILL (in `kill`) if it does not end in time.
            self.thaw();
            signal(self.postmaster_pid(), Signal::SIGQUIT);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.as_mut().unwrap().try_wait() {
                    // It waits for its children before it exits.
                    self.child = None;
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
        }
        self.kill();
        self.remove_leftover_shm();
    }
}

/// Removes every `PG*` variable of the test's environment from `cmd`: libpq reads them.
fn clear_pg_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PG") {
            cmd.env_remove(name);
        }
    }
}

/// Sends `sig`, whether or not the process is still there.
fn signal(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// Waits until `pid` is stopped (or gone).
#[track_caller]
fn wait_stopped(pid: i32) {
    wait_until(PATIENCE, &format!("postgres process {pid} to stop"), || {
        matches!(proc_state(pid), Some('T' | 'Z') | None)
    });
}

/// Every live process descended from `pid`, found through the parent pids in /proc.
fn descendants(pid: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if let Some(parent) = parent_pid(child) {
            children.entry(parent).or_default().push(child);
        }
    }
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(parent) = todo.pop() {
        for &child in children.get(&parent).into_iter().flatten() {
            if pid_alive(child) {
                found.push(child);
                todo.push(child);
            }
        }
    }
    found
}

/// The parent pid of `pid` from /proc/<pid>/stat, or None if it is gone.
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses; the state and ppid follow the last ')'.
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The uid and gid of `user` from /etc/passwd.
fn passwd(user: &str) -> Option<(u32, u32)> {
    read(Path::new("/etc/passwd")).lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != user {
            return None;
        }
        let mut ids = fields.skip(1);
        Some((ids.next()?.parse().ok()?, ids.next()?.parse().ok()?))
    })
}
