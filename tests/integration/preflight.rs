//! The eviction preflight: a warning for a maxmemory-policy that can evict lock keys, once a week
//! per lock (cron mails every line), every time from `status`; silence when CONFIG is renamed
//! away (as on managed services), and no extra round trip for a server that does not evict.

use crate::common::*;

fn server(args: &[&str]) -> RedisServer {
    RedisServer::start_with(ServerOpts {
        args: args.iter().map(|a| a.to_string()).collect(),
        ..ServerOpts::default()
    })
}

#[test]
fn an_evicting_policy_gets_one_warning_a_week_and_the_run_goes_on() {
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let redis = server(&["--maxmemory-policy", policy]);
        redis.reset_stats();
        let out = Redlock::run(&redis)
            .key("job")
            .sh("true")
            .status(0)
            .stderr_lines(1)
            .stderr_contains(&format!("maxmemory-policy {policy}"))
            .stderr_contains("noeviction")
            .output();
        assert!(
            out.stderr.starts_with("redlock: warning: "),
            "{}",
            out.stderr
        );
        // One CONFIG GET, in the same round trip as the acquire.
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut redis.conn())
            .unwrap();
        assert!(stats.contains("cmdstat_config|get:calls=1,"), "{stats}");
        // Recorded for a week, fleet-wide: the next runs of the lock say it only with -v.
        let warned: i64 = redis::cmd("TTL")
            .arg("redlock:{job}:warned")
            .query(&mut redis.conn())
            .unwrap();
        assert!(
            (7 * 24 * 3600 - 60..=7 * 24 * 3600).contains(&warned),
            "{warned}"
        );
        Redlock::run(&redis)
            .key("job")
            .sh("true")
            .status(0)
            .stderr("")
            .output();
        Redlock::run(&redis)
            .key("job")
            .arg("-v")
            .sh("true")
            .status(0)
            .stderr_contains(&format!("maxmemory-policy {policy}"))
            .output();
        // Another lock gets its own warning; -q: errors only.
        Redlock::run(&redis)
            .key("other")
            .arg("-q")
            .sh("true")
            .status(0)
            .stderr("")
            .output();
        // status says it every time, on stderr; its answer on stdout is unchanged.
        for _ in 0..2 {
            Redlock::admin("status", &redis)
                .key("job")
                .status(0)
                .stderr_contains(&format!("maxmemory-policy {policy}"))
                .stdout_contains("lock 'job'")
                .output();
        }
    }
    // The default, noeviction, says nothing.
    let redis = RedisServer::start();
    Redlock::run(&redis)
        .key("job")
        .sh("true")
        .status(0)
        .stderr("")
        .output();
    Redlock::admin("status", &redis)
        .key("job")
        .status(0)
        .stdout_contains("lock 'job' (redlock:{job}) is free")
        .stderr("")
        .output();
}

#[test]
fn config_renamed_away_is_no_error() {
    let redis = server(&["--rename-command", "CONFIG", ""]);
    let dir = TempDir::new();
    Redlock::run(&redis)
        .key("job")
        .sh(&marker_script(&dir))
        .status(0)
        .stderr("")
        .output();
    assert!(dir.join("marker").exists());
    assert_eq!(redis.get(&lock_key("job")), None);
    // -v says it was not checked.
    Redlock::run(&redis)
        .key("job")
        .arg("-v")
        .sh("true")
        .status(0)
        .stderr_contains("could not read maxmemory-policy")
        .output();
}
