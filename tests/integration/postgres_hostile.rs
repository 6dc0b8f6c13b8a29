//! What a hostile tester found on PostgreSQL, each kept fixed: a function replaced by hand that
//! answers NULL (a clear 69, never a panic or a hang), a role whose transactions default to
//! SERIALIZABLE (busy is 75, never 69), a table of redlock's name that redlock did not make
//! (init says so), a lease an operator set to `infinity` (busy, and listed), a counter set back
//! by hand (runs go on), counters that are not an object (the release still releases).

use std::time::{Duration, Instant};

use crate::common::*;

fn with_tables(pg: &PgServer) {
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
}

#[test]
fn a_take_replaced_by_one_that_answers_null_is_a_clear_69_in_time() {
    let pg = PgServer::start();
    with_tables(&pg);
    pg.psql(
        "CREATE OR REPLACE FUNCTION redlock.take(p_name text, p_token text, p_ttl_ms bigint, \
         p_kind text, p_limit integer, p_fair boolean, p_min_interval_ms bigint, \
         p_waiting_ms bigint, p_host text, p_pid bigint, p_command text, p_started bigint) \
         RETURNS TABLE (result text, fence bigint, started_ms bigint, remaining_ms bigint, \
         queued boolean, ago_ms bigint, found_kind text, channel text) LANGUAGE plpgsql AS \
         $$ BEGIN result := 'acquired'; RETURN NEXT; END $$",
    );
    let dir = TempDir::new();
    let started = Instant::now();
    // A semaphore's take is always the function's.
    Redlock::run_at(&pg.url())
        .key("tampered")
        .args(["--limit", "2"])
        .wait("2s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("PostgreSQL answered what this redlock cannot read (column fence)")
        .output();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!dir.join("marker").exists());
}

#[test]
fn a_serializable_default_turns_no_busy_lock_into_a_failure() {
    let pg = PgServer::start();
    with_tables(&pg);
    pg.psql("ALTER ROLE postgres SET default_transaction_isolation = serializable");
    let runs: Vec<Proc> = (0..8)
        .map(|_| {
            Redlock::run_at(&pg.url())
                .key("serial")
                .arg("sleep")
                .arg("0.2")
                .spawn()
        })
        .collect();
    for run in runs {
        let out = run.finish();
        assert!(
            matches!(out.code(), 0 | 75),
            "{:?}: {}",
            out.code(),
            out.stderr
        );
    }
}

#[test]
fn init_says_when_a_table_of_its_name_is_not_redlocks() {
    let pg = PgServer::start();
    pg.psql("CREATE SCHEMA redlock; CREATE TABLE redlock.holders (x int)");
    Redlock::admin_at("init", &pg.url())
        .status(69)
        .stderr_contains("holds a table holders that redlock did not make (it has no column name)")
        .output();
}

#[test]
fn hand_edited_rows_leave_the_lock_usable() {
    let pg = PgServer::start();
    with_tables(&pg);
    // A lease an operator set to never end: held, busy, listed, and breakable.
    pg.psql(
        "INSERT INTO redlock.locks (name) VALUES ('redlock:gh'); \
         INSERT INTO redlock.holders VALUES ('redlock:gh', 'ghost', 7, 'lock', now(), \
         'infinity', 'h', 1, 'cmd', 0)",
    );
    Redlock::run_at(&pg.url())
        .key("gh")
        .arg("true")
        .status(75)
        .output();
    Redlock::admin_at("list", &pg.url())
        .stdout_contains("gh")
        .output();
    Redlock::admin_at("release", &pg.url())
        .key("gh")
        .arg("--force")
        .stdout_contains("fencing counter now 8")
        .output();
    // The counter set back under recorded runs, counters that are not an object: runs go on,
    // and their releases release.
    for _ in 0..2 {
        Redlock::run_at(&pg.url())
            .key("edited")
            .arg("true")
            .output();
    }
    pg.psql("UPDATE redlock.locks SET fence = 0, counts = 'null' WHERE name = 'redlock:edited'");
    Redlock::run_at(&pg.url())
        .key("edited")
        .arg("true")
        .output();
    Redlock::run_at(&pg.url())
        .key("edited")
        .arg("true")
        .output();
    Redlock::admin_at("status", &pg.url())
        .key("edited")
        .stdout_contains("is free")
        .output();
}

/// PgBouncer, as Debian ships it, in transaction mode in front of the server: it refuses the
/// session redlock asks for, and redlock says so in one line (69) without running anything.
#[test]
fn a_pooler_in_front_is_refused_in_one_line() {
    let pg = PgServer::start();
    with_tables(&pg);
    let dir = TempDir::new();
    let port = free_port();
    let ini = dir.join("pgbouncer.ini");
    std::fs::write(
        &ini,
        format!(
            "[databases]\npostgres = host=127.0.0.1 port={pg_port} dbname=postgres\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n\
             auth_file = {users}\npool_mode = transaction\nunix_socket_dir =\n",
            pg_port = pg.port(),
            users = dir.join("users.txt").display(),
        ),
    )
    .unwrap();
    std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").unwrap();
    // It will not run as root: as the server's user, who must read its files.
    let mut cmd = std::process::Command::new("runuser");
    cmd.args(["-u", "postgres", "--", "pgbouncer"]).arg(&ini);
    for path in [dir.path(), &ini, &dir.join("users.txt")] {
        use std::os::unix::fs::PermissionsExt;
        let mode = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let bouncer = Proc::spawn(cmd);
    wait_until(PATIENCE, "pgbouncer to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let marker = TempDir::new();
    Redlock::run_at(&format!("postgres://postgres@127.0.0.1:{port}/postgres"))
        .key("pooled")
        .sh(&marker_script(&marker))
        .status(69)
        .stderr_contains("a pooler in front of PostgreSQL (PgBouncer) does that")
        .stderr_lines(1)
        .output();
    assert!(!marker.join("marker").exists());
    bouncer.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = bouncer.finish();
}
