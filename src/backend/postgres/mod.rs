//! redlock on PostgreSQL: the lock as rows of tables that `redlock init` makes (`schema.sql`),
//! named by libpq's URI, `postgres://USER@HOST:PORT/DB` or `postgresql://`. Leases end by the
//! server's clock (`clock_timestamp()`), never a client's; the fencing token is a `bigint`
//! the database keeps, raised by one per acquisition in the transaction that takes the lock.
//!
//! Each step (take, renew, release, leave, a forced release) is one statement, most of them a
//! call of a function `schema.sql` defines: one round trip and one transaction that locks the
//! lock's row first, so no transaction stays open while a client may freeze or its command
//! runs. A waiter `LISTEN`s on its own channel; a release `NOTIFY`s the first waiter in its own
//! transaction, passing over those whose session has ended.
//!
//! The URL (`url`), the password files libpq users keep (`pgpass`), TLS by `sslmode` (`tls`)
//! and the server's certificate checked as libpq checks it (`verify`),
//! the connection (`conn`), the protocol (`locker`), the admin commands' reads (`node`).
//!
//! May use `lock` (the boundary it implements), `report`, `exit` and `file`; nothing above.

mod conn;
mod locker;
mod node;
mod pgpass;
pub(crate) mod plain;
mod tls;
mod url;
mod verify;

use std::time::{Duration, Instant};

use crate::backend::Connect;
use crate::lock::record::{RECORD_TTL, RUNS_KEPT};
use crate::lock::{Backend, Capabilities, Failure, Locker, Node, RunSpec};
use conn::{Conn, Server};

/// redlock's tables and functions, with `@schema@` for the schema's quoted name, and
/// `@runs_kept@` and `@record_ttl_ms@` for the record's limits in the functions redlock 0.3.0
/// calls (this build passes them as arguments).
const SCHEMA_SQL: &str = include_str!("schema.sql");

/// [`SCHEMA_SQL`] for schema `schema` (quoted), the record's limits from their one constant.
fn schema_sql(schema: &str) -> String {
    SCHEMA_SQL
        .replace("@schema@", schema)
        .replace("@runs_kept@", &RUNS_KEPT.to_string())
        .replace("@record_ttl_ms@", &record_ttl_ms().to_string())
}

/// How many runs a lock's record keeps, as the SQL takes it.
fn runs_kept() -> i32 {
    i32::try_from(RUNS_KEPT).unwrap_or(i32::MAX)
}

/// How long a lock's record, and the lock's rows, outlive its last use, in milliseconds.
fn record_ttl_ms() -> i64 {
    i64::try_from(RECORD_TTL.as_millis()).unwrap_or(i64::MAX)
}

/// The advisory lock `redlock init` holds for its transaction: "redlock" in ASCII.
const INIT_LOCK: i64 = 0x0072_6564_6c6f_636b;

