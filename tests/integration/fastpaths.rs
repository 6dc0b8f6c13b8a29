//! Every fast path gives the general path's answer from the same state: PostgreSQL's plain
//! statements (`PLAIN_TAKE`, then `PLAIN_WAIT`; `PLAIN_RELEASE`) beside the `take()` and
//! `release()` functions. A random starting state is written twice, in two schemas that the same
//! `redlock init` made; the fast path runs on one copy as the locker composes it (falling back to
//! the function where the statement answers no row or says "undecided") and the function on the
//! other, with the same arguments; then the answers and every row are compared. Times cannot be
//! passed (each path reads `clock_timestamp()`), so the states put every time whole seconds away
//! from what a step decides on, and times compare within a second. A fencing token that starts a
//! new row (the server's clock in microseconds) compares within two seconds.
//!
//! Redis's plain take (take.lua) beside the general acquire (acquire.lua) is in [`redis_take`],
//! from random states written under two key prefixes.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redlock::boundary::{PLAIN_RELEASE, PLAIN_TAKE, PLAIN_WAIT, RECORD_TTL, RUNS_KEPT};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Row};

use crate::common::*;

// Redis: take.lua, as the client composes it, beside acquire.lua.
mod redis_take;

/// The lock both paths step on, as redlock names its row.
const NAME: &str = "redlock:k";
/// Our token; other holders and waiters are `h0`, `w1`, ...
const OURS: &str = "t";
/// The lock row's fencing counter in the states built (below the clock's microseconds, so a
/// token that starts a new row is told apart).
const FENCE: i64 = 1_000_000;
/// A token above this is the server's clock in microseconds.
const CLOCK_FENCE: i64 = 1_000_000_000_000_000;

/// A blocking client over one connection: both copies use the same session, so a waiter either
/// path registers names the same backend.
struct Pg {
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Pg {
    fn connect(url: &str) -> Pg {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (client, connection) = rt.block_on(tokio_postgres::connect(url, NoTls)).unwrap();
        rt.spawn(connection);
        Pg { rt, client }
    }

    fn batch(&self, sql: &str) {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{e:?}\n{sql}"));
    }

    fn query(&self, sql: &str, params: &[(&(dyn ToSql + Sync), Type)]) -> Vec<Row> {
        self.rt
            .block_on(self.client.query_typed(sql, params))
            .unwrap_or_else(|e| panic!("{e:?}\n{sql}"))
    }
}

/// A holder's row: its kind, and whether its lease still runs (30 s left) or ended 5 s ago.
#[derive(Debug, Clone)]
struct Holding {
    kind: &'static str,
    live: bool,
}

/// Whose session a waiter's row names.
#[derive(Debug, Clone, Copy)]
enum Session {
    /// NULL: only its `until` ends its wait.
    Unknown,
    /// A session that lives (another connection of this test's).
    Live,
    /// One that ended (nobody holds its advisory lock).
    Ended,
}

#[derive(Debug, Clone)]
struct Waiting {
    kind: &'static str,
    queued: bool,
    /// Registered for 60 s more, or its registration ended 5 s ago.
    live: bool,
    session: Session,
}

/// A run in the record: its outcome (none: running or lost) and how long ago it ended, in
/// seconds.
#[derive(Debug, Clone)]
struct Ran {
    outcome: Option<&'static str>,
    ended_ago: i64,
}

/// A lock's row and what hangs on it.
#[derive(Debug, Clone)]
struct Lock {
    /// Seconds since the row says it was used.
    used_ago: i64,
    /// Seconds since its last success, and which run that was (an index into `runs`).
    last_success: Option<(i64, Option<usize>)>,
    last_ended: Option<usize>,
    successes: u32,
    /// Our holder's row (its fence is [`FENCE`]), then the others' (h1, h2: below it).
    ours: Option<Holding>,
    others: Vec<Holding>,
    /// Our waiter's row, then the others' (w1, ...), in the order they came.
    our_wait: Option<Waiting>,
    waiters: Vec<Waiting>,
    /// The record, newest first: fences FENCE, FENCE - 1, ...
    runs: Vec<Ran>,
    /// The queue's count one more than its rows: a waiter whose session ended was passed over
    /// by a release, which leaves the count to the next function.
    stale_queued: bool,
}

/// A starting state: the lock's row or none, and other locks (how many days ago each was
/// used; those past the record's lifetime stay: neither path prunes, which one release in 16
/// does apart, and both must leave them alone alike).
#[derive(Debug, Clone)]
struct State {
    lock: Option<Lock>,
    others: Vec<i64>,
}

const DAY: i64 = 24 * 3600;

fn kind() -> impl Strategy<Value = &'static str> {
    prop_oneof![6 => Just("lock"), 1 => Just("limit 2"), 1 => Just("shared")]
}

