//! What redlock says of a server that turns it away or answers oddly, and of keys at a lock's
//! name that it did not write: a Redis at `maxclients` (its reason shown, retried under
//! `--wait`), a plain-text Sentinel behind `rediss+sentinel://`, a reply nested too deeply, a
//! socket that wants a password, a list at the lock key, a fencing counter that is not one;
//! and durations rounded as a person reads them. Each is one `redlock: ` line, nothing runs and
//! nothing stays locked.

use std::time::Duration;

use crate::common::*;
use crate::integration::fake::{Answer, FakeServer, Then};
use crate::integration::snapshots::assert_snapshot;
use crate::integration::topology::SentinelSetup;

/// One `redlock run` of the lock `k` against `url`: exit `code`, one line on stderr, nothing
/// run; the line.
#[track_caller]
fn one_line(url: &str, code: i32) -> String {
    let dir = TempDir::new();
    let out = Redlock::run_at(url)
        .key("k")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(code)
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists(), "{url}: the command ran");
    out.stderr.trim().to_owned()
}

#[test]
fn a_redis_at_maxclients_is_named_with_its_reason_and_retried() {
    for password in [None, Some("mc-s3cret")] {
        let redis = RedisServer::start_with(ServerOpts {
            password: password.map(str::to_owned),
            args: vec!["--maxclients".into(), "1".into()],
            ..ServerOpts::default()
        });
        // The one client it takes.
        let held = redis.conn();
        let said = format!(
            "cannot reach Redis at 127.0.0.1:{}: it closed the connection at once, saying: ERR \
             max number of clients reached",
            redis.port()
        );
        let line = one_line(&redis.url(), 69);
        assert_eq!(line, format!("redlock: cannot take lock 'k': {said}"));
        if password.is_none() {
            let port = format!(":{}", redis.port());
            assert_snapshot("maxclients.stderr", &line, &[(&port, ":6379")]);
        }
        Redlock::admin("status", &redis)
            .key("k")
            .status(69)
            .stderr(&format!("redlock: cannot read lock 'k': {said}\n"))
            .output();
        // Worth waiting for, as an unreachable Redis is: a client may leave.
        let out = Redlock::run(&redis)
            .key("k")
            .wait("1s")
            .command(["true"])
            .status(69)
            .stderr_contains("retrying until the wait ends (--wait 1s)")
            .stderr_contains(&said)
            .stderr_lines(2)
            .output();
        assert!(out.elapsed >= Duration::from_secs(1), "{:?}", out.elapsed);
        drop(held);
        assert!(redis.all_keys().is_empty(), "{:?}", redis.all_keys());
    }
}

#[test]
fn rediss_sentinel_to_a_plain_sentinel_says_it_speaks_plain_text() {
    let setup = SentinelSetup::start();
    let port = setup.sentinels[0].port;
    let line = one_line(&format!("rediss+sentinel://127.0.0.1:{port}/mymaster"), 69);
    let shown = format!(":{port}");
    assert_snapshot(
        "plain-sentinel-as-rediss.stderr",
        &line,
        &[(&shown, ":26379")],
    );
    assert_eq!(
        line,
        format!(
            "redlock: cannot take lock 'k': the Redis Sentinel at 127.0.0.1:{port} speaks plain \
             text, not TLS: use redis+sentinel://127.0.0.1:{port}/mymaster"
        )
    );
    // Every sentinel of the URL, and its service, in the URL to use.
    let other = setup.sentinels[1].port;
    let line = one_line(
        &format!("rediss+sentinel://127.0.0.1:{port},127.0.0.1:{other}/mymaster"),
        69,
    );
    assert!(
        line.ends_with(&format!(
            "use redis+sentinel://127.0.0.1:{port},127.0.0.1:{other}/mymaster"
        )),
        "{line}"
    );
}

