//! Redis: the plain take (`Take`: take.lua, then record/start.lua and waiters/registered.lua in
//! the same call) gives the general acquire's answer (`Acquire`: acquire.lua, without `--fair`
//! or `--min-interval`, an exclusive lock) from the same state.
//!
//! A random starting state is written twice, under the prefixes `fast:` and `general:`: the
//! lock key (free, another holder's token with or without a lease, our own token: a take whose
//! reply was lost and is made again, a semaphore's or shared holders' sorted set with its kind,
//! a key of a type redlock does not make), the holder's details, the fencing counter (none,
//! below the server's clock, above it, past what a Lua number counts exactly, not a number),
//! the registry of waiters, the wake lists, the waiters' queue, and the record of runs (its
//! head, a ring of up to `RUNS_KEPT` runs, its counts, when it was last given more life). On
//! `fast:` the client's step runs as `SingleRedis::acquire` composes it for a plain run: `Take`,
//! and when that answers `several` (a key it does not take), `Acquire` on the same keys; on
//! `general:` `Acquire` alone, with the same token, ttl and arguments. Then the answers and
//! every key under each prefix are compared.
//!
//! "The same answer": the same reply (a fencing token, the server's time and the run's N in
//! the record when taken; the holder's lease and why when turned away; the same error), and
//! the same keys, each of the same type with the same value and an expiry within a second.
//! What carries the server's clock (a fencing token that is the clock in microseconds, a time
//! in ms in a run's JSON, in the record's `kept` or in a waiter's score) compares within two
//! seconds; every other digit compares exactly.
//!
//! Where the fast path answers less: `Take` does not decide for a key that is not one
//! holder's token (several holders, or not redlock's): it answers `several`, writes nothing,
//! and the client asks `Acquire`, whose answer (a mismatch, behind shared holders, or taken
//! when every lease in the set had ended) is then the step's. The test checks that `several`
//! comes only for such keys, and that every path (taken, turned away, our own retry, left to
//! the general acquire, refused with an error) was reached.
//!
//! One difference is allowed: a take refused with an error (a fencing counter that is not a
//! number) leaves our token's entries among the waiters (the registry, the queue, our own wake
//! list) as they were on the fast path, while the general acquire has taken them out before it
//! fails on the counter (Redis keeps what a script wrote before its error). The run ends there
//! either way; those entries are not compared.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis::Connection;
use redlock::boundary::{
    Acquire, AcquireReply, Attempt, Holder, Kept, Keys, RECORD_TTL, RUNS_KEPT, Take, eval,
};

use crate::common::RedisServer;

/// Our token; the other holder is `h0` (and `h1` among several), other waiters `w0`, `w1`.
const OURS: &str = "t";
/// The run as the client writes it (the JSON object without its closing brace).
const RUN: &str = r#"{"token":"t","host":"host","pid":"2""#;
const TTL: Duration = Duration::from_secs(10);
/// How long a waiter turned away counts as waiting.
const LIFETIME: Duration = Duration::from_secs(20);
/// A queue entry's life, and how long a wake-up lingers (the general acquire's arguments).
const ENTRY: Duration = Duration::from_secs(5);
const LINGER: Duration = Duration::from_millis(100);
/// The fencing counter's life, as the scripts give it.
const FENCE_LIFETIME_MS: i64 = 3_456_000_000;
/// A fencing counter past 2^53, where a Lua number is no longer exact.
const HUGE_FENCE: &str = "123456789012345679";

/// What the lock key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockKey {
    Free,
    /// Another holder's token, with 5 s of lease left or with no expiry.
    Other {
        expires: bool,
    },
    /// Our own token: the take is made again, its first reply lost.
    Ours,
    /// Several holders' sorted set, `h0` with 30 s left and `h1` with 30 s left or ended 5 s
    /// ago, held as `kind`.
    Several {
        kind: &'static str,
        second_live: bool,
    },
    /// A list: not a key redlock makes.
    Foreign,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fence {
    Absent,
    /// 1000000: far below the server's clock in microseconds.
    Below,
    /// A minute ahead of the server's clock in microseconds.
    Ahead,
    /// [`HUGE_FENCE`].
    Huge,
    /// Not a number.
    Garbage,
}

/// Whose run the record's head says holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Nobody,
    Ours,
    Other,
}