fn holding() -> impl Strategy<Value = Holding> {
    (kind(), prop::bool::weighted(0.8)).prop_map(|(kind, live)| Holding { kind, live })
}

fn waiting() -> impl Strategy<Value = Waiting> {
    let session = prop_oneof![
        Just(Session::Unknown),
        Just(Session::Live),
        Just(Session::Ended)
    ];
    (
        kind(),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.7),
        session,
    )
        .prop_map(|(kind, queued, live, session)| Waiting {
            kind,
            queued,
            live,
            session,
        })
}

fn ran() -> impl Strategy<Value = Ran> {
    let outcome = prop_oneof![
        Just(Some("success")),
        Just(Some("failure")),
        Just(Some("vanished")),
        Just(None)
    ];
    let ago = prop_oneof![Just(30), Just(3600), Just(41 * DAY)];
    (outcome, ago).prop_map(|(outcome, ended_ago)| Ran { outcome, ended_ago })
}

fn lock() -> impl Strategy<Value = Lock> {
    (
        (
            prop_oneof![Just(10), Just(300), Just(41 * DAY)],
            prop::option::of((
                prop_oneof![Just(5), Just(41 * DAY)],
                prop::option::of(0..25usize),
            )),
            prop::option::of(0..25usize),
            0..3u32,
        ),
        prop::option::weighted(0.3, holding()),
        prop::collection::vec(holding(), 0..=2),
        prop::option::weighted(0.2, waiting()),
        prop::collection::vec(waiting(), 0..=3),
        prop::collection::vec(ran(), 0..=24),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(
                (used_ago, last_success, last_ended, successes),
                ours,
                others,
                our_wait,
                waiters,
                runs,
                stale_queued,
            )| Lock {
                used_ago,
                last_success,
                last_ended,
                successes,
                // Mostly free, so that the plain statement takes it often.
                others: if ours.is_none() && others.len() == 2 {
                    Vec::new()
                } else {
                    others
                },
                ours,
                our_wait,
                waiters,
                runs,
                stale_queued,
            },
        )
}

fn state() -> impl Strategy<Value = State> {
    (
        prop::option::weighted(
            0.85,
            // Each path often enough: a lock another holds plainly (the plain statement turns
            // us away), and one ours holds (a retried take, a release while the lease holds).
            prop_oneof![
                2 => lock(),
                1 => lock().prop_map(|l| Lock {
                    ours: None,
                    others: vec![Holding { kind: "lock", live: true }],
                    waiters: (l.waiters.into_iter())
                        .map(|w| Waiting { queued: false, ..w })
                        .collect(),
                    our_wait: None,
                    stale_queued: false,
                    ..l
                }),
                1 => lock().prop_map(|l| Lock {
                    ours: Some(Holding { kind: "lock", live: true }),
                    others: Vec::new(),
                    ..l
                }),
            ],
        ),
        prop::collection::vec(prop_oneof![Just(1), Just(41)], 0..=5),
    )
        .prop_map(|(lock, days)| State {
            lock,
            // Told apart by a few seconds, so that a path that pruned would be seen to.
            others: days
                .iter()
                .enumerate()
                .map(|(i, d)| d * DAY + i as i64)
                .collect(),
        })
}

/// `clock_timestamp()` moved by `s` seconds, as SQL.
fn at(s: i64) -> String {
    format!("clock_timestamp() + interval '{s} seconds'")
}

