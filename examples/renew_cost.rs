//! What `--min-replicas` adds to a renewal: the round trip of redlock's extend script alone,
//! and of the same script pipelined with `WAIT 1 <ms>` as redlock sends it, against a master
//! that has a replica. Alternates the two so that drift weighs on both alike.
//!
//! Usage: renew_cost <redis-url-of-master> [rounds]     (scripts/bench-renewal.sh runs it)

use std::time::{Duration, Instant};

use redis::Value;

const EXTEND: &str = include_str!("../src/lock/scripts/extend.lua");
const KEYS: [&str; 7] = [
    "redlock:{bench}",
    "redlock:{bench}:fence",
    "redlock:{bench}:wake",
    "redlock:{bench}:queue",
    "redlock:{bench}:alive",
    "redlock:{bench}:holder",
    "redlock:{bench}:done",
];

fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: renew_cost <redis-url> [rounds]");
    let rounds: usize = args.next().map_or(2000, |r| r.parse().expect("rounds"));
    let mut conn = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("connecting");
    let sha = redis::Script::new(EXTEND).get_hash().to_owned();
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(EXTEND)
        .exec(&mut conn)
        .unwrap();
    redis::cmd("SET")
        .arg(KEYS[0])
        .arg("token")
        .arg("PX")
        .arg(30_000)
        .exec(&mut conn)
        .unwrap();
    let extend = || {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&sha)
            .arg(KEYS.len())
            .arg(&KEYS[..])
            .arg("token")
            .arg(30_000);
        cmd
    };
    let (mut alone, mut waited) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let r: i64 = extend().query(&mut conn).unwrap();
        alone.push(t.elapsed());
        assert_eq!(r, 1);

        let t = Instant::now();
        let mut pipe = redis::pipe();
        pipe.add_command(extend()).cmd("WAIT").arg(1).arg(1000);
        let (r, acked): (i64, i64) = pipe.query(&mut conn).unwrap();
        waited.push(t.elapsed());
        assert_eq!(
            (r, acked),
            (1, 1),
            "the master needs a replica that follows it"
        );
    }
    let _: Value = redis::cmd("DEL").arg(KEYS[0]).query(&mut conn).unwrap();
    let show = |name: &str, mut d: Vec<Duration>| {
        d.sort();
        let at = |q: f64| d[((d.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        println!(
            "{name:<22} p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms",
            at(0.5),
            at(0.9),
            at(0.99)
        );
        at(0.5)
    };
    let a = show("extend", alone);
    let w = show("extend + WAIT 1", waited);
    println!(
        "WAIT adds {:.3} ms at the median ({rounds} rounds each)",
        w - a
    );
}
