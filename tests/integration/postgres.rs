//! redlock on PostgreSQL, on real servers: the tables made on purpose (`redlock init`, `--print`,
//! a run refused without them), the least-privilege role as docs/postgres.md writes it, where the
//! password comes from (never printed), the URL and the flags PostgreSQL cannot honour refused in
//! one line, fencing in the same database as the page shows it, and the server's faults: frozen
//! past the lease (76), restarted within it (nothing lost), unreachable at the start (69 in time).

use std::time::{Duration, Instant};

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// A file of this repository, read.
fn page(path: &str) -> String {
    read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
}

/// A server with redlock's tables, made by `redlock init`.
fn with_tables(pg: &PgServer) {
    Redlock::admin_at("init", &pg.url())
        .stdout_contains("redlock's tables and functions are in schema \"redlock\"")
        .output();
}

#[test]
fn a_run_without_the_tables_runs_nothing_and_init_makes_them_once() {
    let pg = PgServer::start();
    let dir = TempDir::new();
    let out = Redlock::run_at(&pg.url())
        .key("k")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("has no redlock tables in schema \"redlock\"")
        .stderr_contains("create them with `redlock init --url ...`")
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
    let port = format!(":{}", pg.port());
    assert_snapshot(
        "pg-no-tables.stderr",
        out.stderr.trim(),
        &[(&port, ":5432")],
    );
    // Twice: the second changes nothing, and says the same.
    with_tables(&pg);
    with_tables(&pg);
    assert_eq!(
        pg.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'redlock'"),
        "4"
    );
    Redlock::run_at(&pg.url())
        .key("k")
        .sh(&marker_script(&dir))
        .output();
    assert!(dir.join("marker").exists());
    // --print connects to nothing: a host that does not resolve is fine, and the schema named
    // in the URL is the one printed.
    let printed = Redlock::admin_at("init", "postgres://nowhere.invalid/ops?schema=jobs")
        .arg("--print")
        .any_stdout()
        .output();
    assert!(
        printed
            .stdout
            .contains("CREATE TABLE IF NOT EXISTS \"jobs\".locks")
    );
    assert!(!printed.stdout.contains("@schema@"));
    // The printed SQL, applied by hand, makes a schema runs can use.
    pg.psql(&printed.stdout);
    Redlock::run_at(&format!("{}?schema=jobs", pg.url()))
        .key("by-hand")
        .arg("true")
        .output();
    Redlock::admin_at("init", "redis://127.0.0.1:1")
        .status(64)
        .stderr_contains("`redlock init` has nothing to make there")
        .output();
}

/// The jobs' role of docs/postgres.md, made on `pg` from the page's own lines, named `name`
/// and with `password`.
pub(super) fn page_role(pg: &PgServer, name: &str, password: &str) {
    let page = page("docs/postgres.md");
    let role: String = page
        .lines()
        .skip_while(|l| !l.contains("CREATE ROLE cron_jobs"))
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    assert!(role.contains("GRANT EXECUTE"), "the page's role: {role}");
    pg.psql(
        &role
            .replace("cron_jobs", name)
            .replace("choose-one", password),
    );
}