/// The statements that write `state` into `schema` (emptied first). `live` and `ended`: the
/// backend pids of a session that lives and of one that ended.
fn setup(schema: &str, state: &State, live: i32, ended: i32) -> String {
    let mut sql = format!("DELETE FROM {schema}.locks;\n");
    for (i, ago) in state.others.iter().enumerate() {
        sql += &format!(
            "INSERT INTO {schema}.locks (name, fence, used) VALUES ('redlock:o{i}', 7, {});\n",
            at(-ago)
        );
    }
    let Some(l) = &state.lock else {
        return sql;
    };
    let run_fence = |i: usize| FENCE - i as i64;
    let fence_of = |pick: Option<usize>| {
        pick.filter(|&i| i < l.runs.len())
            .map_or("NULL".to_owned(), |i| run_fence(i).to_string())
    };
    let (success_at, success_fence) = match l.last_success {
        Some((ago, run)) => (at(-ago), fence_of(run)),
        None => ("NULL".to_owned(), "NULL".to_owned()),
    };
    let holders: Vec<(String, i64, &Holding)> = l
        .ours
        .iter()
        .map(|h| (OURS.to_owned(), FENCE, h))
        .chain(
            l.others
                .iter()
                .enumerate()
                .map(|(j, h)| (format!("h{j}"), FENCE - 1 - j as i64, h)),
        )
        .collect();
    let waiters: Vec<(String, &Waiting)> = l
        .our_wait
        .iter()
        .map(|w| (OURS.to_owned(), w))
        // Our token holds or waits, not both.
        .filter(|_| l.ours.is_none())
        .chain(
            l.waiters
                .iter()
                .enumerate()
                .map(|(j, w)| (format!("w{j}"), w)),
        )
        .collect();
    let queued = waiters.iter().filter(|(_, w)| w.queued).count() + usize::from(l.stale_queued);
    sql += &format!(
        "INSERT INTO {schema}.locks (name, fence, last_success, success_interval_ms, \
         last_success_fence, last_ended_fence, counts, holders, queued, used) VALUES \
         ('{NAME}', {FENCE}, {success_at}, 60000, {success_fence}, {}, \
         '{{\"success\": {}}}', {}, {queued}, {});\n",
        fence_of(l.last_ended),
        l.successes,
        holders.len(),
        at(-l.used_ago),
    );
    for (i, run) in l.runs.iter().enumerate() {
        let fence = run_fence(i);
        // A holder's run has no outcome yet.
        let holding = holders.iter().any(|(_, f, _)| *f == fence);
        let outcome = if holding { None } else { run.outcome };
        let ended = outcome.map_or("NULL".to_owned(), |_| at(-run.ended_ago));
        sql += &format!(
            "INSERT INTO {schema}.runs (name, fence, token, host, pid, started, until, ended, \
             outcome, status) VALUES ('{NAME}', {fence}, 'r{i}', 'host', 1, {}, {}, {ended}, \
             {}, {});\n",
            at(-run.ended_ago - 2),
            at(if holding { 30 } else { -run.ended_ago + 20 }),
            outcome.map_or("NULL".to_owned(), |o| format!("'{o}'")),
            outcome.map_or("NULL", |_| "0"),
        );
    }
    for (token, fence, h) in &holders {
        sql += &format!(
            "INSERT INTO {schema}.holders (name, token, fence, kind, since, until, host, pid, \
             command, started) VALUES ('{NAME}', '{token}', {fence}, '{}', {}, {}, 'host', 1, \
             'cmd', 0);\n",
            h.kind,
            at(-60),
            at(if h.live { 30 } else { -5 }),
        );
    }
    for (token, w) in &waiters {
        let pid = match w.session {
            Session::Unknown => "NULL".to_owned(),
            Session::Live => live.to_string(),
            Session::Ended => ended.to_string(),
        };
        sql += &format!(
            "INSERT INTO {schema}.waiters (name, token, kind, queued, since, until, backend_pid) \
             VALUES ('{NAME}', '{token}', '{}', {}, {}, {}, {pid});\n",
            w.kind,
            w.queued,
            at(-20),
            at(if w.live { 60 } else { -5 }),
        );
    }
    sql
}

/// A value as the comparison reads it: times and clock tokens within a tolerance, the rest
/// exactly.
#[derive(Debug, Clone)]
enum Val {
    Null,
    Int(i64),
    /// Seconds: from now for a row's time, since the epoch for an answer's.
    Secs(f64),
    Text(String),
}

