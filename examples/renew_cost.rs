//! What `--min-replicas` and `--fsync` add to a request: the round trip of redlock's acquire and
//! extend scripts alone, and of the same script pipelined with the wait redlock sends beside it
//! (`WAIT 1 <ms>` for `--min-replicas 1`, `WAITAOF 1 0 <ms>` for `--fsync`), taking turns so
//! that drift weighs on both alike. The scripts go through the client's own typed boundary
//! (`redlock::boundary`), as redlock sends them.
//!
//! Usage: renew_cost <redis-url> wait|waitaof [rounds]     (scripts/bench-renewal.sh runs it)

use std::time::{Duration, Instant};

use redlock::boundary::{Acquire, Attempt, Extend, Holder, Kept, Keys, Lost, send};

const TTL: Duration = Duration::from_secs(30);
/// The wait's timeout: what redlock gives it at the default ttl (ttl/10, at most 1 s).
const WAIT_MS: u64 = 1000;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: renew_cost <redis-url> wait|waitaof [rounds]";
    let url = args.next().expect(usage);
    let (wait, beside) = match args.next().as_deref() {
        Some("wait") => ("WAIT 1", redis::cmd("WAIT").arg(1).arg(WAIT_MS).clone()),
        Some("waitaof") => (
            "WAITAOF 1 0",
            redis::cmd("WAITAOF").arg(1).arg(0).arg(WAIT_MS).clone(),
        ),
        _ => panic!("{usage}"),
    };
    let rounds: usize = args.next().map_or(2000, |r| r.parse().expect("rounds"));
    let mut conn = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("connecting");
    let keys = Keys::new("redlock:", "bench");
    let holder = Holder {
        host: "bench".into(),
        pid: 1,
        command: "true".into(),
        started: 0,
    };
    let acquire = Acquire {
        attempt: Attempt {
            token: "bench-token",
            ttl: TTL,
            min_interval: None,
            holder: &holder,
            entry: Duration::from_secs(5),
            linger: Duration::from_millis(100),
            lifetime: Duration::from_secs(20),
            fair: false,
            waited: false,
            record: Kept::DEFAULT,
            run: r#"{"token":"bench-token""#,
        },
    };
    let extend = Extend {
        token: "bench-token",
        ttl: TTL,
        slot: "",
        lost: Lost::LOCK_LOST,
        record: Kept::DEFAULT,
    };
    let take = |conn: &mut redis::Connection, beside: Option<&redis::Cmd>| {
        let _: () = redis::cmd("DEL").arg(&keys.lock).query(conn).unwrap();
        let (reply, _) = send(conn, &keys, &acquire, beside, true).expect("acquire");
        reply.expect("acquire's reply");
    };
    let renew = |conn: &mut redis::Connection, beside: Option<&redis::Cmd>| {
        let (reply, other) = send(conn, &keys, &extend, beside, true).expect("extend");
        reply.expect("extend's reply");
        if beside.is_some() {
            assert!(other.is_some(), "no answer to the wait");
        }
    };
    // Once each first: the scripts in the server's cache, the lock held for the extends.
    take(&mut conn, None);
    renew(&mut conn, None);
    let (mut taken, mut taken_with, mut renewed, mut renewed_with) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let timed = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed()
    };
    for _ in 0..rounds {
        taken.push(timed(&mut || take(&mut conn, None)));
        taken_with.push(timed(&mut || take(&mut conn, Some(&beside))));
        renewed.push(timed(&mut || renew(&mut conn, None)));
        renewed_with.push(timed(&mut || renew(&mut conn, Some(&beside))));
    }
    let show = |name: String, mut d: Vec<Duration>| {
        d.sort();
        let at = |q: f64| d[((d.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        println!(
            "{name:<24} p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms",
            at(0.5),
            at(0.9),
            at(0.99)
        );
        at(0.5)
    };
    let a = show("acquire".into(), taken);
    let aw = show(format!("acquire + {wait}"), taken_with);
    let e = show("extend".into(), renewed);
    let ew = show(format!("extend + {wait}"), renewed_with);
    println!(
        "{wait} adds {:.3} ms to an acquire and {:.3} ms to an extend at the median ({rounds} rounds each)",
        aw - a,
        ew - e
    );
}