/// The tables `sql` makes, each with its columns (the first word of each line of its
/// `CREATE TABLE IF NOT EXISTS @schema@.NAME (` block but its key's).
fn tables_of(sql: &str) -> Vec<(String, Vec<String>)> {
    let mut tables = Vec::new();
    let mut lines = sql.lines();
    while let Some(line) = lines.next() {
        let Some(table) = line
            .strip_prefix("CREATE TABLE IF NOT EXISTS @schema@.")
            .and_then(|rest| rest.strip_suffix(" ("))
        else {
            continue;
        };
        let columns = lines
            .by_ref()
            .take_while(|l| !l.starts_with(')'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|word| !matches!(*word, "PRIMARY" | "--"))
            .map(str::to_owned)
            .collect();
        tables.push((table.to_owned(), columns));
    }
    tables
}

/// The schema redlock's tables live in when the URL names none (`?schema=NAME`).
const DEFAULT_SCHEMA: &str = "redlock";

/// One PostgreSQL database, how to log in, and where redlock's tables are.
pub(crate) struct Postgres {
    server: Server,
    prefix: String,
}

/// The database `connect` names. Refused in one line: several URLs (several hosts go in one,
/// libpq's way), `--tls-insecure`. What only Redis does (`--min-replicas`, `--fsync`) its
/// capabilities refuse.
pub(crate) fn open(connect: Connect) -> Result<Postgres, String> {
    let Connect {
        urls,
        tls,
        password,
        prefix,
        options: _,
    } = connect;
    let url = match urls.as_slice() {
        [one] => *one,
        _ => {
            return Err(
                "several PostgreSQL URLs: a lock lives in one database (several hosts of one, \
                 libpq's way, go in one URL: postgres://h1:5432,h2:5432/db)"
                    .into(),
            );
        }
    };
    let parsed = url::parse(url)?;
    let schema = parsed.schema.clone().unwrap_or(DEFAULT_SCHEMA.to_owned());
    let mut config = tokio_postgres::Config::new();
    for host in &parsed.hosts {
        match host {
            url::Host::Tcp { host, port } => {
                config.host(host).port(*port);
            }
            url::Host::Unix { dir, port } => {
                config.host_path(dir).port(*port);
            }
        }
    }
    let user = parsed
        .user
        .clone()
        .or_else(|| env("PGUSER"))
        .or_else(os_user)
        .ok_or("the PostgreSQL URL names no user, and this process's user has no name")?;
    let dbname = parsed.dbname.clone().unwrap_or_else(|| user.clone());
    config.user(&user).dbname(&dbname);
    config.application_name(parsed.application_name.as_deref().unwrap_or("redlock"));
    // Each step is written for READ COMMITTED (each statement sees what the step before it,
    // behind the lock's row, committed): a role or database whose default is stricter would
    // turn a busy lock into serialization failures.
    config.options("-c default_transaction_isolation=read\\ committed");
    if let Some(timeout) = parsed.connect_timeout {
        config.connect_timeout(timeout);
    }
    let password = password
        .or_else(|| parsed.password.clone())
        .or_else(|| env("PGPASSWORD"))
        .or_else(|| from_pgpass(&parsed, &dbname, &user));
    if let Some(password) = password {
        config.password(password);
    }
    let tls = tls::settle(&parsed, &tls, &mut config)?;
    Ok(Postgres {
        server: Server {
            config,
            tls,
            shown: parsed.shown(),
            schema: format!("\"{schema}\""),
        },
        prefix,
    })
}

/// A variable of libpq's, when set and not empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The name of the user this process runs as: libpq's default user.
fn os_user() -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
}

/// The password `~/.pgpass` (or `PGPASSFILE`) holds for the first host, as libpq reads it; a
/// file others may read is passed over with a warning, as libpq does.
fn from_pgpass(parsed: &url::Parsed, dbname: &str, user: &str) -> Option<String> {
    let path = match pgpass::file(env) {
        Ok(path) => path?,
        Err(warning) => {
            let file = env("PGPASSFILE")
                .or_else(|| env("HOME").map(|home| format!("{home}/.pgpass")))
                .unwrap_or_default();
            crate::report!(0, PgpassIgnored { "file" => file }, "warning: {warning}");
            return None;
        }
    };
    let contents = crate::file::read_or_pipe(&path, 1 << 20).ok()?;
    let contents = String::from_utf8_lossy(&contents);
    // A unix socket's directory is its host (`lookup` matches the default one as `localhost`).
    let (host, port) = match parsed.hosts.first()? {
        url::Host::Tcp { host, port } => (host.clone(), *port),
        url::Host::Unix { dir, port } => (dir.to_string_lossy().into_owned(), *port),
    };
    let host = host.as_str();
    pgpass::lookup(&contents, host, port, dbname, user)
}

impl Postgres {
    /// A lock's row name: the prefix and the lock's name.
    fn row(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

impl Backend for Postgres {
    fn nodes(&self) -> Vec<String> {
        vec![self.server.shown.clone()]
    }

    /// One database: a fair queue, any kind of holder, tables made by `redlock init`; each
    /// commit is on disk, and on a synchronous standby where the server is so set, before it
    /// is answered.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            quorum: false,
            fair: Ok(()),
            several_holders: Ok(()),
            options: vec![
                (
                    "min-replicas",
                    Err(
                        "--min-replicas is for Redis's asynchronous replicas: on PostgreSQL, a \
                         synchronous standby (synchronous_commit = remote_apply) makes each \
                         commit wait for it"
                            .into(),
                    ),
                ),
                (
                    "fsync",
                    Err(
                        "--fsync is for Redis's append-only file: PostgreSQL writes each \
                         commit to its log with fsync before it answers (synchronous_commit = \
                         on, its default)"
                            .into(),
                    ),
                ),
            ],
            init: true,
        }
    }

    fn described(&self) -> String {
        format!(
            "{} (schema {}) under prefix '{}'",
            self.server.shown,
            self.server.schema,
            crate::report::one_line(&self.prefix)
        )
    }

