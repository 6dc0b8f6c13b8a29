//! Passwords off the command line: --password-file, REDLOCK_PASSWORD and their precedence, wrong
//! or missing ones (69 / 64, never printed), and docs/security.md's least-privilege ACL user: its
//! line names exactly the commands the code sends, and the user, created from that line, drives
//! a held lock, a woken waiter, --fair, --min-interval, status, list, history, check and release
//! --force, --fsync on Valkey, --min-replicas beside a replica, and a Cluster's redirects and
//! `list`. A permission it lacks is named in the message.

use std::path::Path;

use super::snapshots::assert_snapshot;
use super::topology::{Cluster, replica_of};
use crate::common::*;
const PW: &str = "s3cret-pa55word";
const WRONG: &str = "wr0ng-pa55word";

fn server() -> RedisServer {
    RedisServer::start_with(ServerOpts {
        password: Some(PW.into()),
        ..ServerOpts::default()
    })
}

#[test]
fn password_file_and_variable_work_in_order_of_precedence() {
    let dir = TempDir::new();
    let redis = server();
    let url = redis.url_without_password();
    let good = dir.join("good");
    let bad = dir.join("bad");
    write_file(&good, &format!("{PW}\n"), 0o600);
    write_file(&bad, &format!("{WRONG}\r\n"), 0o600);
    let good = good.to_str().unwrap();
    let bad = bad.to_str().unwrap();
    let wrong_url = format!("redis://:{WRONG}@127.0.0.1:{}", redis.port());
    // (url, --password-file, REDLOCK_PASSWORD_FILE, REDLOCK_PASSWORD, expected status)
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        i32,
    );
    let cases: [Case; 8] = [
        (&url, Some(good), None, None, 0),
        (&url, None, Some(good), None, 0),
        (&url, None, None, Some(PW), 0),
        // The file wins over the variable, and both win over the URL's password.
        (&url, Some(good), None, Some(WRONG), 0),
        (&url, Some(bad), None, Some(PW), 69),
        (&wrong_url, None, None, Some(PW), 0),
        (&wrong_url, Some(good), None, None, 0),
        // The flag wins over its variable.
        (&url, Some(good), Some(bad), None, 0),
    ];
    for (url, flag, file_env, pw_env, want) in cases {
        let mut redlock = Redlock::run_at(url).key("pw").arg("-v");
        if let Some(file) = flag {
            redlock = redlock.args(["--password-file", file]);
        }
        if let Some(file) = file_env {
            redlock = redlock.env("REDLOCK_PASSWORD_FILE", file);
        }
        if let Some(pw) = pw_env {
            redlock = redlock.env("REDLOCK_PASSWORD", pw);
        }
        let redlock = redlock.sh("echo ran").status(want);
        let out = if want == 0 {
            // -v: its lifecycle lines, checked for the passwords below.
            redlock.stdout("ran\n").stderr_prefixed().output()
        } else {
            redlock.stdout("").stderr_lines(1).output()
        };
        out.assert_no_secret(&[PW, WRONG]);
    }
    assert_eq!(redis.get(&lock_key("pw")), None);
}

#[test]
fn a_missing_or_empty_password_file_is_a_usage_error() {
    let dir = TempDir::new();
    let redis = server();
    let empty = dir.join("empty");
    write_file(&empty, "\n", 0o600);
    let unreadable = dir.join("dir");
    std::fs::create_dir(&unreadable).unwrap();
    for file in [dir.join("missing"), empty, unreadable] {
        let file = file.to_str().unwrap();
        Redlock::run_at(&redis.url_without_password())
            .key("pw")
            .args(["--password-file", file])
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains(file)
            .stderr_lines(1)
            .output();
        assert!(!dir.join("marker").exists());
    }
    assert!(redis.all_keys().is_empty());
}

