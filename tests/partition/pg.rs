//! PostgreSQL servers on hosts of a [`Net`]: a primary, and streaming standbys made from it
//! over the net (`pg_basebackup -R` run on the standby's host), so a cut stops the stream.
//! Each listens on its host's address, port 5432, and on a unix socket in a directory of the
//! test's: the test reads and sets the servers through that socket as an operator's console
//! would, whatever the net says. PostgreSQL refuses to run as root: every server program runs as
//! the `postgres` user (`setpriv`, which execs, so the host's process is the postmaster).

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::net::Net;
use crate::common::{PATIENCE, Proc, TempDir, postgres_bin, wait_until};

/// One server on host `host`.
pub struct PgHost<'n> {
    net: &'n Net,
    pub host: String,
    bin: PathBuf,
    dir: TempDir,
    postmaster: Option<Child>,
}

impl<'n> PgHost<'n> {
    /// A fresh primary on `host`, trusting every connection from the net, replication too.
    #[track_caller]
    pub fn primary(net: &'n Net, host: &str) -> PgHost<'n> {
        let pg = PgHost::new(net, host);
        let data = pg.data().display().to_string();
        let initdb = ["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"];
        pg.as_postgres(false, "initdb", &initdb, &["-E", "UTF8", "--locale=C"]);
        let hba = "local all all trust\nlocal replication all trust\n\
                   host all all 10.199.0.0/16 trust\nhost replication all 10.199.0.0/16 trust\n";
        // Rewritten in place: the file keeps its owner.
        fs::write(pg.data().join("pg_hba.conf"), hba).unwrap();
        pg.spawn()
    }

    /// A hot standby on `host`, streaming from `primary` over the net.
    #[track_caller]
    pub fn standby(net: &'n Net, host: &str, primary: &PgHost) -> PgHost<'n> {
        let pg = PgHost::new(net, host);
        let data = pg.data().display().to_string();
        let from = &net.host(&primary.host).addr;
        let backup = ["-h", from, "-p", "5432", "-U", "postgres", "-D", &data];
        let how = ["-R", "-X", "stream", "--no-sync", "--checkpoint=fast"];
        pg.as_postgres(true, "pg_basebackup", &backup, &how);
        let pg = pg.spawn();
        wait_until(PATIENCE, "the standby to stream", || {
            pg.psql("SELECT status FROM pg_stat_wal_receiver") == "streaming"
        });
        pg
    }

    fn new(net: &'n Net, host: &str) -> PgHost<'n> {
        let bin = postgres_bin().expect("PostgreSQL under /usr/lib/postgresql/N/bin");
        let dir = TempDir::new();
        for sub in ["home", "sock"] {
            fs::create_dir(dir.join(sub)).unwrap();
        }
        let chown = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(chown.success(), "chown to postgres");
        PgHost {
            net,
            host: host.to_owned(),
            bin,
            dir,
            postmaster: None,
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("home/data")
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("sock")
    }

    fn log(&self) -> String {
        crate::common::read(&self.dir.join("postgres.log"))
    }

    /// `program` of PostgreSQL's as the `postgres` user, on the host when `on_host`, else in
    /// the test's own namespace (for what needs no network: initdb).
    fn command(&self, on_host: bool, program: &str) -> Command {
        let words = ["--reuid=postgres", "--regid=postgres", "--init-groups"];
        let mut cmd = if on_host {
            self.net.command(&self.host, "setpriv")
        } else {
            Command::new("setpriv")
        };
        cmd.args(words).arg(self.bin.join(program));
        cmd.current_dir(self.dir.join("home")).stdin(Stdio::null());
        cmd
    }

    /// Runs `program` with `args` and `more` as the `postgres` user; it must succeed in time.
    #[track_caller]
    fn as_postgres(&self, on_host: bool, program: &str, args: &[&str], more: &[&str]) {
        let mut cmd = self.command(on_host, program);
        cmd.args(args).args(more);
        let out = Proc::spawn(cmd).finish_within(PATIENCE);
        assert!(
            out.status.success(),
            "{program} on {} failed: {}{}",
            self.host,
            out.stdout,
            out.stderr
        );
    }

    /// Starts the postmaster on the host and waits until it accepts connections.
    #[track_caller]
    fn spawn(mut self) -> PgHost<'n> {
        let log = fs::File::create(self.dir.join("postgres.log")).unwrap();
        let mut cmd = self.command(true, "postgres");
        let listen = format!("listen_addresses={}", self.net.host(&self.host).addr);
        cmd.arg("-D").arg(self.data()).arg("-k").arg(self.sock());
        cmd.args(["-p", "5432", "-c", &listen, "-c", "fsync=off"])
            .args(["-c", "dynamic_shared_memory_type=mmap"])
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.postmaster = Some(cmd.spawn().expect("starting postgres"));
        wait_until(PATIENCE, "postgres to accept connections", || {
            let exited = self.postmaster.as_mut().unwrap().try_wait().unwrap();
            assert!(exited.is_none(), "postgres exited:\n{}", self.log());
            self.psql_output("SELECT 1").0
        });
        self
    }

    /// `sql` run by psql as the superuser over the unix socket; (success, stdout trimmed).
    /// Bounded: a statement that waits (a commit for a standby) is given up after 10 s.
    pub fn psql_output(&self, sql: &str) -> (bool, String) {
        let mut cmd = Command::new("timeout");
        cmd.arg("10").arg(self.bin.join("psql"));
        cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.sock())
            .args(["-p", "5432", "-U", "postgres", "-d", "postgres", "-c", sql])
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null());
        let out = Proc::spawn(cmd).finish_within(Duration::from_secs(15));
        (out.status.success(), out.stdout.trim().to_owned())
    }

    /// [`psql_output`](Self::psql_output)'s stdout; panics with the server's log if it failed.
    #[track_caller]
    pub fn psql(&self, sql: &str) -> String {
        let (ok, out) = self.psql_output(sql);
        assert!(
            ok,
            "psql -c {sql:?} failed on {}:\n{}",
            self.host,
            self.log()
        );
        out
    }

    /// `pg_ctl promote` on the standby's host, as an operator or a failover manager would;
    /// returns once it accepts writes.
    #[track_caller]
    pub fn promote(&self) {
        let data = self.data().display().to_string();
        self.as_postgres(true, "pg_ctl", &["promote", "-w", "-D", &data], &[]);
        assert_eq!(self.psql("SELECT pg_is_in_recovery()"), "f");
    }

    /// `pg_ctl stop -m immediate` on the host: what an operator does to an old primary before
    /// the network brings it back. (A fast shutdown waits for its walsender to reach the
    /// standby, which the cut keeps away: up to `wal_sender_timeout`, a minute.)
    #[track_caller]
    pub fn stop(&mut self) {
        let data = self.data().display().to_string();
        self.as_postgres(
            true,
            "pg_ctl",
            &["stop", "-w", "-m", "immediate", "-D", &data],
            &[],
        );
        if let Some(mut child) = self.postmaster.take() {
            let _ = child.wait();
        }
    }
}

impl Drop for PgHost<'_> {
    /// An immediate shutdown (SIGQUIT), which removes the server's shared memory; whatever
    /// is left when the test's net is dropped is SIGKILLed with it.
    fn drop(&mut self) {
        let Some(mut child) = self.postmaster.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