#[derive(Debug, Clone)]
struct Record {
    /// The newest run's N; the ring holds the last `RUNS_KEPT` of them.
    head: u32,
    open: Open,
    /// Given more life an hour ago (else two days ago: the next run's start renews it).
    kept_recently: bool,
    successes: u32,
}

#[derive(Debug, Clone)]
struct State {
    lock: LockKey,
    /// The holder's details beside a one-holder lock.
    details: bool,
    fence: Fence,
    /// An earlier attempt of ours was, or may have been, turned away.
    waited: bool,
    /// Our entry in the registry of waiters: still counting as waiting, or lapsed.
    we_wait: Option<bool>,
    others_wait: usize,
    /// A marker on our own wake list, and on the shared one.
    own_list: bool,
    shared_wake: bool,
    /// Our entry in the waiters' queue (an exclusive waiter once queued behind shared holders),
    /// and another waiter's.
    we_queued: bool,
    other_queued: bool,
    record: Option<Record>,
}

impl State {
    /// Only `lock`: nothing else kept, a first attempt.
    fn only(lock: LockKey) -> State {
        State {
            lock,
            details: false,
            fence: Fence::Absent,
            waited: false,
            we_wait: None,
            others_wait: 0,
            own_list: false,
            shared_wake: false,
            we_queued: false,
            other_queued: false,
            record: None,
        }
    }
}

fn lock_key() -> impl Strategy<Value = LockKey> {
    prop_oneof![
        4 => Just(LockKey::Free),
        2 => any::<bool>().prop_map(|expires| LockKey::Other { expires }),
        2 => Just(LockKey::Ours),
        1 => (prop_oneof![Just("limit 2"), Just("shared")], any::<bool>())
            .prop_map(|(kind, second_live)| LockKey::Several { kind, second_live }),
        1 => Just(LockKey::Foreign),
    ]
}

fn fence() -> impl Strategy<Value = Fence> {
    prop_oneof![
        3 => Just(Fence::Absent),
        3 => Just(Fence::Below),
        2 => Just(Fence::Ahead),
        1 => Just(Fence::Huge),
        2 => Just(Fence::Garbage),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    (
        1..45u32,
        prop_oneof![Just(Open::Nobody), Just(Open::Ours), Just(Open::Other)],
        any::<bool>(),
        0..4u32,
    )
        .prop_map(|(head, open, kept_recently, successes)| Record {
            head,
            open,
            kept_recently,
            successes,
        })
}

fn state() -> impl Strategy<Value = State> {
    (
        (
            lock_key(),
            prop::bool::weighted(0.8),
            fence(),
            any::<bool>(),
        ),
        (
            prop::option::weighted(0.4, any::<bool>()),
            0..=2usize,
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.3),
        ),
        (
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
            prop::option::weighted(0.7, record()),
        ),
    )
        .prop_map(
            |(
                (lock, details, fence, waited),
                (we_wait, others_wait, own_list, shared_wake),
                (we_queued, other_queued, record),
            )| State {
                lock,
                details,
                fence,
                waited,
                we_wait,
                others_wait,
                own_list,
                shared_wake,
                we_queued,
                other_queued,
                record,
            },
        )
}

/// The server's clock, in ms and µs.
fn now(conn: &mut Connection) -> (i64, i64) {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
    let now_us = s * 1_000_000 + us;
    (now_us / 1000, now_us)
}

