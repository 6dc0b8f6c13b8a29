//! Fencing at a real resource, as docs/fencing.md shows it, against a PostgreSQL server the test
//! starts itself: the page's table, its job script and its way of finding and freezing redlock's
//! process tree, run as the page has them. The classic pause: a holder frozen with its whole tree
//! past its lease, a second holder writes, the job is thawed first; the database refuses the
//! stale write, and the same job without the token check overwrites the newer holder's row.
//!
//! PostgreSQL comes from Debian's `postgresql` package (scripts/test.sh installs it); where it
//! is absent the tests say so and pass, except under CI (`CI` set), where they fail.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::common::*;

/// The page the blocks come from.
const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fencing.md");

/// The indented code block of docs/fencing.md that has a line containing `marker`, dedented.
#[track_caller]
fn block(marker: &str) -> String {
    let page = read(Path::new(PAGE));
    let lines: Vec<&str> = page.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let at = lines
        .iter()
        .position(|l| indent(l) >= 4 && l.contains(marker))
        .unwrap_or_else(|| panic!("no code block with {marker:?} in docs/fencing.md"));
    let code = |l: &&str| l.trim().is_empty() || indent(l) >= 4;
    let start = (0..at)
        .rev()
        .find(|&i| !code(&lines[i]))
        .map_or(0, |i| i + 1);
    let end = (at..lines.len())
        .find(|&i| !code(&lines[i]))
        .unwrap_or(lines.len());
    let body: Vec<&str> = lines[start..end].to_vec();
    let margin = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .min()
        .unwrap();
    let mut text: String = body
        .iter()
        .map(|l| format!("{}\n", l.get(margin..).unwrap_or("")))
        .collect();
    text = text.trim_matches('\n').to_owned();
    text.push('\n');
    text
}

/// The line of `text` that contains `marker`.
#[track_caller]
fn line_with<'a>(text: &'a str, marker: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?} in\n{text}"))
}

/// The page's `signal_tree` function, from its definition to its closing brace.
fn signal_tree_function() -> String {
    let tree = block("signal_tree() {");
    let lines: Vec<&str> = tree
        .lines()
        .skip_while(|l| !l.starts_with("signal_tree() {"))
        .collect();
    let end = lines.iter().position(|l| *l == "}").unwrap();
    lines[..=end].join("\n") + "\n"
}

/// A PostgreSQL server of the test's own (a unix socket in its own directory is what the jobs
/// use); None, said on stderr, where PostgreSQL is not installed; a failure under CI.
fn server() -> Option<PgServer> {
    if postgres_bin().is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
        assert!(
            !ci,
            "no PostgreSQL server under /usr/lib/postgresql: CI must have it (scripts/test.sh installs postgresql)"
        );
        eprintln!("pgfence: skipped, no PostgreSQL server (apt-get install postgresql)");
        return None;
    }
    Some(PgServer::start())
}

/// libpq's variables naming the server's socket, as a job is given them, with `schema` first
/// on the search path: each case has its own copy of the page's table, in one database (a
/// schema is made at once, a database takes a copy of a template).
fn env(pg: &PgServer, schema: &str) -> Vec<(&'static str, String)> {
    vec![
        ("PGHOST", pg.socket_dir().display().to_string()),
        ("PGPORT", pg.port().to_string()),
        ("PGUSER", "postgres".to_owned()),
        ("PGDATABASE", "postgres".to_owned()),
        ("PGOPTIONS", format!("-c search_path={schema}")),
    ]
}

/// `psql` in `schema`, quiet, unaligned, stopping at the first error: the one on PATH, as the
/// page's job runs it.
fn psql(pg: &PgServer, schema: &str) -> Command {
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
        .envs(env(pg, schema))
        .stdin(Stdio::null());
    cmd
}

/// Runs `sql` (no psql variables) in `schema`, which must succeed; its output.
#[track_caller]
fn sql(pg: &PgServer, schema: &str, sql: &str) -> String {
    let mut cmd = psql(pg, schema);
    cmd.args(["-c", sql]);
    let out = Proc::spawn(cmd).finish();
    out.assert_code(0);
    out.stdout
}

