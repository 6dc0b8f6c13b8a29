//! Benchmark floor: the barest Redis lock a shell job could be run under, for scripts/bench.sh to
//! measure beside redlock in the same run. One new connection per run, as redlock makes; one
//! script takes the lock and a fencing token (`SET NX PX`, `INCR`), the command runs, one script
//! gives the lock back if it is still ours (`GET`, compare, `DEL`). No renewal, no waiting, no
//! record, no signals: what a lock costs Redis before any feature.
//!
//! Usage: `bare_lock URL KEY [COMMAND [ARGS...]]`. Exit 75 when the lock is held, 69 when Redis
//! fails, otherwise the command's status (0 without a command). The scripts are run by
//! `redis::Script`, EVALSHA as redlock does (loaded once into the script cache).

use std::process::{Command, ExitCode};

use redis::Script;

/// Take the lock for ARGV[2] ms and return a fencing token, or nil when it is held.
const ACQUIRE: &str = "\
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false";

/// Delete the lock if it still holds our token.
const RELEASE: &str = "\
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(key)) = (args.next(), args.next()) else {
        eprintln!("usage: bare_lock URL KEY [COMMAND [ARGS...]]");
        return ExitCode::from(64);
    };
    let command: Vec<String> = args.collect();
    match run(&url, &key, &command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("bare_lock: {e}");
            ExitCode::from(69)
        }
    }
}

fn run(url: &str, key: &str, command: &[String]) -> redis::RedisResult<u8> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    let token = uuid::Uuid::new_v4().to_string();
    let fence: Option<i64> = Script::new(ACQUIRE)
        .key(key)
        .key(format!("{key}:fence"))
        .arg(&token)
        .arg(30_000)
        .invoke(&mut con)?;
    let Some(fence) = fence else {
        return Ok(75);
    };
    let code = match command.split_first() {
        None => 0,
        Some((program, args)) => match Command::new(program)
            .args(args)
            .env("REDLOCK_FENCING_TOKEN", fence.to_string())
            .status()
        {
            Ok(status) => status.code().map_or(128, |c| c as u8),
            Err(e) => {
                eprintln!("bare_lock: {program}: {e}");
                127
            }
        },
    };
    let _: i64 = Script::new(RELEASE).key(key).arg(&token).invoke(&mut con)?;
    Ok(code)
}
