//! What a hostile tester found on PostgreSQL, each kept fixed: a function replaced by hand that
//! answers NULL (a clear 69, never a panic or a hang), a role whose transactions default to
//! SERIALIZABLE (busy is 75, never 69), a table of redlock's name that redlock did not make
//! (init says so), a lease an operator set to `infinity` (busy, and listed), a counter set back
//! by hand (runs go on), counters that are not an object (the release still releases);
//! releases racing forced releases, which never deadlock; inits run at once; and the page's
//! monitoring role in a database that revokes EXECUTE from PUBLIC.

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
         p_waiting_ms bigint, p_host text, p_pid bigint, p_command text, p_started bigint, \
         p_runs_kept integer, p_record_ttl_ms bigint) RETURNS TABLE (result text, fence bigint, started_ms bigint, remaining_ms bigint, \
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

/// PgBouncer, as Debian ships it, in front of `pg` with `settings` (`pool_mode = ...`, one a
/// line): the process (stopped with SIGTERM when the test is done with it), its directory and
/// the URL that reaches `pg` through it.
pub(super) fn pgbouncer(pg: &PgServer, settings: &str) -> (Proc, TempDir, String) {
    let dir = TempDir::new();
    let port = free_port();
    let ini = dir.join("pgbouncer.ini");
    std::fs::write(
        &ini,
        format!(
            "[databases]\npostgres = host=127.0.0.1 port={pg_port} dbname=postgres\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n\
             auth_file = {users}\nunix_socket_dir =\n{settings}\n",
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
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    (bouncer, dir, url)
}

/// PgBouncer, as Debian ships it, in transaction mode in front of the server: it refuses the
/// session redlock asks for, and redlock says so in one line (69) without running anything.
#[test]
fn a_pooler_in_front_is_refused_in_one_line() {
    let pg = PgServer::start();
    with_tables(&pg);
    let (bouncer, _dir, url) = pgbouncer(&pg, "pool_mode = transaction");
    let marker = TempDir::new();
    Redlock::run_at(&url)
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

/// Releases racing `release --force` on one lock: the release's one statement locks the lock's
/// row before the holder's row, as every step does (force included), so the two never wait on
/// each other crosswise. Four runners take turns on the lock while a fifth process forces it
/// free again and again: every run ends 0 (released) or 76 (its lock forced away), none with
/// an error, and the server's log has no deadlock. Bounded by the runs' `--wait`.
#[test]
fn releases_racing_forced_releases_never_deadlock() {
    let pg = PgServer::start();
    with_tables(&pg);
    let url = pg.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forcer = {
        let (url, stop) = (url.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut forced = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let out = Redlock::admin_at("release", &url)
                    .key("raced")
                    .arg("--force")
                    .any_status()
                    .any_stdout()
                    .any_stderr()
                    .output();
                assert_eq!(out.code(), 0, "release --force: {}", out.stderr);
                forced += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            forced
        })
    };
    let runners: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                (0..8)
                    .map(|_| {
                        Redlock::run_at(&url)
                            .key("raced")
                            .wait("20s")
                            .sh("sleep 0.01")
                            .any_status()
                            .any_stderr()
                            .output()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outs: Vec<Output> = runners
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let forced = forcer.join().unwrap();
    assert!(forced > 10, "only {forced} forced releases ran");
    for out in &outs {
        assert!(
            matches!(out.code(), 0 | 76),
            "exit {}: {}",
            out.code(),
            out.stderr
        );
        assert!(!out.stderr.contains("deadlock"), "{}", out.stderr);
    }
    assert!(
        outs.iter().any(|o| o.code() == 0),
        "no run released its own lock"
    );
    assert!(!pg.log().contains("deadlock detected"), "{}", pg.log());
}

/// A lock's row stays for ever (its counter must never go back), so a database that has run
/// jobs under many names (a key per deploy, say) keeps every one. `list` reads only the locks
/// that have a holder, a hundred to a statement: 3,000 names that are free cost it nothing, and
/// 250 held by hand-made holders' rows and one by a run are read in a few statements (counted
/// in the server's statement log), and listed.
#[test]
fn list_reads_the_held_locks_not_every_name_ever_used() {
    let pg = PgServer::start();
    with_tables(&pg);
    pg.psql(
        "INSERT INTO redlock.locks (name, fence, holders) \
         SELECT 'redlock:deploy-' || g, 1, (g <= 250)::int FROM generate_series(1, 3000) g",
    );
    pg.psql(
        "INSERT INTO redlock.holders \
         (name, token, fence, kind, since, until, host, pid, command, started) \
         SELECT 'redlock:deploy-' || g, 't' || g, 1, 'lock', now(), now() + interval '1 hour', \
         'h', 1, 'c', 0 FROM generate_series(1, 250) g",
    );
    let url = pg.url();
    let dir = TempDir::new();
    let (holder, _) = Redlock::run_at(&url).key("nightly").hold(&dir, "a");
    pg.psql("ALTER SYSTEM SET log_statement = 'all'");
    pg.psql("SELECT pg_reload_conf()");
    // The reload reaches new sessions at once; give the postmaster its moment.
    wait_until(PATIENCE, "log_statement to be on", || {
        pg.psql("SHOW log_statement") == "all"
    });
    let before = pg.log().lines().count();
    let out = Redlock::admin_at("list", &url).any_stdout().output();
    let listed: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(listed.len(), 251, "{}", out.stdout);
    assert!(
        listed.iter().any(|l| l.starts_with("nightly\t")),
        "{}",
        out.stdout
    );
    let statements = pg
        .log()
        .lines()
        .skip(before)
        .filter(|l| l.contains("statement:") || l.contains("execute"))
        .count();
    assert!(statements < 20, "list ran {statements} statements");
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = holder.finish();
}

/// Hosts that all run `redlock init` as they are provisioned: eight at once on a new schema,
/// then eight at once again on the made one, all exit 0 (they take turns on an advisory lock;
/// without it the catalogs refused most of them: a duplicate schema, a function "concurrently
/// updated").
#[test]
fn inits_run_at_once_all_succeed() {
    let pg = PgServer::start();
    let url = format!("{}?schema=jobs", pg.url());
    for round in 0..2 {
        let inits: Vec<Proc> = (0..8)
            .map(|_| Redlock::admin_at("init", &url).spawn())
            .collect();
        for init in inits {
            let out = init.finish();
            assert_eq!(out.code(), 0, "round {round}: {}", out.stderr);
        }
    }
    Redlock::run_at(&url).key("k").sh("true").output();
}

/// The monitoring role of docs/postgres.md, made from the page's own lines, in a database that
/// revokes EXECUTE on new functions from PUBLIC before `redlock init` (a hostile helper found
/// that the page's old role, USAGE and SELECT only, then failed `status`, `history` and
/// `check` with "permission denied for function ms"): every read works, and a run is refused.
#[test]
fn the_monitoring_role_of_the_page_reads_in_a_hardened_database() {
    let pg = PgServer::start();
    pg.psql("ALTER DEFAULT PRIVILEGES FOR ROLE postgres REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC");
    with_tables(&pg);
    Redlock::run_at(&pg.url())
        .key("nightly")
        .sh("true")
        .output();
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/postgres.md"));
    let role: String = page
        .lines()
        .skip_while(|l| !l.contains("CREATE ROLE monitoring"))
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    assert!(role.contains("GRANT SELECT"), "the page's role: {role}");
    pg.psql(&role);
    let url = format!("postgres://monitoring@127.0.0.1:{}/postgres", pg.port());
    let as_role = |sub: &str| Redlock::admin_at(sub, &url).key("nightly");
    as_role("status").stdout_contains("is free").output();
    Redlock::admin_at("list", &url).any_stdout().output();
    as_role("history")
        .stdout_contains("success (exit 0)")
        .output();
    as_role("check")
        .args(["--max-age", "1h"])
        .stdout_contains("OK")
        .output();
    as_role("run")
        .arg("true")
        .status(69)
        .stderr_contains("permission denied")
        .output();
}