/// `--password-file <(...)`, the shell's way to hand a secret over with no file on disk: the
/// pipe is read until its writer closes it. A FIFO nobody writes to is given up after 5 s, a
/// usage error, and nothing runs.
#[test]
fn a_password_through_a_pipe_is_read() {
    let dir = TempDir::new();
    let redis = server();
    // "$1" is the subcommand (run); the option goes after it.
    let substitute = r#"exec "$0" "$1" --password-file <(printf '%s\n' "$PW") "${@:2}""#;
    Redlock::run_at(&redis.url_without_password())
        .through(["bash", "-c", substitute])
        .env("PW", PW)
        .key("pw")
        .sh("echo ran")
        .stdout("ran\n")
        .output()
        .assert_no_secret(&[PW]);
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let out = Redlock::run_at(&redis.url_without_password())
        .key("pw")
        .arg("--password-file")
        .arg(&fifo)
        .sh(&marker_script(&dir))
        .status(64)
        .stderr(&format!(
            "redlock: --password-file {}: a pipe that was not written and closed within 5s\n",
            fifo.display()
        ))
        .output();
    assert!(
        out.elapsed >= std::time::Duration::from_secs(4),
        "{:?}",
        out.elapsed
    );
    assert!(!dir.join("marker").exists());
    // The first run's record of runs and fencing counter stay; the lock is free.
    assert_eq!(redis.get(&lock_key("pw")), None);
}

/// The `ACL SETUSER` lines of docs/security.md, the one for Redis 7.2+ and Valkey 8 first, then
/// the one for Redis 7.0 and 7.1, with the password placeholder filled in: the rules after
/// `ACL`.
fn documented_acl_lines(password: &str) -> [Vec<String>; 2] {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).unwrap();
    let lines: Vec<Vec<String>> = page
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("ACL SETUSER redlock "))
        .map(|line| {
            line.split_whitespace()
                .skip(1)
                .map(|word| word.replace(">PASSWORD", &format!(">{password}")))
                .collect()
        })
        .collect();
    let [newer, older] = <[Vec<String>; 2]>::try_from(lines)
        .expect("docs/security.md documents two ACL SETUSER lines");
    // The same line, but for the command Redis 7.0 does not know.
    let without: Vec<String> = newer.iter().filter(|r| *r != "+waitaof").cloned().collect();
    assert_eq!(
        older, without,
        "the Redis 7.0 line is the other without +waitaof"
    );
    assert_ne!(newer, older);
    [newer, older]
}

/// The rules of the documented line of the newest servers (every command redlock may send).
fn documented_acl_line(password: &str) -> Vec<String> {
    let [newer, _] = documented_acl_lines(password);
    newer
}

/// Whether redlock said that the user lacked a permission (the server's NOPERM, as redlock words
/// it or not).
fn denied(stderr: &str) -> bool {
    stderr.contains("NOPERM") || stderr.contains("does not let this user")
}

/// `ACL SETUSER` with the documented line for `server`, as pasted: the Redis 7.0 line on a
/// server without WAITAOF (Redis before 7.2, whose ACL SETUSER refuses a command it does not
/// know), the other everywhere else.
fn create_documented_user(server: &RedisServer) {
    let mut con = server.conn();
    let waitaof: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg(&["INFO", "WAITAOF"])
        .query(&mut con)
        .unwrap();
    let known = !matches!(waitaof.as_slice(), [redis::Value::Nil]);
    let [newer, older] = documented_acl_lines(PW);
    let line = if known { newer } else { older };
    redis::cmd("ACL").arg(line).exec(&mut con).unwrap();
}