/// A schema `name` with the page's table and row in it.
fn schema_with_the_pages_table(pg: &PgServer, name: &str) {
    let table = block("CREATE TABLE report_state");
    sql(pg, name, &format!("CREATE SCHEMA {name}; {table}"));
}

/// The token and value of the page's row in `schema`.
fn row(pg: &PgServer, schema: &str) -> (i64, String) {
    let out = sql(
        pg,
        schema,
        "SELECT token, value FROM report_state WHERE name = 'nightly'",
    );
    let (token, value) = out.trim().split_once('|').unwrap();
    (token.parse().unwrap(), value.to_owned())
}

/// A holder's frozen tree, SIGKILLed whole on drop, so that nothing stopped outlives a failure.
struct Tree {
    redlock: i32,
    watchdog: i32,
    job: i32,
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.job), Signal::SIGKILL);
        for pid in [self.watchdog, self.redlock] {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// `sh -c script` with `redlock` (the binary under test) first on PATH and `REDLOCK_URL` set to
/// `redis`, as on the holder's host; its stdout. Must exit 0.
#[track_caller]
fn operator(redis: &RedisServer, script: &str) -> String {
    let bin = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut cmd = Command::new("sh");
    cmd.args(["-euc", script])
        .env("PATH", path)
        .env("REDLOCK_URL", redis.url())
        .stdin(Stdio::null());
    let out = Proc::spawn(cmd).finish();
    assert_eq!(
        out.code(),
        0,
        "the page's lines failed:\n{script}\nstderr:\n{}",
        out.stderr
    );
    out.stdout
}

/// `redlock` with these variables set, for its job.
fn with_env(redlock: Redlock, env: Vec<(&str, String)>) -> Redlock {
    env.into_iter()
        .fold(redlock, |redlock, (name, value)| redlock.env(name, value))
}

#[track_caller]
fn wait_stopped(pid: i32, what: &str) {
    wait_until(
        PATIENCE,
        &format!("{what} (pid {pid}) to be stopped"),
        || job_stopped(pid),
    );
}

/// What one pause left behind.
struct Pause {
    /// A's and B's fencing tokens.
    a: i64,
    b: i64,
    /// How A's job ended (its script's status) and what it said.
    a_status: String,
    a_stderr: String,
    /// From the job's thaw to its end (its `psql`), and to the moment its wait ended.
    a_write: Duration,
    a_woke: Duration,
    /// The page's row in the end.
    row: (i64, String),
}

/// The classic pause, with `script` as the job (docs/fencing.md's `fenced-write.sh`, or a
/// version of it without the check) in schema `schema`: holder A (`--ttl 2s`) waits; its whole
/// tree is frozen, found the page's way; holder B waits for the lock and writes `B`; A's job
/// is told to go on and thawed alone, and writes `A`; then redlock and its watchdog are thawed.
fn pause(pg: &PgServer, schema: &str, script: &str) -> Pause {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let job = dir.join("fenced-write.sh");
    write_file(&job, script, 0o755);
    // Through sh, as its `#!/bin/sh` would: a file just written is not exec'd while another
    // test thread's fork may still hold it open for writing (ETXTBSY).
    let job = format!("sh {}", shell_quote(&job));
    let a = with_env(Redlock::run(&redis), env(pg, schema))
        .key("nightly")
        .ttl("2s")
        .sh(&format!(
            "echo \"$REDLOCK_FENCING_TOKEN\" > {fence}; touch {ready}; \
             while [ ! -e {go} ]; do sleep 0.01; done; date +%s%N > {woke}; \
             {job} A 2> {err}; echo $? > {status}",
            fence = dir.sh("a.fence"),
            ready = dir.sh("a.ready"),
            go = dir.sh("a.go"),
            woke = dir.sh("a.woke"),
            err = dir.sh("a.err"),
            status = dir.sh("a.status"),
        ))
        .spawn();
    wait_for_file(&dir.join("a.ready"));
    let a_token = fencing_token(&wait_for_line(&dir.join("a.fence")));

    // Found and frozen as the page says: redlock's pid from `status --json`, its children
    // from ps, the whole tree stopped parents first.
    let find = block("jq -r .holder.pid");
    let tree = signal_tree_function();
    let freeze = block("signal_tree() {");
    let listed = operator(
        &redis,
        &format!(
            "{find}{tree}{stop}\n{job_line}\necho \"$pid $job\"\n",
            stop = line_with(&freeze, "signal_tree STOP"),
            job_line = line_with(&freeze, "job=$("),
        ),
    );
    let (ps, pids) = listed.trim_end().rsplit_once('\n').unwrap();
    let (pid, job_pid) = pids.split_once(' ').unwrap();
    let (pid, job_pid): (i32, i32) = (pid.parse().unwrap(), job_pid.parse().unwrap());
    assert_eq!(pid, a.pid(), "status --json's holder pid is not redlock's");
    let frozen = Tree {
        redlock: pid,
        watchdog: watchdog_of(pid),
        job: job_pid,
    };
    assert!(
        ps.contains("redlock-watch") && ps.contains(" sh"),
        "ps --ppid lists neither the watchdog nor the job:\n{ps}"
    );
    wait_stopped(frozen.redlock, "redlock");
    wait_stopped(frozen.watchdog, "the watchdog");
    wait_stopped(frozen.job, "the job");

    // Past A's lease: B gets the lock once A's key expired, and writes.
    let b = with_env(Redlock::run(&redis), env(pg, schema))
        .key("nightly")
        .ttl("2s")
        .wait("10s")
        .sh(&format!(
            "echo \"$REDLOCK_FENCING_TOKEN\" > {fence}; exec {job} B",
            fence = dir.sh("b.fence")
        ))
        .output();
    let b_token = fencing_token(&wait_for_line(&dir.join("b.fence")));
    for (pid, what) in [(frozen.redlock, "redlock"), (frozen.watchdog, "watchdog")] {
        assert_eq!(
            proc_state(pid),
            Some('T'),
            "A's {what} woke before B was done: {b:?}"
        );
    }
    assert!(job_stopped(frozen.job), "A's job woke");

    // The job first, as the page's drill does: its write comes before its watchdog can act.
    touch(&dir.join("a.go"));
    let thawed = Instant::now();
    let thawed_ns = now_ns();
    operator(
        &redis,
        &format!(
            "{tree}job={job_pid}\n{}\n",
            line_with(&freeze, "signal_tree CONT \"$job\"")
        ),
    );
    let a_status = wait_for_line(&dir.join("a.status"));
    let a_write = thawed.elapsed();
    let woke_ns = read_stamps(&dir.join("a.woke"))[0];
    let a_woke = Duration::from_nanos((woke_ns - thawed_ns).max(0) as u64);
    assert_eq!(
        (proc_state(frozen.redlock), proc_state(frozen.watchdog)),
        (Some('T'), Some('T')),
        "A's redlock or watchdog woke before its job wrote"
    );
    operator(
        &redis,
        &format!(
            "{tree}pid={pid}\n{}\n",
            line_with(&freeze, "signal_tree CONT \"$pid\"")
        ),
    );
    // Thawed past its lease with B's key in place: the lock was lost.
    let a = a.finish();
    a.assert_code(76);
    drop(frozen);
    Pause {
        a: a_token,
        b: b_token,
        a_status,
        a_stderr: read(&dir.join("a.err")),
        a_write,
        a_woke,
        row: row(pg, schema),
    }
}

#[test]
fn a_holder_frozen_past_its_lease_is_refused_by_the_database() {
    let Some(server) = server() else {
        return;
    };
    let pg = &server;
    schema_with_the_pages_table(pg, "fenced");
    schema_with_the_pages_table(pg, "unfenced");
    let script = block("# fenced-write.sh");
    let check = " AND token <= :'token'";
    let unchecked = script.replace(check, "");
    assert_ne!(script, unchecked, "the page's script has no {check:?}");
    // Both at once, each with its own Redis: the same pause, with and without the check.
    let (fenced, plain) = thread::scope(|s| {
        let fenced = s.spawn(|| pause(pg, "fenced", &script));
        let plain = s.spawn(|| pause(pg, "unfenced", &unchecked));
        (fenced.join().unwrap(), plain.join().unwrap())
    });
    eprintln!(
        "pgfence: A's job woke {:?} and ended {:?} after the thaw began (unfenced: {:?}, {:?})",
        fenced.a_woke, fenced.a_write, plain.a_woke, plain.a_write
    );
    for pause in [&fenced, &plain] {
        assert!(pause.a < pause.b, "B's token is not above A's");
    }
    // Refused: B's write stands, and A's job was told.
    assert_eq!(
        fenced.row,
        (fenced.b, "B".to_owned()),
        "the stale write landed"
    );
    assert_eq!(fenced.a_status, "1", "A's job: {}", fenced.a_stderr);
    assert!(
        fenced.a_stderr.contains("refused"),
        "A's job: {}",
        fenced.a_stderr
    );
    // Without the check, the same pause overwrites B's row with A's older token: the pause
    // really let a stale holder write.
    assert_eq!(plain.a_status, "0", "A's unfenced job: {}", plain.a_stderr);
    assert_eq!(
        plain.row,
        (plain.a, "A".to_owned()),
        "the stale write was lost"
    );
}

/// `psql -f` of `sql` in `schema` with these `-v` variables: (status, stdout, stderr).
fn psql_file(pg: &PgServer, schema: &str, sql: &str, vars: &[(&str, &str)]) -> Output {
    let dir = TempDir::new();
    let file = dir.join("job.sql");
    write_file(&file, sql, 0o644);
    let mut cmd = psql(pg, schema);
    for (name, value) in vars {
        cmd.arg("-v").arg(format!("{name}={value}"));
    }
    cmd.arg("-f").arg(&file);
    Proc::spawn(cmd).finish()
}

/// The page's `fenced-write.sh VALUE` with `token` as the run's fencing token: its status.
fn fenced_write(pg: &PgServer, schema: &str, token: i64, value: &str) -> i32 {
    let dir = TempDir::new();
    let script = dir.join("fenced-write.sh");
    write_file(&script, &block("# fenced-write.sh"), 0o755);
    let mut cmd = Command::new("sh"); // not exec'd: see `pause`
    cmd.arg(&script)
        .arg(value)
        .envs(env(pg, schema))
        .env("REDLOCK_FENCING_TOKEN", token.to_string())
        .stdin(Stdio::null());
    Proc::spawn(cmd).finish().code()
}

/// The fencing token of one run of `redlock run --key KEY ARGS`.
fn token_of(redis: &RedisServer, key: &str, args: &[&str]) -> i64 {
    let out = Redlock::run(redis)
        .key(key)
        .args(args)
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout() // the token, parsed here
        .output();
    fencing_token(&out.stdout)
}

/// The rest of the page, with real tokens: `<=` lets a run write twice; the transaction form
/// commits or refuses whole; one row cannot fence two `--limit` holders at once but a row per
/// item can; readers raising the floor refuse a writer whose lease ended before they came in.
#[test]
fn the_pages_other_writes_fence_as_it_says() {
    let Some(server) = server() else {
        return;
    };
    let pg = &server;
    schema_with_the_pages_table(pg, "page");
    let redis = RedisServer::start();

    // A run writes twice with its one token; an older run is refused.
    let older = token_of(&redis, "nightly", &[]);
    let run = token_of(&redis, "nightly", &[]);
    assert_eq!(fenced_write(pg, "page", run, "first"), 0);
    assert_eq!(fenced_write(pg, "page", run, "second"), 0, "`<=` refused");
    assert_eq!(fenced_write(pg, "page", older, "stale"), 1);
    assert_eq!(row(pg, "page"), (run, "second".to_owned()));

    // The transaction: the older run's exits 3, naming the refusal, and commits nothing.
    let txn = block("BEGIN;");
    let older_token = older.to_string();
    let stale = psql_file(
        pg,
        "page",
        &txn,
        &[("token", &older_token), ("value", "stale")],
    );
    assert_eq!(stale.code(), 3, "{}", stale.stderr);
    assert!(stale.stderr.contains("refused"), "{}", stale.stderr);
    assert_eq!(row(pg, "page"), (run, "second".to_owned()));
    let newer = token_of(&redis, "nightly", &[]);
    let newer_token = newer.to_string();
    let fresh = psql_file(
        pg,
        "page",
        &txn,
        &[("token", &newer_token), ("value", "whole")],
    );
    assert_eq!(fresh.code(), 0, "{}", fresh.stderr);
    assert_eq!(row(pg, "page"), (newer, "whole".to_owned()));

    // Two holders of a semaphore at once: the second's write to a shared row refuses the
    // first, still valid; rows per item take both.
    let dir = TempDir::new();
    let limit = |tag| {
        Redlock::run(&redis)
            .key("pg-dumps")
            .args(["--limit", "2"])
            .hold(&dir, tag)
            .0
    };
    let (first, second) = (limit("h1"), limit("h2"));
    let t1 = fencing_token(&read(&dir.join("h1.fence")));
    let t2 = fencing_token(&read(&dir.join("h2.fence")));
    assert!(t1 < t2);
    sql(
        pg,
        "dumps",
        "CREATE SCHEMA dumps; CREATE TABLE dumps (db text PRIMARY KEY, dumped_at timestamptz, \
         token bigint NOT NULL DEFAULT 0); INSERT INTO dumps (db) VALUES ('main'), ('logs')",
    );
    schema_with_the_pages_table(pg, "shared_row");
    assert_eq!(fenced_write(pg, "shared_row", t2, "h2"), 0);
    assert_eq!(
        fenced_write(pg, "shared_row", t1, "h1"),
        1,
        "one row fenced a valid older holder"
    );
    let per_item = block("WHERE db = :'db'");
    for (token, db) in [(t2, "logs"), (t1, "main")] {
        let out = psql_file(
            pg,
            "dumps",
            &per_item,
            &[("token", &token.to_string()), ("db", db)],
        );
        assert_eq!(
            (out.code(), out.stdout.as_str()),
            (0, "1\n"),
            "{db}: {}",
            out.stderr
        );
    }
    for (tag, holder) in [("h1", first), ("h2", second)] {
        touch(&dir.join(&format!("{tag}.go")));
        holder.finish().assert_code(0);
    }

    // A shared lock: a writer's run, then a reader's, then the next writer's. The first
    // writer, paused past its lease, writes again after the reader raised the floor: refused.
    schema_with_the_pages_table(pg, "readers");
    let writer = token_of(&redis, "dataset", &[]);
    let reader = token_of(&redis, "dataset", &["--shared"]);
    let next_writer = token_of(&redis, "dataset", &[]);
    assert_eq!(fenced_write(pg, "readers", writer, "w1"), 0);
    let floor = block("greatest(token, :'token')");
    for token in [reader, writer] {
        // An older token's raise (a stale reader's) changes nothing.
        let out = psql_file(pg, "readers", &floor, &[("token", &token.to_string())]);
        assert_eq!(out.code(), 0, "{}", out.stderr);
    }
    assert_eq!(row(pg, "readers"), (reader, "w1".to_owned()));
    assert_eq!(fenced_write(pg, "readers", writer, "stale"), 1);
    assert_eq!(fenced_write(pg, "readers", next_writer, "w2"), 0);
    assert_eq!(row(pg, "readers"), (next_writer, "w2".to_owned()));
}