/// Write `state` under `keys` (what was there deleted first), as of the server's `now_ms`.
fn setup(conn: &mut Connection, prefix: &str, keys: &Keys, state: &State, now_ms: i64) {
    let old: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(conn)
        .unwrap();
    if !old.is_empty() {
        redis::cmd("DEL").arg(old).exec(conn).unwrap();
    }
    let now_us = now_ms * 1000;
    let mut p = redis::pipe();
    let holder_of = |p: &mut redis::Pipeline, token: &str, px: Option<i64>| {
        p.cmd("HSET")
            .arg(&keys.holder)
            .arg(&["token", token, "host", "host", "pid", "1", "argv", "cmd"])
            .arg(&["started", "1700000000"]);
        if let Some(px) = px {
            p.cmd("PEXPIRE").arg(&keys.holder).arg(px);
        }
    };
    match state.lock {
        LockKey::Free => {}
        LockKey::Other { expires } => {
            p.cmd("SET").arg(&keys.lock).arg("h0");
            let px = expires.then_some(5000);
            if let Some(px) = px {
                p.cmd("PEXPIRE").arg(&keys.lock).arg(px);
            }
            if state.details {
                holder_of(&mut p, "h0", px);
            }
        }
        LockKey::Ours => {
            p.cmd("SET").arg(&keys.lock).arg(OURS).arg("PX").arg(3000);
            if state.details {
                holder_of(&mut p, OURS, Some(3000));
            }
        }
        LockKey::Several { kind, second_live } => {
            let second = if second_live {
                now_ms + 30_000
            } else {
                now_ms - 5000
            };
            p.cmd("ZADD")
                .arg(&keys.lock)
                .arg(now_ms + 30_000)
                .arg("h0")
                .arg(second)
                .arg("h1");
            p.cmd("PEXPIRE").arg(&keys.lock).arg(30_000);
            p.cmd("SET").arg(&keys.kind).arg(kind).arg("PX").arg(30_000);
            for h in ["h0", "h1"] {
                p.cmd("HSET").arg(&keys.holders).arg(h).arg(format!(
                    r#"{{"host":"host","pid":"1","argv":"cmd","since":"{now_ms}","fence":"7"}}"#
                ));
            }
            p.cmd("PEXPIRE").arg(&keys.holders).arg(86_430_000);
        }
        LockKey::Foreign => {
            p.cmd("RPUSH").arg(&keys.lock).arg("x");
        }
    }
    let fence = match state.fence {
        Fence::Absent => None,
        Fence::Below => Some("1000000".to_owned()),
        Fence::Ahead => Some((now_us + 60_000_000).to_string()),
        Fence::Huge => Some(HUGE_FENCE.to_owned()),
        Fence::Garbage => Some("x".to_owned()),
    };
    if let Some(fence) = fence {
        p.cmd("SET")
            .arg(&keys.fence)
            .arg(fence)
            .arg("PX")
            .arg(FENCE_LIFETIME_MS);
    }
    let mut waiting: Vec<(i64, String)> = (0..state.others_wait)
        .map(|i| (now_ms + 15_000, format!("w{i}")))
        .collect();
    if let Some(live) = state.we_wait {
        let until = if live { now_ms + 15_000 } else { now_ms - 5000 };
        waiting.push((until, OURS.to_owned()));
    }
    if !waiting.is_empty() {
        p.cmd("ZADD").arg(&keys.waiting).arg(&waiting);
        p.cmd("PEXPIRE").arg(&keys.waiting).arg(15_000);
    }
    let lists = [
        (state.own_list, format!("{}:{OURS}", keys.wake)),
        (state.shared_wake, keys.wake.clone()),
    ];
    for (present, list) in lists {
        if present {
            p.cmd("RPUSH").arg(&list).arg("1");
            p.cmd("PEXPIRE").arg(&list).arg(5000);
        }
    }
    let queued: Vec<&str> = [(state.we_queued, OURS), (state.other_queued, "w0")]
        .into_iter()
        .filter_map(|(queued, who)| queued.then_some(who))
        .collect();
    for (i, who) in queued.iter().enumerate() {
        p.cmd("ZADD")
            .arg(&keys.queue)
            .arg(now_us - 3_000_000 + i as i64)
            .arg(who);
        p.cmd("ZADD").arg(&keys.alive).arg(now_ms + 4000).arg(who);
    }
    if !queued.is_empty() {
        p.cmd("PEXPIRE").arg(&keys.queue).arg(4000);
        p.cmd("PEXPIRE").arg(&keys.alive).arg(4000);
    }
    if let Some(r) = &state.record {
        let open = match r.open {
            Open::Nobody => "",
            Open::Ours => OURS,
            Open::Other => "h0",
        };
        let kept_at = now_ms
            - if r.kept_recently {
                3_600_000
            } else {
                2 * 86_400_000
            };
        p.cmd("HSET")
            .arg(&keys.counts)
            .arg("head")
            .arg(format!("{} {open}", r.head))
            .arg("kept")
            .arg(format!("@{kept_at}"))
            .arg("success")
            .arg(r.successes);
        let first = r.head.saturating_sub(RUNS_KEPT - 1).max(1);
        for n in first..=r.head {
            let newest = n == r.head;
            let (token, ending) = if newest && r.open != Open::Nobody {
                (open.to_owned(), String::new())
            } else {
                (
                    format!("r{n}"),
                    r#","outcome":"success","status":"0","ended":"1700000001000""#.to_owned(),
                )
            };
            p.cmd("HSET")
                .arg(&keys.counts)
                .arg(format!("run:{}", n % RUNS_KEPT))
                .arg(format!(
                    r#"{{"token":"{token}","host":"host","pid":"1","started":"1700000000000","fence":"{n}","n":"{n}"{ending}}}"#
                ));
        }
        let ttl = RECORD_TTL.as_millis() as i64 - 3_600_000;
        p.cmd("PEXPIRE").arg(&keys.counts).arg(ttl);
    }
    if !p.is_empty() {
        p.exec(conn).unwrap();
    }
}