/// Every command redlock sends to a data node, as ACL rules name them (`get`, `config|get`):
/// the `cmd("X")` of src/ outside its tests (with the subcommand of CLUSTER and CONFIG), the
/// EVALSHA and EVAL a script goes as, and every `redis.call` and `redis.pcall` of the Lua
/// scripts (ACLs apply inside scripts too).
fn commands_the_code_sends() -> Vec<String> {
    fn files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, found);
            } else {
                found.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut paths,
    );
    let mut commands = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let ext = path.extension().and_then(|e| e.to_str());
        if ext == Some("lua") {
            for call in ["redis.call('", "redis.pcall('"] {
                for rest in text.split(call).skip(1) {
                    let name = rest.split('\'').next().unwrap_or_default();
                    commands.push(name.to_lowercase());
                }
            }
        } else if ext == Some("rs") {
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for call in ["cmd(\"", "round(\""] {
                for rest in code.split(call).skip(1) {
                    let name = rest.split('"').next().unwrap_or_default().to_lowercase();
                    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphabetic()) {
                        continue;
                    }
                    let command = if ["cluster", "config", "info"].contains(&name.as_str()) {
                        let sub = rest.split(".arg(\"").nth(1).unwrap_or_default();
                        let sub = sub.split('"').next().unwrap_or_default().to_lowercase();
                        format!("{name}|{sub}")
                    } else {
                        name
                    };
                    commands.push(command);
                }
            }
        }
    }
    commands.sort();
    commands.dedup();
    commands
}

/// The line allows what the code sends and nothing more, but for the commands no ACL governs
/// (AUTH and HELLO, which a connection sends to log in), SENTINEL (sent to the sentinels, whose
/// users are their own) and PING (the redis crate's connection check, which redlock never
/// calls).
#[test]
fn the_documented_acl_line_allows_exactly_what_redlock_sends() {
    let line = documented_acl_line(PW);
    let allowed: Vec<String> = line
        .iter()
        .filter_map(|rule| rule.strip_prefix('+'))
        .map(str::to_owned)
        .collect();
    let sent = commands_the_code_sends();
    assert!(sent.len() >= 30, "{sent:?}");
    let exempt = ["auth", "hello", "sentinel", "ping"];
    let missing: Vec<&String> = sent
        .iter()
        .filter(|c| !exempt.contains(&c.as_str()) && !allowed.contains(c))
        .collect();
    let unused: Vec<&String> = allowed.iter().filter(|c| !sent.contains(c)).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "docs/security.md's ACL line lacks {missing:?} and allows {unused:?}, which nothing sends"
    );
}

/// `--fsync` on Valkey (an append-only file, `appendfsync always`) with the documented user; and
/// a user without `+waitaof` is told which permission it lacks, not that the server is too old.
#[test]
fn the_documented_acl_user_can_fsync_on_valkey() {
    let valkey = RedisServer::start_with(ServerOpts {
        binary: Some(valkey_binary()),
        persist: true,
        ..ServerOpts::default()
    });
    create_documented_user(&valkey);
    let url = format!("redis://redlock@127.0.0.1:{}", valkey.port());
    // Renewed once, with WAITAOF behind the renewal too.
    let out = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", PW)
        .key("fsynced")
        .ttl("1s")
        .arg("--fsync")
        .sh("sleep 0.5; echo ran")
        .stdout("ran\n")
        .status(0)
        .output();
    assert!(!denied(&out.stderr), "{}", out.stderr);

    let mut con = valkey.conn();
    redis::cmd("ACL")
        .arg(&["SETUSER", "redlock", "-waitaof"])
        .exec(&mut con)
        .unwrap();
    let out = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", PW)
        .key("k")
        .arg("--fsync")
        .sh("echo ran")
        .stdout("")
        .status(69)
        .stderr_lines(1)
        .output();
    let port = format!(":{}", valkey.port());
    assert_snapshot(
        "fsync-denied.stderr",
        out.stderr.trim(),
        &[(&port, ":6379")],
    );
    assert!(
        out.stderr
            .contains("no permissions to run the 'waitaof' command")
            && !out.stderr.contains("Redis 7.2"),
        "{}",
        out.stderr
    );
    assert_eq!(valkey.get(&lock_key("k")), None, "not released");
}