#[test]
fn a_reply_nested_too_deeply_is_said_in_one_line_without_the_parsers_words() {
    let deep = "*1\r\n".repeat(200_000).into_bytes();
    let server = FakeServer::start(Answer::Reply {
        reply: deep,
        then: Then::Close,
    });
    let line = one_line(&server.url(), 69);
    let port = format!(":{}", server.addr().rsplit(':').next().unwrap());
    assert_snapshot("deep-reply.stderr", &line, &[(&port, ":6379")]);
    assert_eq!(
        line,
        format!(
            "redlock: cannot take lock 'k': Redis at {} sent a reply redlock cannot read (not \
             one Redis gives: malformed, of another type, or nested too deeply): is it a Redis \
             server? check the port",
            server.addr()
        )
    );
}

#[test]
fn a_socket_that_wants_a_password_gets_the_socket_urls_form() {
    let redis = RedisServer::start_with(ServerOpts {
        unix: true,
        password: Some("sock-s3cret".into()),
        ..ServerOpts::default()
    });
    let sock = redis.socket_path().display().to_string();
    let line = one_line(&redis.url_without_password(), 69);
    assert_eq!(
        line,
        format!(
            "redlock: cannot take lock 'k': Redis at {sock} needs a password: set \
             REDLOCK_PASSWORD_FILE (or --password-file), REDLOCK_PASSWORD, or \
             redis+unix://{sock}?pass=PASSWORD"
        )
    );
    // The form it names works.
    Redlock::run_at(&format!("redis+unix://{sock}?pass=sock-s3cret"))
        .key("k")
        .command(["true"])
        .output();
}

#[test]
fn a_list_at_the_lock_key_is_one_clean_line() {
    let redis = RedisServer::start();
    let _: () = redis::cmd("RPUSH")
        .arg(lock_key("k"))
        .arg("the")
        .arg("list")
        .query(&mut redis.conn())
        .unwrap();
    let line = one_line(&redis.url(), 64);
    assert_snapshot("list-at-lock-key.stderr", &line, &[]);
    assert_eq!(
        line,
        "redlock: lock 'k': its key is a Redis list that redlock did not make; not running the \
         command (`redlock release --force` on this key removes it)"
    );
    Redlock::admin("status", &redis)
        .key("k")
        .status(69)
        .stderr(
            "redlock: cannot read lock 'k': its key redlock:{k} is a Redis list that redlock did \
             not make (`redlock release --force` on this key removes it)\n",
        )
        .output();
}

/// `value` put at the lock `k`'s fencing counter, as a string, or as a hash when None.
fn spoil_counter(redis: &RedisServer, value: Option<&str>) {
    let key = fence_key("k");
    redis.del(&key);
    let cmd = match value {
        Some(value) => redis::cmd("SET").arg(&key).arg(value).clone(),
        None => redis::cmd("HSET").arg(&key).arg("f").arg("v").clone(),
    };
    let _: () = cmd.query(&mut redis.conn()).unwrap();
}