/// A value as the comparison reads it.
#[derive(Debug, Clone)]
enum Val {
    /// Compared digit run by digit run: a run of 13 digits (a time in ms) within 2 s, of 16
    /// (the clock in µs) within 2 s, any other exactly; the rest of the text exactly.
    Text(String),
    /// A key's expiry or a holder's lease in ms: within a second (negative: exactly).
    Ms(i64),
}

/// The text's runs of digits and of other characters, in order.
fn runs(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = s.as_bytes();
    for i in 1..=b.len() {
        if i == b.len() || b[i].is_ascii_digit() != b[i - 1].is_ascii_digit() {
            out.push(&s[start..i]);
            start = i;
        }
    }
    out
}

fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (runs(a), runs(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            let tolerance = match (x.len(), y.len()) {
                (13, 13) => 2000,
                (16, 16) => 2_000_000,
                _ => return x == y,
            };
            match (x.parse::<i64>(), y.parse::<i64>()) {
                (Ok(x), Ok(y)) => (x - y).abs() <= tolerance,
                _ => x == y,
            }
        })
}

impl PartialEq for Val {
    fn eq(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Text(a), Val::Text(b)) => same_text(a, b),
            (Val::Ms(a), Val::Ms(b)) if *a < 0 || *b < 0 => a == b,
            (Val::Ms(a), Val::Ms(b)) => (a - b).abs() <= 1000,
            _ => false,
        }
    }
}

fn text(s: impl ToString) -> Val {
    Val::Text(s.to_string())
}

/// A script's answer as [`Val`]s; an error reply by its text, the prefix taken out.
fn answer(reply: redis::RedisResult<Option<AcquireReply>>, prefix: &str) -> Vec<Val> {
    match reply {
        Err(e) => vec![text("error"), text(e.to_string().replace(prefix, ""))],
        Ok(None) => vec![text("unreadable")],
        Ok(Some(reply)) => match reply {
            AcquireReply::Acquired { fence, at_ms, slot } => {
                vec![text("acquired"), text(fence), text(at_ms), text(slot)]
            }
            AcquireReply::Busy { retry_in, why } => vec![
                text("busy"),
                Val::Ms(retry_in.map_or(-1, |d| d.as_millis() as i64)),
                text(format!("{why:?}")),
            ],
            other => vec![text(format!("{other:?}"))],
        },
    }
}

/// Every key under `prefix` (the prefix taken out): its type, its expiry and its contents.
fn dump(conn: &mut Connection, prefix: &str) -> BTreeMap<String, Vec<Val>> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(conn)
        .unwrap();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis::cmd("TYPE").arg(&key).query(conn).unwrap();
            let pttl: i64 = redis::cmd("PTTL").arg(&key).query(conn).unwrap();
            let items: Vec<String> = match kind.as_str() {
                "string" => vec![redis::cmd("GET").arg(&key).query(conn).unwrap()],
                "list" => redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query(conn)
                    .unwrap(),
                "zset" => redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(conn)
                    .unwrap(),
                "hash" => {
                    let all: BTreeMap<String, String> =
                        redis::cmd("HGETALL").arg(&key).query(conn).unwrap();
                    all.into_iter().flat_map(|(k, v)| [k, v]).collect()
                }
                other => panic!("{key} is a {other}"),
            };
            let vals = [text(&kind), Val::Ms(pttl)]
                .into_iter()
                .chain(items.into_iter().map(Val::Text))
                .collect();
            (key[prefix.len()..].to_owned(), vals)
        })
        .collect()
}

/// `keys` without our token's entries among the waiters (the registry, the queue, our own
/// wake list); a sorted set left empty goes, as Redis deletes one.
fn forget_our_waiting(keys: &mut BTreeMap<String, Vec<Val>>) {
    keys.remove(&format!("{{k}}:wake:{OURS}"));
    for set in ["{k}:waiting", "{k}:queue", "{k}:alive"] {
        let Some(vals) = keys.get_mut(set) else {
            continue;
        };
        // Type and expiry, then member and score pairs.
        let mut kept = vals[..2].to_vec();
        for pair in vals[2..].chunks(2) {
            if !matches!(&pair[0], Val::Text(who) if who == OURS) {
                kept.extend_from_slice(pair);
            }
        }
        if kept.len() == 2 {
            keys.remove(set);
        } else {
            *vals = kept;
        }
    }
}