/// `--min-replicas 1` beside a replica, the documented user on the master: the acquire's and
/// every renewal's WAIT are allowed.
#[test]
fn the_documented_acl_user_can_wait_for_a_replica() {
    let master = RedisServer::start();
    let _replica = replica_of(&master);
    create_documented_user(&master);
    let url = format!("redis://redlock@127.0.0.1:{}", master.port());
    let out = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", PW)
        .key("replicated")
        .ttl("5s")
        .args(["--min-replicas", "1", "-vv"])
        .sh("sleep 2; echo ran")
        .stdout("ran\n")
        .status(0)
        .stderr_prefixed()
        .output();
    assert!(out.stderr.contains("renewed lock"), "{}", out.stderr);
    assert!(!denied(&out.stderr), "{}", out.stderr);
}

/// A Cluster with the documented user on every node: a MOVED from a seed that does not own the
/// lock's slot, renewals through ASK (ASKING) while the slot migrates, and `list` (CLUSTER
/// SLOTS, then a SCAN of every master).
#[test]
fn the_documented_acl_user_can_follow_cluster_redirects() {
    let cluster = Cluster::start();
    for node in &cluster.nodes {
        create_documented_user(node);
    }
    let dir = TempDir::new();
    let key = "clustered";
    let slot = cluster.slot(&lock_key(key));
    let from = cluster.owner(slot, 0);
    let to = (from + 1) % 3;
    // The one seed does not own the slot: its MOVED leads to the owner.
    let url = format!(
        "redis+cluster://redlock@127.0.0.1:{}",
        cluster.nodes[to].port()
    );
    let (holder, token) = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", PW)
        .key(key)
        .ttl("3s")
        .arg("-vv")
        .hold(&dir, "a");
    let list = Redlock::admin_at("list", &url)
        .env("REDLOCK_PASSWORD", PW)
        .status(0)
        .stdout_contains(key)
        .output();
    assert!(!denied(&list.stderr), "{}", list.stderr);

    // Mid-migration the keys are on `to` and `from` answers ASK: the next renewal goes there
    // after ASKING, and `to` renews it or answers TRYAGAIN (some of the script's keys are not
    // there); without `+asking` it would be NOPERM.
    let renewed = |p: &Proc| p.stderr_so_far().matches("renewed lock").count();
    let before = renewed(&holder);
    cluster.begin_migration(slot, from, to);
    wait_until(PATIENCE, "a renewal through ASK", || {
        let so_far = holder.stderr_so_far();
        renewed(&holder) > before || so_far.contains("TRYAGAIN") || denied(&so_far)
    });
    let so_far = holder.stderr_so_far();
    assert!(!denied(&so_far), "{so_far}");
    // Once the slot is `to`'s, renewals follow MOVED there.
    cluster.finish_migration(slot, from, to);
    let before = renewed(&holder);
    wait_until(PATIENCE, "a renewal on the new owner", || {
        renewed(&holder) > before
    });
    assert_eq!(
        cluster.nodes[to].get(&lock_key(key)).as_deref(),
        Some(&*token)
    );
    touch(&dir.join("a.go"));
    let out = holder.finish();
    out.assert_code(0);
    assert!(!denied(&out.stderr), "{}", out.stderr);
}

