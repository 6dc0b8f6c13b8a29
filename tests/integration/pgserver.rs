//! The PostgreSQL fixture itself ([`PgServer`]): it answers on its socket and its port, with
//! passwords over TCP when asked; frozen it answers nothing until thawed; killed and restarted
//! it keeps its rows; dropped, none of its processes is left, frozen or not.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// `psql URL -c sql` over TCP with a 2 s connect timeout, and `PGPASSWORD` if `password`.
fn psql_tcp(pg: &PgServer, password: Option<&str>, sql: &str) -> Output {
    let mut cmd = Command::new(postgres_bin().unwrap().join("psql"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PG") {
            cmd.env_remove(name);
        }
    }
    cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
        .arg(pg.url())
        .args(["-c", sql])
        .env("PGCONNECT_TIMEOUT", "2")
        .stdin(Stdio::null());
    if let Some(password) = password {
        cmd.env("PGPASSWORD", password);
    }
    Proc::spawn(cmd).finish_within(Duration::from_secs(10))
}

/// Every process of the server but the one answering: postmaster, checkpointer, walwriter...
fn server_pids(pg: &PgServer) -> Vec<i32> {
    let pids = pg.psql("SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()");
    let mut pids: Vec<i32> = pids.lines().map(|pid| pid.parse().unwrap()).collect();
    pids.push(pg.postmaster_pid());
    assert!(pids.len() > 3, "too few server processes: {pids:?}");
    pids
}

#[test]
fn it_answers_on_its_socket_and_port_with_passwords_when_asked() {
    let pg = PgServer::start();
    assert_eq!(pg.psql("SELECT 1"), "1");
    assert_eq!(
        pg.url(),
        format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port())
    );
    assert_eq!(psql_tcp(&pg, None, "SELECT 2").stdout, "2\n");
    assert!(
        pg.socket_dir()
            .join(format!(".s.PGSQL.{}", pg.port()))
            .exists()
    );
    let failed = pg.psql_output("SELECT nonsense");
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("nonsense"));
    assert!(
        pg.log().contains("ready to accept connections"),
        "{}",
        pg.log()
    );

    let pg = PgServer::start_with_passwords();
    let password = pg.password().unwrap();
    let refused = psql_tcp(&pg, None, "SELECT 1");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("password"), "{}", refused.stderr);
    let wrong = psql_tcp(&pg, Some("wrong"), "SELECT 1");
    assert!(
        wrong.stderr.contains("password authentication failed"),
        "{}",
        wrong.stderr
    );
    assert_eq!(psql_tcp(&pg, Some(password), "SELECT 3").stdout, "3\n");
    // The socket stays trusted.
    assert_eq!(pg.psql("SELECT 4"), "4");
}

#[test]
fn frozen_it_answers_nothing_until_thawed_and_dropped_it_leaves_nothing() {
    let pg = PgServer::start();
    let pids = server_pids(&pg);
    pg.freeze();
    for &pid in &pids {
        assert_eq!(proc_state(pid), Some('T'), "pid {pid} of {pids:?}");
    }
    let frozen = psql_tcp(&pg, None, "SELECT 1");
    assert!(!frozen.status.success(), "{frozen:?}");
    assert!(frozen.stderr.contains("timeout"), "{}", frozen.stderr);
    pg.thaw();
    assert_eq!(psql_tcp(&pg, None, "SELECT 1").stdout, "1\n");

    // Dropped while frozen.
    let pids = server_pids(&pg);
    pg.freeze();
    drop(pg);
    let alive: Vec<i32> = pids.into_iter().filter(|&pid| pid_alive(pid)).collect();
    assert!(alive.is_empty(), "left running: {alive:?}");
}

#[test]
fn killed_and_restarted_it_keeps_its_rows() {
    let mut pg = PgServer::start();
    // Flushed at commit (to the OS: fsync is off), so that a SIGKILL cannot lose it.
    pg.psql(
        "SET synchronous_commit = on; CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2), (3)",
    );
    let (port, pids) = (pg.port(), server_pids(&pg));
    pg.kill();
    let alive: Vec<i32> = pids.into_iter().filter(|&pid| pid_alive(pid)).collect();
    assert!(alive.is_empty(), "left running: {alive:?}");
    assert!(!psql_tcp(&pg, None, "SELECT 1").status.success());
    pg.restart();
    assert_eq!(pg.port(), port);
    assert_eq!(pg.psql("SELECT sum(n) FROM t"), "6");
    assert_eq!(psql_tcp(&pg, None, "SELECT count(*) FROM t").stdout, "3\n");
    // Restarted while running: a fast shutdown, then the same.
    let postmaster = pg.postmaster_pid();
    pg.restart();
    assert_ne!(pg.postmaster_pid(), postmaster);
    assert!(!pid_alive(postmaster));
    assert_eq!(pg.psql("SELECT sum(n) FROM t"), "6");
}