impl PartialEq for Val {
    fn eq(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Int(a), Val::Int(b)) if *a > CLOCK_FENCE && *b > CLOCK_FENCE => {
                (a - b).abs() <= 2_000_000
            }
            (Val::Secs(a), Val::Secs(b)) => (a - b).abs() <= 1.0,
            (Val::Null, Val::Null) => true,
            (Val::Int(a), Val::Int(b)) => a == b,
            (Val::Text(a), Val::Text(b)) => a == b,
            _ => false,
        }
    }
}

/// Every column of `row` as a [`Val`].
fn vals(row: &Row) -> Vec<Val> {
    (0..row.len())
        .map(|i| {
            let ty = row.columns()[i].type_().clone();
            let v = if ty == Type::INT8 {
                row.get::<_, Option<i64>>(i).map(Val::Int)
            } else if ty == Type::INT4 {
                row.get::<_, Option<i32>>(i).map(|v| Val::Int(v.into()))
            } else if ty == Type::FLOAT8 {
                row.get::<_, Option<f64>>(i).map(Val::Secs)
            } else if ty == Type::BOOL {
                row.get::<_, Option<bool>>(i)
                    .map(|b| Val::Text(b.to_string()))
            } else {
                row.get::<_, Option<String>>(i).map(Val::Text)
            };
            v.unwrap_or(Val::Null)
        })
        .collect()
}

/// A time of a row, in seconds from now.
fn rel(column: &str) -> String {
    format!("extract(epoch FROM {column} - clock_timestamp())::float8")
}

/// What `schema` holds after a step, by table; and the lock's `queued` count beside the queued
/// waiters' rows.
fn dump(pg: &Pg, schema: &str) -> (BTreeMap<&'static str, Vec<Vec<Val>>>, i64, i64) {
    let name = NAME;
    let tables = [
        (
            "locks",
            format!(
                "SELECT fence, {}, success_interval_ms, last_success_fence, last_ended_fence, \
                 counts::text, holders, {} FROM {schema}.locks WHERE name = '{name}'",
                rel("last_success"),
                rel("used")
            ),
        ),
        (
            "holders",
            format!(
                "SELECT token, fence, kind, {}, {}, host, pid, command, started \
                 FROM {schema}.holders WHERE name = '{name}' ORDER BY token",
                rel("since"),
                rel("until")
            ),
        ),
        // A waiter whose registration ended is the same as none: the function removes its row
        // as it passes, the plain statements leave it to the next function.
        (
            "waiters",
            format!(
                "SELECT token, kind, queued, {}, {}, backend_pid FROM {schema}.waiters \
                 WHERE name = '{name}' AND until >= clock_timestamp() ORDER BY seq",
                rel("since"),
                rel("until")
            ),
        ),
        (
            "runs",
            format!(
                "SELECT fence, token, host, pid, {}, {}, {}, outcome, status, min_interval_ms \
                 FROM {schema}.runs WHERE name = '{name}' ORDER BY fence",
                rel("started"),
                rel("until"),
                rel("ended")
            ),
        ),
        (
            "other locks",
            format!("SELECT name FROM {schema}.locks WHERE name <> '{name}' ORDER BY name"),
        ),
    ];
    let rows = tables
        .into_iter()
        .map(|(table, sql)| (table, pg.query(&sql, &[]).iter().map(vals).collect()))
        .collect();
    let counted = pg.query(
        &format!(
            "SELECT COALESCE((SELECT queued FROM {schema}.locks WHERE name = '{name}'), 0), \
             (SELECT count(*) FROM {schema}.waiters WHERE name = '{name}' AND queued)"
        ),
        &[],
    );
    (rows, counted[0].get(0), counted[0].get(1))
}

/// One step, as the locker takes it.
#[derive(Debug, Clone)]
enum Step {
    /// A plain take by our token.
    Take,
    /// Our release of the run of fencing token `FENCE - back`.
    Release {
        back: i64,
        success: bool,
        min_interval: Option<i64>,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Take),
        (
            prop_oneof![5 => Just(0), 1 => Just(1), 1 => Just(3)],
            any::<bool>(),
            prop::option::of(Just(60_000i64))
        )
            .prop_map(|(back, success, min_interval)| Step::Release {
                back,
                success,
                min_interval
            }),
    ]
}

/// Which path answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Path {
    /// The plain statement decided alone: taken or released.
    Fast,
    /// `PLAIN_WAIT` decided: turned away.
    FastBusy,
    /// The statement signalled it cannot decide; the function did.
    Fallback,
    /// The function, on the other copy.
    General,
}