#[test]
fn the_documented_acl_user_can_do_everything_redlock_does() {
    let dir = TempDir::new();
    let redis = RedisServer::start();
    create_documented_user(&redis);
    let url = format!("redis://redlock@127.0.0.1:{}", redis.port());
    // The user's name is in the URL, its password in the environment.
    let run = |key: &str| Redlock::run_at(&url).key(key).env("REDLOCK_PASSWORD", PW);
    let admin = |sub: &str| Redlock::admin_at(sub, &url).env("REDLOCK_PASSWORD", PW);
    let mut outputs = Vec::new();

    // A holder with a long lease (renewed), and a waiter that only a wake-up can let in before
    // its --wait runs out: without one it would retry after min(ttl, 20s) > 10s.
    let (holder, _) = run("acl").ttl("30s").hold(&dir, "a");
    let waiter = run("acl").wait("10s").ttl("30s").sh("echo waited").spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") >= 1
    });
    let status = admin("status")
        .key("acl")
        .status(0)
        .stdout_contains("is held")
        .output();
    let list = admin("list").any_stdout().output();
    assert!(list.stdout.starts_with("acl\t"), "{}", list.stdout);
    touch(&dir.join("a.go"));
    let out = holder.finish();
    out.assert_code(0);
    outputs.push(out);
    let out = waiter.finish();
    out.assert_code(0);
    assert_eq!(out.stdout, "waited\n");
    outputs.push(out);

    // Every check redlock makes is allowed: at -v nothing says one was skipped (ROLE: is it a
    // master?; CONFIG GET: the eviction policy).
    let out = run("checked")
        .arg("-v")
        .sh("true")
        .stderr_prefixed()
        .output();
    assert!(!out.stderr.contains("not checked"), "{}", out.stderr);
    outputs.push(out);

    // --fair and --min-interval: a success is recorded, the next run skips.
    let cron = || run("cron").args(["--fair", "--min-interval", "1h"]);
    outputs.push(cron().sh("true").status(0).output());
    outputs.push(cron().sh("echo ran").status(75).stdout("").output());

    // release --force breaks a holder's lock; the holder notices and stops.
    let (holder, _) = run("forced").ttl("1s").hold(&dir, "b");
    let out = admin("release")
        .key("forced")
        .arg("--force")
        .any_stdout()
        .output();
    assert!(
        out.stdout.starts_with("released lock 'forced'"),
        "{}",
        out.stdout
    );
    outputs.push(out);
    let out = holder.finish();
    out.assert_code(76);
    outputs.push(out);

    // The record of runs those runs kept, read back: every run, the last one lost its lock.
    let history = admin("history").key("forced").any_stdout().output();
    assert!(
        history.stdout.contains("\tlock_lost (exit 76)\t"),
        "{}",
        history.stdout
    );
    outputs.push(history);
    outputs.push(
        admin("check")
            .key("cron")
            .args(["--max-age", "1h"])
            .stdout_contains("OK: lock 'cron' last succeeded")
            .output(),
    );

    for out in outputs.iter().chain([&status, &list]) {
        assert!(!denied(&out.stderr), "{}", out.stderr);
        out.assert_no_secret(&[PW, WRONG]);
    }
    let keys = redis.all_keys();
    assert!(
        keys.iter().all(|k| k.starts_with("db0:redlock:")),
        "keys: {keys:?}"
    );
}

/// The documented user may ask `INFO server` (`+info|server`), so a quorum's nodes are told
/// apart: one server under two names is refused (64). A user without it still locks on a
/// quorum, and `-v` says that check was skipped.
#[test]
fn a_quorum_tells_its_nodes_apart_with_the_documented_user_and_runs_without_it() {
    let dir = TempDir::new();
    let servers = start_servers(2);
    for server in &servers {
        create_documented_user(server);
    }
    let (a, b) = (&servers[0], &servers[1]);
    let at = |host: &str, server: &RedisServer| format!("redis://redlock@{host}:{}", server.port());
    Redlock::sub("run")
        .url(&at("127.0.0.1", a))
        .url(&at("localhost", a))
        .url(&at("127.0.0.1", b))
        .env("REDLOCK_PASSWORD", PW)
        .key("acl")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains("are one Redis server")
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    for server in &servers {
        redis::cmd("ACL")
            .arg(&["SETUSER", "redlock", "-info"])
            .exec(&mut server.conn())
            .unwrap();
    }
    let out = Redlock::sub("run")
        .url(&at("127.0.0.1", a))
        .url(&at("127.0.0.1", b))
        .env("REDLOCK_PASSWORD", PW)
        .key("acl")
        .arg("-v")
        .sh(&marker_script(&dir))
        .stderr_prefixed()
        .output();
    assert!(dir.join("marker").exists());
    for server in [a, b] {
        let said = format!(
            "could not ask Redis at 127.0.0.1:{} which server it is (NOPERM",
            server.port()
        );
        assert!(out.stderr.contains(&said), "{}", out.stderr);
    }
}