/// The role of docs/postgres.md, made from the page's own lines, over TCP with passwords.
#[test]
fn the_least_privilege_role_of_the_page_runs_and_reads_but_cannot_init() {
    let pg = PgServer::start_with_passwords();
    let dir = TempDir::new();
    Redlock::admin_at("init", &pg.url())
        .env("REDLOCK_PASSWORD", pg.password().unwrap())
        .any_stdout()
        .output();
    page_role(&pg, "cron_jobs", "job-secret");
    let secret = dir.join("password");
    std::fs::write(&secret, "job-secret\n").unwrap();
    let url = format!("postgres://cron_jobs@127.0.0.1:{}/postgres", pg.port());
    let as_role = |sub: &str| Redlock::admin_at(sub, &url).env("REDLOCK_PASSWORD_FILE", &secret);
    let out = as_role("run")
        .key("nightly")
        .sh("echo \"$REDLOCK_FENCING_TOKEN\"")
        .any_stdout() // the token, parsed here
        .output();
    fencing_token(&out.stdout);
    let holder = as_role("run")
        .key("held")
        .sh(&hold_script(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    as_role("run")
        .key("held")
        .arg("true")
        .status(75)
        .any_stderr()
        .output();
    as_role("status")
        .key("held")
        .stdout_contains("is held")
        .output();
    as_role("list").stdout_contains("held").output();
    as_role("history")
        .key("nightly")
        .stdout_contains("success (exit 0)")
        .output();
    as_role("check")
        .key("nightly")
        .args(["--max-age", "1h"])
        .stdout_contains("OK")
        .output();
    as_role("release")
        .key("held")
        .arg("--force")
        .any_stdout()
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(76);
    as_role("init")
        .status(69)
        .stderr_contains("permission denied")
        .output();
    // A wrong password: refused, and never shown.
    std::fs::write(&secret, "not-the-secret\n").unwrap();
    let out = as_role("status")
        .key("held")
        .status(69)
        .any_stderr()
        .output();
    assert!(
        out.stderr.contains("password authentication failed"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("not-the-secret") && !out.stderr.contains("job-secret"));
}

#[test]
fn the_password_comes_from_pgpassword_or_a_private_pgpass_never_printed() {
    let pg = PgServer::start_with_passwords();
    let password = pg.password().unwrap().to_owned();
    let home = TempDir::new();
    let status = |env: &[(&str, &str)]| {
        env.iter()
            .fold(Redlock::admin_at("init", &pg.url()), |r, (name, value)| {
                r.env(name, value)
            })
            .env("HOME", home.path())
            .any_status()
            .any_stdout()
            .any_stderr()
            .output()
    };
    let out = status(&[("PGPASSWORD", &password)]);
    out.assert_code(0);
    // None: said in one line, where to put it.
    let out = status(&[]);
    out.assert_code(69);
    let port = format!(":{}", pg.port());
    assert_snapshot(
        "pg-password-needed.stderr",
        out.stderr.trim(),
        &[(&port, ":5432")],
    );
    // ~/.pgpass, private: used.
    let pgpass = home.join(".pgpass");
    std::fs::write(
        &pgpass,
        format!(
            "# redlock's\n127.0.0.1:{}:*:postgres:{password}\n",
            pg.port()
        ),
    )
    .unwrap();
    set_mode(&pgpass, 0o600);
    status(&[]).assert_code(0);
    // Readable by others: passed over with a warning, as libpq does.
    set_mode(&pgpass, 0o644);
    let out = status(&[]);
    out.assert_code(69);
    assert!(out.stderr.contains("chmod 0600"), "{}", out.stderr);
    assert!(out.stderr.contains("none was given"), "{}", out.stderr);
    assert!(!out.stderr.contains(&password) && !out.stdout.contains(&password));
    // PGPASSFILE names another file.
    let other = home.join("other");
    std::fs::write(&other, format!("*:*:*:*:{password}\n")).unwrap();
    set_mode(&other, 0o600);
    status(&[("PGPASSFILE", other.to_str().unwrap())]).assert_code(0);
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn what_postgresql_cannot_honour_is_refused_in_one_line() {
    let url = "postgres://alice:s3cret@127.0.0.1:1/db";
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (
            vec![url],
            vec!["--min-replicas", "1"],
            "--min-replicas is for Redis",
        ),
        (vec![url], vec!["--fsync"], "--fsync is for Redis"),
        (vec![url, url], vec![], "a lock lives in one database"),
        (
            vec![url, "redis://127.0.0.1:6379"],
            vec![],
            "PostgreSQL and other URLs together",
        ),
        (
            vec![url],
            vec!["--tls-insecure"],
            "--tls-insecure does not work with postgres://",
        ),
        (
            vec!["postgres://alice:s3cret@127.0.0.1:1/db?sslmode=sometimes"],
            vec![],
            "sslmode",
        ),
        (
            vec!["postgres://alice:s3cret@127.0.0.1:1/db?target_session_attrs=any"],
            vec![],
            "target_session_attrs",
        ),
        (
            vec!["postgres://alice:s3cret@127.0.0.1:1/db?schema=no-dashes"],
            vec![],
            "schema",
        ),
        (
            vec!["postgres://alice:s3cret@127.0.0.1:0/db"],
            vec![],
            "port",
        ),
    ];
    let dir = TempDir::new();
    for (urls, args, said) in cases {
        let out = Redlock::new()
            .arg("run")
            .args(urls.iter().flat_map(|u| ["--url", u]))
            .key("refused")
            .args(&args)
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains(said)
            .stderr_lines(1)
            .output();
        assert!(!out.stderr.contains("s3cret"), "{urls:?}: {}", out.stderr);
        assert!(!dir.join("marker").exists(), "{urls:?}: the command ran");
    }
}

/// docs/postgres.md's recipe: the job's write in the same transaction as a check of its holder's
/// row, locked with FOR KEY SHARE; a lock lost before it means no write.
#[test]
fn fencing_in_the_same_database_as_the_page_shows_it() {
    let pg = PgServer::start();
    with_tables(&pg);
    pg.psql(
        "CREATE TABLE sales (amount int); INSERT INTO sales VALUES (2), (3);
         CREATE TABLE report (day date, total bigint);",
    );
    let page = page("docs/postgres.md");
    let mut lines = page
        .lines()
        .skip_while(|l| !l.contains("redlock run --url \"$DB\" --key nightly"));
    // The page's line as a user pastes it: redlock, then the job's own psql line.
    let line = lines.next().expect("the page's recipe").trim();
    let sql: String = lines
        .take_while(|l| l.trim() != "SQL")
        .map(|l| format!("{}\n", l.trim_start()))
        .collect();
    assert!(sql.contains("FOR KEY SHARE"), "the page's recipe: {sql}");
    let (_, job) = line.split_once(" -- ").expect("redlock run ... -- the job");
    let job = job.trim_end_matches(" <<'SQL'");
    let dir = TempDir::new();
    std::fs::write(dir.join("job.sql"), &sql).unwrap();
    // psql from the server's package, first on PATH, as Debian's own would be.
    let path = format!(
        "{}:{}",
        postgres_bin().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |before: &str, code: i32| {
        Redlock::run_at(&pg.url())
            .key("nightly")
            .env("PATH", &path)
            .sh(&format!("{before}{job} < {}", dir.sh("job.sql")))
            .status(code)
            .any_stdout()
            .any_stderr()
            .output()
    };
    run("", 0);
    assert_eq!(pg.psql("SELECT total FROM report"), "5");
    // The lock broken before the job writes: its check finds no row, and nothing is written.
    let url = pg.url();
    let out = run(
        &format!(
            "{redlock} release --url {url} --key nightly --force >/dev/null; ",
            redlock = shell_quote(std::path::Path::new(BIN))
        ),
        76,
    );
    assert!(out.stderr.contains("\\gset"), "{}", out.stderr);
    assert_eq!(pg.psql("SELECT count(*) FROM report"), "1");
}

#[test]
fn a_frozen_server_past_the_lease_stops_the_command_in_time() {
    let pg = PgServer::start();
    with_tables(&pg);
    let dir = TempDir::new();
    let proc = Redlock::run_at(&pg.url())
        .key("frozen")
        .ttl("2s")
        .sh(&heartbeat_script(&dir, "f"))
        .spawn();
    wait_for_file(&dir.join("f.ready"));
    let frozen = now_ns();
    pg.freeze();
    let out = proc.finish_within(Duration::from_secs(15));
    out.assert_code(76);
    // Stopped before its lease could end: within the ttl of its last renewal.
    let beats = read_stamps(&dir.join("f.hb"));
    let last = Duration::from_nanos((beats.last().unwrap() - frozen).max(0) as u64);
    assert!(
        last < Duration::from_secs(2),
        "the command ran {last:?} after the freeze"
    );
    pg.thaw();
    Redlock::admin_at("status", &pg.url())
        .key("frozen")
        .stdout_contains("is free")
        .output();
}

#[test]
fn a_restart_within_the_lease_costs_the_run_nothing() {
    let mut pg = PgServer::start();
    with_tables(&pg);
    let dir = TempDir::new();
    let proc = Redlock::run_at(&pg.url())
        .key("restarted")
        .ttl("6s")
        .sh(&hold_script(&dir, "r"))
        .spawn();
    wait_for_file(&dir.join("r.ready"));
    pg.restart();
    // A renewal after the restart, on a new connection.
    std::thread::sleep(Duration::from_secs(3));
    touch(&dir.join("r.go"));
    proc.finish().assert_code(0);
    Redlock::admin_at("history", &pg.url())
        .key("restarted")
        .stdout_contains("success (exit 0)")
        .output();
}

#[test]
fn unreachable_at_the_start_is_69_within_the_attempts_time() {
    let pg = PgServer::start();
    with_tables(&pg);
    let dir = TempDir::new();
    let closed = format!("postgres://postgres@127.0.0.1:{}/postgres", free_port());
    pg.freeze();
    for url in [closed.as_str(), pg.url().as_str()] {
        let started = Instant::now();
        Redlock::run_at(url)
            .key("early")
            .ttl("3s")
            .sh(&marker_script(&dir))
            .status(69)
            .any_stderr()
            .output();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{url}: {:?}",
            started.elapsed()
        );
    }
    pg.thaw();
    assert!(!dir.join("marker").exists());
}

/// A holder's row that a fencing transaction has locked (`FOR KEY SHARE`) keeps the lock held
/// past its lease, until that transaction ends: a run meanwhile is busy (75, at once, never a
/// timeout), a waiter takes the lock once it commits.
#[test]
fn a_fenced_write_in_progress_keeps_the_lock_past_the_lease() {
    let pg = PgServer::start();
    with_tables(&pg);
    let dir = TempDir::new();
    // A holder killed with its watchdog: its row stays, its lease ends in 2 s.
    let holder = Redlock::run_at(&pg.url())
        .key("fenced")
        .ttl("2s")
        .sh(&hold_script(&dir, "h"))
        .spawn();
    wait_for_file(&dir.join("h.ready"));
    let token = read(&dir.join("h.token")).trim().to_owned();
    // Its job's write transaction, still open as the lease ends.
    let mut psql = std::process::Command::new(postgres_bin().unwrap().join("psql"));
    psql.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
        .arg(pg.url())
        .arg("-c")
        .arg(format!(
            "BEGIN; SELECT token FROM redlock.holders WHERE name = 'redlock:fenced' \
             AND token = '{token}' FOR KEY SHARE; SELECT pg_sleep(4); COMMIT;"
        ))
        .stdin(std::process::Stdio::null());
    let fencing = Proc::spawn(psql);
    // Asleep: the row is locked.
    wait_until(PATIENCE, "the fencing transaction to lock the row", || {
        pg.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") == "1"
    });
    holder.signal(nix::sys::signal::Signal::SIGKILL);
    std::thread::sleep(Duration::from_millis(2500));
    let started = Instant::now();
    Redlock::run_at(&pg.url())
        .key("fenced")
        .arg("true")
        .status(75)
        .any_stderr()
        .output();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    Redlock::run_at(&pg.url())
        .key("fenced")
        .wait("20s")
        .sh(&marker_script(&dir))
        .output();
    fencing.finish().assert_code(0);
    assert!(dir.join("marker").exists());
}

/// A unix socket, as libpq's URI names one: `host=` a directory, or the directory
/// percent-encoded as the host; the command sees the URL it can use again.
#[test]
fn a_unix_socket_is_named_as_libpq_names_it() {
    let pg = PgServer::start();
    with_tables(&pg);
    let dir = pg.socket_dir().display().to_string();
    let encoded = dir.replace('/', "%2F");
    for url in [
        format!(
            "postgres:///postgres?host={dir}&port={}&user=postgres",
            pg.port()
        ),
        format!("postgresql://postgres@{encoded}:{}/postgres", pg.port()),
    ] {
        let out = Redlock::run_at(&url)
            .key("socket")
            .sh("echo \"$REDLOCK_URL\"")
            .any_stdout()
            .output();
        // What the command saw reaches the same server.
        Redlock::admin_at("history", out.stdout.trim())
            .key("socket")
            .stdout_contains("success (exit 0)")
            .output();
    }
}