const TTL_MS: i64 = 10_000;
const WAITING_MS: i64 = 20_000;

/// A take's row as [`Val`]s: what it answered, with what the answer carries.
fn took(row: &Row) -> Vec<Val> {
    let result: String = row.get("result");
    let ms = |c: &str| {
        row.get::<_, Option<i64>>(c)
            .map_or(Val::Null, |ms| Val::Secs(ms as f64 / 1000.0))
    };
    match result.as_str() {
        "acquired" => vec![
            Val::Text(result),
            Val::Int(row.get("fence")),
            ms("started_ms"),
        ],
        "busy" => vec![
            Val::Text(result),
            ms("remaining_ms"),
            Val::Text(
                row.get::<_, Option<bool>>("queued")
                    .unwrap_or(false)
                    .to_string(),
            ),
            Val::Text(row.get("channel")),
        ],
        "mismatch" => vec![Val::Text(result), Val::Text(row.get("found_kind"))],
        _ => vec![Val::Text(result)],
    }
}

/// `take()` on `schema`, as the locker calls it for a plain attempt.
fn take_function(pg: &Pg, schema: &str) -> Vec<Val> {
    let (kind, limit, fair, interval) = ("lock", 0i32, false, None::<i64>);
    let (host, pid, command, started) = ("host", 2i64, "cmd", 5i64);
    let (kept, record_ttl) = (RUNS_KEPT as i32, RECORD_TTL.as_millis() as i64);
    let rows = pg.query(
        &format!("SELECT * FROM {schema}.take($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"),
        &[
            (&NAME, Type::TEXT),
            (&OURS, Type::TEXT),
            (&TTL_MS, Type::INT8),
            (&kind, Type::TEXT),
            (&limit, Type::INT4),
            (&fair, Type::BOOL),
            (&interval, Type::INT8),
            (&WAITING_MS, Type::INT8),
            (&host, Type::TEXT),
            (&pid, Type::INT8),
            (&command, Type::TEXT),
            (&started, Type::INT8),
            (&kept, Type::INT4),
            (&record_ttl, Type::INT8),
        ],
    );
    took(&rows[0])
}

/// The plain take on `schema` as the locker composes it: `PLAIN_TAKE`; if it answers no row,
/// `PLAIN_WAIT`; if that says undecided, `take()`.
fn take_fast(pg: &Pg, schema: &str) -> (Path, Vec<Val>) {
    let (host, pid, command, started) = ("host", 2i64, "cmd", 5i64);
    let (kept, record_ttl) = (RUNS_KEPT as i32, RECORD_TTL.as_millis() as i64);
    let rows = pg.query(
        &PLAIN_TAKE.replace("@schema@", schema),
        &[
            (&NAME, Type::TEXT),
            (&OURS, Type::TEXT),
            (&TTL_MS, Type::INT8),
            (&host, Type::TEXT),
            (&pid, Type::INT8),
            (&command, Type::TEXT),
            (&started, Type::INT8),
            (&kept, Type::INT4),
            (&record_ttl, Type::INT8),
        ],
    );
    if let Some(row) = rows.first() {
        let started: i64 = row.get("started_ms");
        return (
            Path::Fast,
            vec![
                Val::Text("acquired".into()),
                Val::Int(row.get("fence")),
                Val::Secs(started as f64 / 1000.0),
            ],
        );
    }
    let rows = pg.query(
        &PLAIN_WAIT.replace("@schema@", schema),
        &[
            (&NAME, Type::TEXT),
            (&OURS, Type::TEXT),
            (&WAITING_MS, Type::INT8),
        ],
    );
    match rows.first() {
        Some(row) if row.get::<_, Option<bool>>("undecided") == Some(false) => {
            // At least 100 ms, as the locker reads it.
            let remaining: Option<i64> = row.get("remaining_ms");
            let remaining =
                remaining.map_or(Val::Null, |ms| Val::Secs(ms.max(100) as f64 / 1000.0));
            (
                Path::FastBusy,
                vec![
                    Val::Text("busy".into()),
                    remaining,
                    Val::Text("false".into()),
                    Val::Text(row.get("channel")),
                ],
            )
        }
        _ => (Path::Fallback, take_function(pg, schema)),
    }
}