/// Which path the client's step took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Path {
    /// take.lua took the free lock.
    Taken,
    /// take.lua turned us away.
    Busy,
    /// take.lua found our own token: the retry of a take whose reply was lost.
    OwnRetry,
    /// take.lua answered `several`; acquire.lua decided.
    Deferred,
    /// Refused with an error (a key that is not what redlock keeps there).
    Refused,
}

struct Copies {
    _server: RedisServer,
    conn: Connection,
    holder: Holder,
}

impl Copies {
    fn new() -> Copies {
        let server = RedisServer::start();
        let conn = server.conn();
        Copies {
            _server: server,
            conn,
            holder: Holder {
                host: "host".into(),
                pid: 2,
                command: "cmd".into(),
                started: 5,
            },
        }
    }

    fn acquire(&mut self, keys: &Keys, waited: bool) -> redis::RedisResult<Option<AcquireReply>> {
        let attempt = Attempt {
            token: OURS,
            ttl: TTL,
            min_interval: None,
            holder: &self.holder,
            entry: ENTRY,
            linger: LINGER,
            lifetime: LIFETIME,
            fair: false,
            waited,
            record: Kept::DEFAULT,
            run: RUN,
        };
        eval(&mut self.conn, keys, &Acquire { attempt })
    }

    fn take(&mut self, keys: &Keys, waited: bool) -> redis::RedisResult<Option<AcquireReply>> {
        let take = Take {
            token: OURS,
            ttl: TTL,
            holder: &self.holder,
            lifetime: LIFETIME,
            waited,
            record: Kept::DEFAULT,
            run: RUN,
        };
        eval(&mut self.conn, keys, &take)
    }

    /// `state` under both prefixes; the client's plain step on `fast:`, the general acquire on
    /// `general:`: the answers and every key must agree.
    fn case(&mut self, state: &State) -> Result<Path, TestCaseError> {
        let (fast, general) = (Keys::new("fast:", "k"), Keys::new("general:", "k"));
        let (now_ms, _) = now(&mut self.conn);
        setup(&mut self.conn, "fast:", &fast, state, now_ms);
        setup(&mut self.conn, "general:", &general, state, now_ms);
        let took = self.take(&fast, state.waited);
        let (path, fast_answer) = match &took {
            Ok(Some(AcquireReply::Several(t))) => {
                let one_holders = matches!(state.lock, LockKey::Free | LockKey::Ours)
                    || matches!(state.lock, LockKey::Other { .. });
                prop_assert!(!one_holders, "several ({}) for {:?}", t, state.lock);
                let then = self.acquire(&fast, state.waited);
                (Path::Deferred, answer(then, "fast:"))
            }
            Ok(Some(AcquireReply::Acquired { .. })) if state.lock == LockKey::Ours => {
                (Path::OwnRetry, answer(took, "fast:"))
            }
            Ok(Some(AcquireReply::Acquired { .. })) => (Path::Taken, answer(took, "fast:")),
            Ok(Some(AcquireReply::Busy { .. })) => (Path::Busy, answer(took, "fast:")),
            _ => (Path::Refused, answer(took, "fast:")),
        };
        let general_answer = answer(self.acquire(&general, state.waited), "general:");
        prop_assert_eq!(&fast_answer, &general_answer, "the answers ({:?})", path);
        let mut fast_keys = dump(&mut self.conn, "fast:");
        let mut general_keys = dump(&mut self.conn, "general:");
        if path == Path::Refused {
            // The general acquire leaves the waiters' records before it fails on the counter
            // (Redis keeps what a script wrote before its error); the plain take fails first.
            for keys in [&mut fast_keys, &mut general_keys] {
                forget_our_waiting(keys);
            }
        }
        prop_assert_eq!(
            fast_keys.keys().collect::<Vec<_>>(),
            general_keys.keys().collect::<Vec<_>>(),
            "the keys ({:?})",
            path
        );
        for (key, fast) in &fast_keys {
            prop_assert_eq!(fast, &general_keys[key], "{} ({:?})", key, path);
        }
        Ok(path)
    }
}

