//! The eviction preflight: a warning for a maxmemory-policy that can evict lock keys, silence
//! when CONFIG is renamed away (as on managed services), and no extra round trip.

use crate::common::*;

fn server(args: &[&str]) -> RedisServer {
    RedisServer::start_with(ServerOpts {
        args: args.iter().map(|a| a.to_string()).collect(),
        ..ServerOpts::default()
    })
}

#[test]
fn an_evicting_policy_gets_one_warning_and_the_run_goes_on() {
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let redis = server(&["--maxmemory-policy", policy]);
        redis.reset_stats();
        let out = run_timeout(run_sh(&redis, "job", &[], "true"), PATIENCE);
        out.assert_code(0);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.starts_with("redlock: warning: ")
                && out.stderr.contains(&format!("maxmemory-policy {policy}"))
                && out.stderr.contains("noeviction"),
            "{}",
            out.stderr
        );
        // One CONFIG GET, in the same round trip as the acquire.
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut redis.conn())
            .unwrap();
        assert!(stats.contains("cmdstat_config|get:calls=1,"), "{stats}");
        // -q: errors only.
        let out = run_timeout(run_sh(&redis, "job", &["-q"], "true"), PATIENCE);
        out.assert_code(0);
        assert_eq!(out.stderr, "");
    }
    // The default, noeviction, says nothing.
    let redis = RedisServer::start();
    let out = run_timeout(run_sh(&redis, "job", &[], "true"), PATIENCE);
    out.assert_code(0);
    assert_eq!(out.stderr, "");
}

#[test]
fn config_renamed_away_is_no_error() {
    let redis = server(&["--rename-command", "CONFIG", ""]);
    let dir = TempDir::new();
    let out = run_timeout(run_sh(&redis, "job", &[], &marker_script(&dir)), PATIENCE);
    out.assert_code(0);
    assert_eq!(out.stderr, "");
    assert!(dir.join("marker").exists());
    assert_eq!(redis.get(&lock_key("job")), None);
    // -v says it was not checked.
    let out = run_timeout(run_sh(&redis, "job", &["-v"], "true"), PATIENCE);
    out.assert_code(0);
    assert!(
        out.stderr.contains("could not read maxmemory-policy"),
        "{}",
        out.stderr
    );
}