/// Our release of `FENCE - back` on `schema`: `PLAIN_RELEASE` first when `fast` (the function
/// when it answers no row), else the function alone. 'ours' or 'gone'.
fn release(pg: &Pg, schema: &str, step: &Step, fast: bool) -> (Path, Vec<Val>) {
    let Step::Release {
        back,
        success,
        min_interval,
    } = step
    else {
        unreachable!()
    };
    let fence = FENCE - back;
    let (outcome, status) = if *success {
        ("success", 0i32)
    } else {
        ("failure", 1i32)
    };
    let (took, lost, lost_status, lost_by) = (1000i64, "lost", 0i32, 0i64);
    let record_ttl = RECORD_TTL.as_millis() as i64;
    let params: [(&(dyn ToSql + Sync), Type); 11] = [
        (&NAME, Type::TEXT),
        (&OURS, Type::TEXT),
        (&fence, Type::INT8),
        (&outcome, Type::TEXT),
        (&status, Type::INT4),
        (&took, Type::INT8),
        (min_interval, Type::INT8),
        (&lost, Type::TEXT),
        (&lost_status, Type::INT4),
        (&lost_by, Type::INT8),
        (&record_ttl, Type::INT8),
    ];
    if fast {
        let statement: Vec<_> = params[..7].iter().chain(&params[10..]).cloned().collect();
        let rows = pg.query(&PLAIN_RELEASE.replace("@schema@", schema), &statement);
        if !rows.is_empty() {
            return (Path::Fast, vec![Val::Text("ours".into())]);
        }
    }
    let rows = pg.query(
        &format!("SELECT * FROM {schema}.release($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"),
        &params,
    );
    let path = if fast { Path::Fallback } else { Path::General };
    (path, vec![Val::Text(rows[0].get(0))])
}

/// Two schemas that the same `redlock init` made, one connection to both, and the pids of a
/// session that lives and of one that ended.
struct Copies {
    _server: PgServer,
    pg: Pg,
    _other: Pg,
    live: i32,
}

impl Copies {
    fn new() -> Copies {
        let server = PgServer::start();
        for schema in ["fast", "general"] {
            let url = format!("{}?schema={schema}", server.url());
            Redlock::admin_at("init", &url).any_stdout().output();
        }
        let pg = Pg::connect(&server.url());
        // A session that lives, as `session()` marks one: its advisory lock held.
        let other = Pg::connect(&server.url());
        let live: i32 = other.query(
            "SELECT pg_backend_pid() FROM pg_try_advisory_lock(1919183979, pg_backend_pid())",
            &[],
        )[0]
        .get(0);
        Copies {
            _server: server,
            pg,
            _other: other,
            live,
        }
    }

    /// `state` in both copies, `step` fast on one and general on the other: the answers and
    /// the rows must agree, but for what the fast path legitimately leaves (see the test).
    fn case(&self, state: &State, step: &Step) -> Result<Path, TestCaseError> {
        const ENDED: i32 = 999_999;
        for schema in ["fast", "general"] {
            self.pg.batch(&setup(schema, state, self.live, ENDED));
        }
        let ((path, fast), (_, general)) = match step {
            Step::Take => (
                take_fast(&self.pg, "fast"),
                (Path::General, take_function(&self.pg, "general")),
            ),
            Step::Release { .. } => (
                release(&self.pg, "fast", step, true),
                release(&self.pg, "general", step, false),
            ),
        };
        prop_assert_eq!(&fast, &general, "the answers ({:?})", path);
        let (mut fast_rows, fast_queued, fast_queued_rows) = dump(&self.pg, "fast");
        let (mut general_rows, general_queued, general_queued_rows) = dump(&self.pg, "general");
        // The queue's count, never below the queued rows (the plain take relies on that); above
        // them where a waiter whose session ended was passed over, until a function counts
        // again (not every branch of a function does).
        for (queued, rows) in [
            (fast_queued, fast_queued_rows),
            (general_queued, general_queued_rows),
        ] {
            prop_assert!(queued >= rows, "{} < {} ({:?})", queued, rows, path);
        }
        if path == Path::FastBusy {
            // Turned away by `PLAIN_WAIT`: the lock's `used` is not touched (a lock with a
            // live holder is never pruned, and its release marks it).
            for rows in [&mut fast_rows, &mut general_rows] {
                rows.remove("other locks");
                for row in rows.get_mut("locks").unwrap() {
                    row.pop();
                }
            }
        }
        for (table, fast) in &fast_rows {
            prop_assert_eq!(fast, &general_rows[table], "{} ({:?})", table, path);
        }
        Ok(path)
    }
}