/// 128 random states, the plain step on one copy and the general acquire on the other (see the
/// module's doc for what must agree); every path is taken at least once.
#[test]
fn redis_plain_take_answers_as_the_general_acquire() {
    let copies = std::cell::RefCell::new(Copies::new());
    let paths = std::cell::RefCell::new(BTreeMap::<Path, u32>::new());
    let mut runner = TestRunner::new(Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&state(), |state| {
        let path = copies.borrow_mut().case(&state)?;
        *paths.borrow_mut().entry(path).or_default() += 1;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let paths = paths.into_inner();
    for path in [
        Path::Taken,
        Path::Busy,
        Path::OwnRetry,
        Path::Deferred,
        Path::Refused,
    ] {
        assert!(paths.contains_key(&path), "{path:?} never taken: {paths:?}");
    }
}

/// Our own take made again (its reply lost) finds a fencing counter past 2^53: it is given the
/// counter's digits, as the general acquire gives them. take.lua read it as a Lua number and
/// answered 123456789012345680 for 123456789012345679: not the token its first take gave.
#[test]
fn a_retried_take_answers_a_counter_past_2_53_exactly() {
    let mut copies = Copies::new();
    let state = State {
        fence: Fence::Huge,
        ..State::only(LockKey::Ours)
    };
    let keys = Keys::new("fast:", "k");
    let (now_ms, _) = now(&mut copies.conn);
    setup(&mut copies.conn, "fast:", &keys, &state, now_ms);
    match copies.take(&keys, false) {
        Ok(Some(AcquireReply::Acquired { fence, .. })) => {
            assert_eq!(fence.to_string(), HUGE_FENCE)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(copies.case(&state).unwrap(), Path::OwnRetry);
}

/// Whether `member` is in the sorted set `key`.
fn member(conn: &mut Connection, key: &str, member: &str) -> bool {
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query(conn)
        .unwrap();
    score.is_some()
}

/// A waiter that queued behind shared holders, was then turned away by one holder (so it
/// takes plainly again) and is let in by the plain take leaves the queue, as the general
/// acquire's take does. It stayed at the queue's head until its entry lapsed: the next release
/// woke it, gone, instead of the waiters on the shared wake list, and shared holders were told
/// to wait their turn behind it.
#[test]
fn a_waiter_let_in_by_the_plain_take_leaves_the_queue() {
    let mut copies = Copies::new();
    let state = State {
        waited: true,
        we_queued: true,
        other_queued: true,
        ..State::only(LockKey::Free)
    };
    let keys = Keys::new("fast:", "k");
    let (now_ms, _) = now(&mut copies.conn);
    setup(&mut copies.conn, "fast:", &keys, &state, now_ms);
    let taken = copies.take(&keys, true);
    assert!(
        matches!(taken, Ok(Some(AcquireReply::Acquired { .. }))),
        "{taken:?}"
    );
    for set in [&keys.queue, &keys.alive] {
        assert!(!member(&mut copies.conn, set, OURS), "{set}");
        assert!(member(&mut copies.conn, set, "w0"), "{set}");
    }
    assert_eq!(copies.case(&state).unwrap(), Path::Taken);
}

/// Our own take made again by a waiter (its reply lost, so it counts as having waited): the
/// general acquire lets it in and it leaves the waiters' records, as a take that finds the lock
/// free does, and as the plain take did already. acquire.lua left it in the registry of
/// waiters, and its own wake list, until they lapsed: `status` showed the holder waiting, and
/// a release woke a waiter when nobody waited.
#[test]
fn a_retried_take_leaves_the_waiters_records_on_the_general_path() {
    let mut copies = Copies::new();
    let state = State {
        waited: true,
        we_wait: Some(true),
        own_list: true,
        ..State::only(LockKey::Ours)
    };
    let keys = Keys::new("general:", "k");
    let (now_ms, _) = now(&mut copies.conn);
    setup(&mut copies.conn, "general:", &keys, &state, now_ms);
    let taken = copies.acquire(&keys, true);
    assert!(
        matches!(taken, Ok(Some(AcquireReply::Acquired { .. }))),
        "{taken:?}"
    );
    assert!(!member(&mut copies.conn, &keys.waiting, OURS));
    let own: bool = redis::cmd("EXISTS")
        .arg(format!("{}:{OURS}", keys.wake))
        .query(&mut copies.conn)
        .unwrap();
    assert!(!own);
    assert_eq!(copies.case(&state).unwrap(), Path::OwnRetry);
}