    fn locker(&self, run: &RunSpec) -> Box<dyn Locker> {
        Box::new(locker::PgLocker::new(
            Conn::new(self.server.clone()),
            self.row(&run.key),
            run,
        ))
    }

    fn node(&self, _index: usize) -> Box<dyn Node> {
        Box::new(node::PgNode {
            conn: Conn::new(self.server.clone()),
            prefix: self.prefix.clone(),
        })
    }

    fn tables(&self) -> Option<String> {
        Some(schema_sql(&self.server.schema))
    }

    fn init(&self, timeout: Duration) -> Result<String, Failure> {
        let mut conn = Conn::new(self.server.clone());
        let tables = self.tables().unwrap_or_default();
        let deadline = Instant::now() + timeout;
        // Runs that go on meanwhile lock the same tables in their own order, and the server may
        // end a deadlock by rolling back this transaction; a transaction that holds a table
        // (a DBA's, a backup's) would keep this one waiting for it, and every run's step
        // queued behind it, after this client gave up. So each try waits at most a second for
        // any lock (`lock_timeout`), no statement outlives the deadline (`statement_timeout`),
        // and a try the server rolled back for another's sake, of which nothing stays, is
        // made again after a pause that doubles, until the deadline.
        let mut pause = Duration::from_millis(50);
        let last = loop {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_millis();
            let sql = format!(
                // One init at a time in a database: the batch is one transaction, and hosts
                // that all run init as they are provisioned would otherwise race in the
                // catalogs (a duplicate schema, a function "concurrently updated"). The lock is
                // the transaction's, its key "redlock" in ASCII. Then, as pg_dump does:
                // function bodies are checked when called, so that a table of redlock's name
                // that is not redlock's is named below, not by the first body that reads it.
                // The lock's wait ends 100 ms before the deadline, so that the server's answer
                // says why.
                "SET lock_timeout = {}; SET statement_timeout = {}; \
                 SELECT pg_advisory_xact_lock({INIT_LOCK}); SET client_min_messages = warning; \
                 SET check_function_bodies = off; {tables}",
                left.saturating_sub(100).clamp(1, 1000),
                left.max(1)
            );
            match conn.batch(deadline, &sql) {
                Err(failure)
                    if conn::rolled_back_for_another(&failure)
                        && Instant::now() + pause + Duration::from_millis(200) < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                answer => break answer,
            }
        };
        last.map_err(|failure| {
            if conn::rolled_back_for_another(&failure) {
                failure.reworded(|said| {
                    format!(
                        "redlock's tables at {} stayed locked by other transactions for {} s \
                         ({said}): try again once they have ended",
                        self.server.shown,
                        timeout.as_secs()
                    )
                })
            } else {
                failure
            }
        })?;
        // CREATE TABLE IF NOT EXISTS passes over a table of that name, whatever it holds.
        let schema = self.server.schema.trim_matches('"').to_owned();
        let found = conn.query(
            deadline,
            "SELECT table_name::text, array_agg(column_name::text) FROM information_schema.columns \
             WHERE table_schema = $1 GROUP BY 1",
            &[(&schema, tokio_postgres::types::Type::TEXT)],
        )?;
        let found: Vec<(String, Vec<String>)> = found
            .iter()
            .map(|row| {
                Ok((
                    conn::column(row, "table_name")?,
                    conn::column(row, "array_agg")?,
                ))
            })
            .collect::<Result<_, Failure>>()?;
        for (table, columns) in tables_of(SCHEMA_SQL) {
            let has = found
                .iter()
                .find(|(name, _)| *name == table)
                .map(|(_, c)| c);
            if let Some(missing) = columns.iter().find(|c| !has.is_some_and(|h| h.contains(c))) {
                return Err(Failure::Refused(
                    format!(
                        "schema {} at {} holds a table {table} that redlock did not make (it has \
                         no column {missing}): drop it, or name another schema with ?schema=",
                        self.server.schema, self.server.shown
                    )
                    .into(),
                ));
            }
        }
        Ok(format!(
            "redlock's tables and functions are in schema {} at {}",
            self.server.schema, self.server.shown
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tables_are_read_from_the_sql_that_makes_them() {
        let tables = super::tables_of(super::SCHEMA_SQL);
        let names: Vec<&str> = tables.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["locks", "holders", "waiters", "runs"]);
        assert_eq!(tables[1].1.len(), 10, "{:?}", tables[1]);
        assert!(tables.iter().all(|(_, c)| c[0] == "name"));
    }
}