/// 96 random states, each with a plain take or our release on both copies. Where the fast path
/// answers less, the locker falls back to the function: a plain take that `PLAIN_TAKE` turns
/// away and `PLAIN_WAIT` calls undecided (nobody holds it but a queue or a hand-made row is
/// there, a lease ended, a holder of another kind, a queued waiter, our own token holding it),
/// a release whose lease ended or whose row is gone. Those cases must end as the function ends
/// them; the test also checks that every path was taken at least once.
#[test]
fn postgres_plain_statements_answer_as_the_functions() {
    let copies = Copies::new();
    let paths = std::cell::RefCell::new(BTreeMap::<(&str, Path), u32>::new());
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&(state(), step()), |(state, step)| {
        let path = copies.case(&state, &step)?;
        let step = if matches!(step, Step::Take) {
            "take"
        } else {
            "release"
        };
        *paths.borrow_mut().entry((step, path)).or_default() += 1;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let paths = paths.into_inner();
    for path in [
        ("take", Path::Fast),
        ("take", Path::FastBusy),
        ("take", Path::Fallback),
        ("release", Path::Fast),
        ("release", Path::Fallback),
    ] {
        assert!(paths.contains_key(&path), "{path:?} never taken: {paths:?}");
    }
}

/// `PLAIN_WAIT` for our token on lock `k` of `pg`'s `redlock` schema: its columns (remaining
/// ms, undecided, channel), as psql prints them.
fn plain_wait(pg: &PgServer) -> Vec<String> {
    let sql = PLAIN_WAIT
        .replace("@schema@", "redlock")
        .replace("$1", "'redlock:k'")
        .replace("$2", "'t'")
        .replace("$3", "20000");
    pg.psql(&sql).split('|').map(str::to_owned).collect()
}

/// A plain take made again by the token that holds the lock (its first answer lost): the
/// function answers it taken, with its token. `PLAIN_WAIT` once answered it busy for the rest
/// of its own lease, and left a waiter's row of the holder; now it leaves it to the function.
#[test]
fn a_plain_take_made_again_by_its_holder_is_left_to_the_function() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    let take = "SELECT result || ' ' || fence FROM redlock.take('redlock:k', 't', 30000, 'lock', \
                0, false, NULL, 20000, 'h', 1, 'c', 0, 20, 3456000000)";
    let first = pg.psql(take);
    assert_eq!(plain_wait(&pg)[1], "t", "undecided");
    assert_eq!(pg.psql("SELECT count(*) FROM redlock.waiters"), "0");
    assert_eq!(pg.psql(take), first);
}

/// Our registration as a waiter had ended, and a queued waiter came after it: the function
/// forgets the ended registration and puts us behind that waiter. `PLAIN_WAIT` once renewed
/// the ended row, keeping its old place, and the function then let us in ahead; now it leaves
/// the row as it is and the function decides.
#[test]
fn an_ended_registration_keeps_no_place_on_the_plain_path() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    pg.psql(
        "INSERT INTO redlock.locks (name, fence, queued) VALUES ('redlock:k', 5, 1); \
         INSERT INTO redlock.waiters (name, token, kind, queued, since, until) VALUES \
         ('redlock:k', 't', 'lock', false, now() - interval '1 minute', \
          now() - interval '5 seconds'), \
         ('redlock:k', 'w', 'lock', true, now(), now() + interval '1 minute')",
    );
    assert_eq!(plain_wait(&pg)[1], "t", "undecided");
    assert_eq!(
        pg.psql("SELECT until < now() FROM redlock.waiters WHERE token = 't'"),
        "t"
    );
    let take = "SELECT result || ' ' || queued FROM redlock.take('redlock:k', 't', 30000, \
                'lock', 0, false, NULL, 20000, 'h', 1, 'c', 0, 20, 3456000000)";
    assert_eq!(pg.psql(take), "busy true");
}