#[test]
fn a_fencing_counter_redlock_did_not_write_is_said_and_never_lowered() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let remedy = REMEDY;
    let addr = format!("127.0.0.1:{}", redis.port());
    // A hash there the scripts' guard names, as any key of another kind beside the lock.
    let guarded = format!(
        "Redis at {addr} holds a hash at redlock:{{k}}:fence, where redlock keeps a key of its \
         own: delete that key if nothing else uses it"
    );
    let said = "the fencing counter redlock:{k}:fence holds a string that is not a whole \
                number, which redlock did not write";
    for value in [Some("notanumber"), None] {
        spoil_counter(&redis, value);
        // `run`: refused, the lock it took given back at once, the counter untouched.
        for limit in [None, Some("2")] {
            let run = Redlock::run(&redis).key("k");
            let run = match limit {
                Some(n) => run.args(["--limit", n]),
                None => run,
            };
            let why = match value {
                Some(_) => format!("{said}; not running the command {remedy}"),
                None => guarded.clone(),
            };
            let out = run
                .sh(&marker_script(&dir))
                .status(69)
                .stderr(&format!("redlock: cannot take lock 'k': {why}\n"))
                .output();
            if value.is_some() && limit.is_none() {
                assert_snapshot("foreign-fencing-counter.stderr", &out.stderr, &[]);
            }
            assert!(!dir.join("marker").exists(), "the command ran");
            assert_eq!(redis.all_keys(), vec![format!("db0:{}", fence_key("k"))]);
        }
        // `status`: a word there is not shown as a counter of 0.
        if value.is_some() {
            Redlock::admin("status", &redis)
                .key("k")
                .stdout_contains(&format!("  fencing:  unknown: {said} {remedy}\n"))
                .output();
            Redlock::admin("status", &redis)
                .key("k")
                .arg("--json")
                .stdout_contains(&format!(r#""fence":null,"fence_problem":"{said}""#))
                .output();
        } else {
            Redlock::admin("status", &redis)
                .key("k")
                .status(69)
                .stderr(&format!("redlock: cannot read lock 'k': {guarded}\n"))
                .output();
        }
        // `release --force` of the free lock: nothing to remove, the counter left alone.
        Redlock::admin("release", &redis)
            .key("k")
            .arg("--force")
            .any_stdout()
            .output();
    }
}

/// What every message about a spoilt counter of the lock `k` ends with.
const REMEDY: &str = "(delete it with `redis-cli DEL 'redlock:{k}:fence'`, and the next \
                      holder's token carries on from the server's clock)";

/// `release --force --token T` past a counter redlock did not write: the lock of T goes (the
/// script removes it before it comes to the counter), and the text and the JSON name T.
#[test]
fn release_force_of_a_token_past_a_spoilt_counter_names_the_token() {
    let redis = RedisServer::start();
    for json in [false, true] {
        redis::cmd("SET")
            .arg(lock_key("k"))
            .arg("tok1")
            .arg("PX")
            .arg(20_000)
            .exec(&mut redis.conn())
            .unwrap();
        spoil_counter(&redis, Some("notanumber"));
        let release = Redlock::admin("release", &redis)
            .key("k")
            .args(["--force", "--token", "tok1"]);
        let out = if json {
            release.arg("--json").any_stdout().output()
        } else {
            release
                .stdout_contains(
                    "lock 'k' is not held by token tok1 now (removed, or its holder had gone)",
                )
                .output()
        };
        if json {
            assert!(
                out.stdout
                    .contains(r#""result":"free_unfenced","token":"tok1""#),
                "{}",
                out.stdout
            );
        }
        assert_eq!(redis.get(&lock_key("k")), None);
        assert_eq!(redis.get(&fence_key("k")).as_deref(), Some("notanumber"));
    }
}

#[test]
fn release_force_removes_a_lock_whose_fencing_counter_redlock_did_not_write() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let remedy = REMEDY;
    // `release --force` of a held lock whose counter was spoilt since: the lock goes (the
    // script removes it before it comes to the counter), the counter stays as it is, and the
    // holder finds its lock gone.
    for (value, found) in [
        (None, "a Redis hash"),
        (
            Some("99999999999999999999"),
            "a whole number of 20 digits, past the largest 64-bit integer",
        ),
        (Some("notanumber"), "a string that is not a whole number"),
    ] {
        redis.del(&fence_key("k"));
        let (holder, _) = Redlock::run(&redis).key("k").ttl("5s").hold(&dir, "h");
        spoil_counter(&redis, value);
        Redlock::admin("release", &redis)
            .key("k")
            .arg("--force")
            .stdout(&format!(
                "lock 'k' is free now; the fencing counter redlock:{{k}}:fence holds {found}, \
                 which redlock did not write, so it was left alone, not advanced {remedy}\n"
            ))
            .output();
        assert_eq!(redis.get(&lock_key("k")), None, "the lock is still there");
        touch(&dir.join("h.go"));
        holder.finish().assert_code(76);
        let _ = std::fs::remove_file(dir.join("h.go"));
        let _ = std::fs::remove_file(dir.join("h.ready"));
    }
    assert_eq!(redis.get(&fence_key("k")).as_deref(), Some("notanumber"));
    // Two holders and no token: a counter the script cannot read stops it before it removes
    // either; it says so, and exits 69.
    redis.del(&fence_key("k"));
    let holders: Vec<_> = ["a", "b"]
        .iter()
        .map(|tag| {
            let (proc, _) = Redlock::run(&redis)
                .key("k")
                .args(["--limit", "2"])
                .ttl("5s")
                .hold(&dir, tag);
            proc
        })
        .collect();
    let token = fencing_token(&read(&dir.join("b.fence")));
    spoil_counter(&redis, None);
    Redlock::admin("release", &redis)
        .key("k")
        .arg("--force")
        .status(69)
        .stdout(&format!(
            "left lock 'k' alone: the fencing counter redlock:{{k}}:fence holds a Redis hash, \
             which redlock did not write, so nothing was removed ({}, then release it again)\n",
            &remedy[1..remedy.len() - 1]
        ))
        .output();
    for tag in ["a", "b"] {
        touch(&dir.join(&format!("{tag}.go")));
    }
    for holder in holders {
        // Their release does not read the counter.
        holder.finish().assert_code(0);
    }
    // Deleted, as the message says: the next token is above the holder's.
    redis.del(&fence_key("k"));
    let out = Redlock::run(&redis)
        .key("k")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    assert_increasing(&[token, fencing_token(&out.stdout)]);
}

#[test]
fn durations_in_messages_are_rounded_as_people_read_them() {
    // --min-replicas waits ttl/10: 166.666666 ms here, said as 167ms.
    let redis = RedisServer::start();
    let out = Redlock::run(&redis)
        .key("k")
        .ttl("1.66666666")
        .args(["--min-replicas", "1"])
        .command(["true"])
        .status(69)
        .stderr_contains("only 0 of 1 replica(s) acknowledged the lock within 167ms")
        .stderr_lines(1)
        .output();
    assert!(
        !out.stderr.contains("us ") && !out.stderr.contains("ns"),
        "{}",
        out.stderr
    );
    assert_eq!(
        redis.get(&lock_key("k")),
        None,
        "the lock was not given back"
    );

    // A lease shown by status: tenths of a second, not milliseconds.
    let dir = TempDir::new();
    let (holder, _) = Redlock::run(&redis).key("k").ttl("30s").hold(&dir, "h");
    let status = stdout_of("status", &redis, &["--key", "k"]);
    let lease = status
        .lines()
        .find(|l| l.trim_start().starts_with("lease:"))
        .unwrap_or_else(|| panic!("{status}"));
    let shown = lease.trim().trim_start_matches("lease:").trim();
    let secs = shown
        .strip_prefix("expires in ")
        .and_then(|s| s.strip_suffix('s'))
        .unwrap_or_else(|| panic!("{lease}"));
    assert!(
        secs.parse::<f64>().is_ok_and(|s| s > 20.0 && s <= 30.0)
            && secs.split('.').nth(1).is_none_or(|tenth| tenth.len() == 1),
        "{lease}"
    );
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// A database the server does not have (the URL's path past its `databases`): one line that
/// says so, 69, nothing run; not the redis crate's words, which end in a Debug form.
#[test]
fn a_database_the_server_does_not_have_is_named_in_one_line() {
    let redis = RedisServer::start();
    let line = one_line(&format!("redis://127.0.0.1:{}/99999", redis.port()), 69);
    assert!(
        line.contains(&format!(
            "Redis at 127.0.0.1:{} has no such database (DB index is out of range)",
            redis.port()
        )),
        "{line}"
    );
    assert!(!line.contains("ResponseError"), "{line}");
}
