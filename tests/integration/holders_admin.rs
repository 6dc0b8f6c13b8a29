//! The admin subcommands on locks held by several (issue 15): `status` and `list` show a
//! semaphore's or shared lock's kind, N, each holder and the waiters (of any lock, from the
//! registry of waiters); `release --force --token T` removes one holder, fences it off and
//! lets a waiter in, and without a token refuses to pick one of several; holders whose lease
//! ended and waiters that died are not shown (a dead waiter once its entry lapses).

use nix::sys::signal::Signal;

use crate::common::*;

fn status_json(redis: &RedisServer, key: &str) -> String {
    stdout_of("status", redis, &["--key", key, "--json"])
}

/// How many holders a `status --json` object lists (each has one `age_ms`).
fn holders_in(json: &str) -> usize {
    json.matches(r#""age_ms":"#).count()
}

fn zcard(redis: &RedisServer, key: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query(&mut redis.conn())
        .unwrap()
}

/// The server's clock in ms (what the scripts score leases and waiters by).
fn server_ms(redis: &RedisServer) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut redis.conn()).unwrap();
    s * 1000 + us / 1000
}

#[test]
fn status_and_list_show_a_semaphores_holders_and_its_waiters() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let slot = || Redlock::run(&redis).key("pool").args(["--limit", "3"]);
    let (a, token_a) = slot().hold(&dir, "a");
    let (b, token_b) = slot().hold(&dir, "b");

    // Two of three slots taken.
    let json = status_json(&redis, "pool");
    for want in [
        r#""state":"held""#.to_owned(),
        r#""kind":"semaphore""#.to_owned(),
        r#""limit":3"#.to_owned(),
        // The counter is the second holder's token.
        format!(r#""fence":{}"#, fencing_token(&read(&dir.join("b.fence")))),
        r#""token":null"#.to_owned(),
        r#""waiting":0"#.to_owned(),
        format!(r#""token":"{token_a}""#),
        format!(r#""token":"{token_b}""#),
        format!(r#""pid":{},"#, a.pid()),
        format!(r#""pid":{},"#, b.pid()),
    ] {
        assert!(json.contains(&want), "{want} missing from {json}");
    }
    assert_eq!(holders_in(&json), 2, "{json}");
    let text = stdout_of("status", &redis, &["--key", "pool"]);
    assert!(
        text.contains("is held by 2 of 3 (a semaphore, --limit 3)"),
        "{text}"
    );
    assert_eq!(text.matches("  holder:   ").count(), 2, "{text}");
    for (proc, token) in [(&a, &token_a), (&b, &token_b)] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("pid {}", proc.pid())))
            .unwrap_or_else(|| panic!("no line for pid {}: {text}", proc.pid()));
        assert!(line.contains(&format!("token {token}")), "{line}");
        assert!(line.contains("left") && line.contains(": sh -c "), "{line}");
    }
    assert!(text.contains("  waiters:  none"), "{text}");
    let list = stdout_of("list", &redis, &[]);
    assert_eq!(list.lines().count(), 1, "{list}");
    let fields: Vec<&str> = list.trim_end().split('\t').collect();
    assert_eq!(fields[0], "pool", "{list}");
    assert!(fields[1].starts_with("expires in "), "{list}");
    let counter = format!("fence {}", fencing_token(&read(&dir.join("b.fence"))));
    assert_eq!(fields[2..4], [counter.as_str(), "0 waiting"], "{list}");
    assert!(fields[4].starts_with("semaphore 2/3: "), "{list}");
    assert_eq!(fields.len(), 5, "{list}");

    // Full: a third holder, then a plain and a --fair waiter.
    let (c, _) = slot().hold(&dir, "c");
    let plain = slot().wait("60s").sh("true").spawn();
    let fair = slot().arg("--fair").wait("60s").sh("true").spawn();
    wait_until(PATIENCE, "both waiters to block", || {
        redis.info_field("blocked_clients") == 2
    });
    let text = stdout_of("status", &redis, &["--key", "pool"]);
    assert!(text.contains("is held by 3 of 3"), "{text}");
    assert!(
        text.contains("  waiters:  2 (1 of them in the first-come-first-served queue)"),
        "{text}"
    );
    let json = status_json(&redis, "pool");
    assert!(json.contains(r#""waiting":2"#), "{json}");
    assert!(json.contains(r#""fair_queue":1"#), "{json}");
    assert_eq!(holders_in(&json), 3, "{json}");
    let list = stdout_of("list", &redis, &[]);
    assert!(
        list.contains(&format!(
            "\tfence {}\t2 waiting\tsemaphore 3/3: ",
            fence_of(&redis, "pool")
        )),
        "{list}"
    );
    let list = stdout_of("list", &redis, &["--json"]);
    assert!(list.contains(r#""kind":"semaphore""#), "{list}");
    assert!(list.contains(r#""waiting":2"#), "{list}");

    // Each waiter let in leaves the registry.
    for (proc, tag) in [(a, "a"), (b, "b"), (c, "c")] {
        touch(&dir.join(&format!("{tag}.go")));
        proc.finish().assert_code(0);
    }
    plain.finish().assert_code(0);
    fair.finish().assert_code(0);
    let json = status_json(&redis, "pool");
    assert!(json.contains(r#""state":"free""#), "{json}");
    assert!(json.contains(r#""waiting":0"#), "{json}");
    assert!(json.contains(r#""kind":null"#), "{json}");
    assert_eq!(zcard(&redis, &format!("{}:waiting", lock_key("pool"))), 0);
}

#[test]
fn status_shows_shared_readers_and_a_writer_queued_behind_them() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let reader = || Redlock::run(&redis).key("doc").arg("--shared");
    let (r1, _) = reader().hold(&dir, "r1");
    let (r2, _) = reader().hold(&dir, "r2");
    let writer = Redlock::run(&redis)
        .key("doc")
        .wait("60s")
        .sh(&format!("touch {}", dir.sh("wrote")))
        .spawn();
    wait_until(PATIENCE, "the writer to queue", || {
        zcard(&redis, &format!("{}:queue", lock_key("doc"))) == 1
    });

    let text = stdout_of("status", &redis, &["--key", "doc"]);
    assert!(text.contains("is held shared by 2 (--shared)"), "{text}");
    assert_eq!(text.matches("  holder:   ").count(), 2, "{text}");
    assert!(
        text.contains("  waiters:  1 (1 of them in the first-come-first-served queue)"),
        "{text}"
    );
    let json = status_json(&redis, "doc");
    for want in [
        r#""kind":"shared""#,
        r#""limit":null"#,
        r#""waiting":1"#,
        r#""fair_queue":1"#,
    ] {
        assert!(json.contains(want), "{want} missing from {json}");
    }
    assert_eq!(holders_in(&json), 2, "{json}");
    let list = stdout_of("list", &redis, &[]);
    assert!(list.contains("\t1 waiting\tshared by 2: "), "{list}");
    assert!(!dir.join("wrote").exists(), "the writer ran beside readers");

    for (proc, tag) in [(r1, "r1"), (r2, "r2")] {
        touch(&dir.join(&format!("{tag}.go")));
        proc.finish().assert_code(0);
    }
    writer.finish().assert_code(0);
    assert!(dir.join("wrote").exists());
}

#[test]
fn release_force_token_removes_one_holder_fences_it_off_and_lets_a_waiter_in() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A short lease: the removed holder finds out at its next renewal (every ttl/3).
    let slot = || {
        Redlock::run(&redis)
            .key("jobs")
            .args(["--limit", "2"])
            .ttl("2s")
    };
    let (a, token_a) = slot().hold(&dir, "a");
    let (mut b, token_b) = slot().hold(&dir, "b");
    let waiter = slot()
        .wait("60s")
        .sh(&format!(
            "echo $REDLOCK_FENCING_TOKEN > {}",
            dir.sh("w.fence")
        ))
        .spawn();
    wait_until(PATIENCE, "the waiter to block", || {
        redis.info_field("blocked_clients") == 1
    });

    // A token no holder has: nothing changes.
    Redlock::admin("release", &redis)
        .key("jobs")
        .args(["--force", "--token", "nope"])
        .status(75)
        .stdout_contains("none with the token given; left alone")
        .output();
    assert_eq!(zcard(&redis, &lock_key("jobs")), 2);

    let before = fence_of(&redis, "jobs");
    let out = Redlock::admin("release", &redis)
        .key("jobs")
        .args(["--force", "--token", &token_a, "--json"])
        .any_stdout()
        .output();
    // The waiter may have taken the slot since: the release says what it moved the counter to.
    let fenced = fencing_token(
        out.stdout
            .split(r#""fence":"#)
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap(),
    );
    assert_increasing(&[before, fenced]);
    for want in [
        r#""result":"released""#.to_owned(),
        format!(r#""token":"{token_a}""#),
        format!(r#""pid":{},"#, a.pid()),
        r#""kind":"semaphore""#.to_owned(),
        r#""limit":2"#.to_owned(),
        r#""holders_left":1"#.to_owned(),
    ] {
        assert!(
            out.stdout.contains(&want),
            "{want} missing from {}",
            out.stdout
        );
    }
    // The removed holder stops its command with 76; the other goes on.
    a.finish().assert_code(76);
    assert!(b.running(), "the other holder was stopped too");
    // The freed slot went to the waiter, with a token above the removed holder's.
    waiter.finish().assert_code(0);
    let waited = fencing_token(&wait_for_line(&dir.join("w.fence")));
    assert_increasing(&[fenced, waited]);
    assert_eq!(fence_of(&redis, "jobs"), waited);
    let json = status_json(&redis, "jobs");
    assert!(json.contains(&format!(r#""token":"{token_b}""#)), "{json}");
    assert!(!json.contains(&token_a), "{json}");
    assert_eq!(holders_in(&json), 1, "{json}");

    touch(&dir.join("b.go"));
    b.finish().assert_code(0);
}

#[test]
fn release_force_without_a_token_removes_only_a_lone_holder() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let reader = || Redlock::run(&redis).key("docs").arg("--shared").ttl("2s");
    let (r1, _) = reader().hold(&dir, "r1");
    let (r2, token_2) = reader().hold(&dir, "r2");

    // Two holders and no --token: which one is the operator's to say; nothing is removed.
    Redlock::admin("release", &redis)
        .key("docs")
        .arg("--force")
        .status(64)
        .stdout("")
        .stderr_prefixed()
        .stderr_lines(1)
        .stderr_contains("held by 2 (shared, --shared)")
        .stderr_contains("--token")
        .stderr_contains("redlock status --key docs")
        .output();
    Redlock::admin("release", &redis)
        .key("docs")
        .args(["--force", "--json"])
        .status(64)
        .stdout_contains(r#""result":"several_holders""#)
        .stdout_contains(r#""holders_left":2"#)
        .stderr_lines(1)
        .output();
    assert_eq!(zcard(&redis, &lock_key("docs")), 2);
    // Refused: the counter is still the second holder's token.
    let second = fence_of(&redis, "docs");
    assert_eq!(second, fencing_token(&read(&dir.join("r2.fence"))));

    touch(&dir.join("r1.go"));
    r1.finish().assert_code(0);
    // One holder left: that one is removed.
    Redlock::admin("release", &redis)
        .key("docs")
        .arg("--force")
        .status(0)
        .stdout_contains(&format!("token {token_2}"))
        .stdout_contains("0 holder(s) left")
        .stdout_contains("fencing counter now ")
        .output();
    assert_increasing(&[second, fence_of(&redis, "docs")]);
    r2.finish().assert_code(76);
    let json = status_json(&redis, "docs");
    assert!(json.contains(r#""state":"free""#), "{json}");
    // The set's companions went with its last holder.
    for suffix in [":kind", ":holders"] {
        assert_eq!(redis.pttl(&format!("{}{suffix}", lock_key("docs"))), -2);
    }
}

#[test]
fn holders_whose_lease_ended_and_lapsed_waiters_are_not_shown() {
    let redis = RedisServer::start();
    let key = lock_key("old");
    let now = server_ms(&redis);
    let details = |pid: u32, since: i64| {
        format!(r#"{{"host":"h","pid":"{pid}","argv":"job {pid}","started":"1","since":{since}}}"#)
    };
    let mut conn = redis.conn();
    redis::pipe()
        .cmd("ZADD")
        .arg(&key)
        .arg(now - 5_000)
        .arg("dead-token")
        .arg(now + 30_000)
        .arg("live-token")
        .cmd("PEXPIRE")
        .arg(&key)
        .arg(30_000)
        .cmd("SET")
        .arg(format!("{key}:kind"))
        .arg("limit 2")
        .cmd("HSET")
        .arg(format!("{key}:holders"))
        .arg("dead-token")
        .arg(details(41, now - 40_000))
        .arg("live-token")
        .arg(details(42, now - 3_000))
        .cmd("ZADD")
        .arg(format!("{key}:waiting"))
        .arg(now - 1_000)
        .arg("gone-waiter")
        .arg(now + 30_000)
        .arg("live-waiter")
        .exec(&mut conn)
        .unwrap();

    let json = status_json(&redis, "old");
    assert_eq!(holders_in(&json), 1, "{json}");
    assert!(json.contains(r#""token":"live-token""#), "{json}");
    assert!(!json.contains("dead-token"), "{json}");
    assert!(json.contains(r#""waiting":1"#), "{json}");
    let age: i64 = json
        .split(r#""age_ms":"#)
        .nth(1)
        .and_then(|rest| rest.split(['}', ',']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no age in {json}"));
    assert!((3_000..20_000).contains(&age), "age {age} ms: {json}");
    let text = stdout_of("status", &redis, &["--key", "old"]);
    assert!(text.contains("is held by 1 of 2"), "{text}");
    assert!(
        text.contains("h pid 42, for ") && !text.contains("pid 41"),
        "{text}"
    );
    let list = stdout_of("list", &redis, &[]);
    assert!(
        list.contains("\t1 waiting\tsemaphore 1/2: h pid 42 (job 42)"),
        "{list}"
    );
    // status only reads: the lapsed entries are still there for a writing script to purge.
    assert_eq!(zcard(&redis, &key), 2);

    // Every lease ended: free, and not listed.
    redis::cmd("ZADD")
        .arg(&key)
        .arg(now - 1)
        .arg("live-token")
        .exec(&mut conn)
        .unwrap();
    let json = status_json(&redis, "old");
    assert!(json.contains(r#""state":"free""#), "{json}");
    assert_eq!(holders_in(&json), 0, "{json}");
    assert_eq!(stdout_of("list", &redis, &[]), "");
    // A forced release purges them and finds the lock free.
    Redlock::admin("release", &redis)
        .key("old")
        .arg("--force")
        .status(0)
        .stdout_contains("is free")
        .output();
    assert_eq!(zcard(&redis, &key), 0);
}

#[test]
fn a_plain_waiter_is_counted_until_it_leaves_or_its_entry_lapses() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // A 1 s ttl: a waiter comes back at least every second, and its entry lives ~3 s.
    let (holder, _) = Redlock::run(&redis).key("w").ttl("1s").hold(&dir, "h");
    let waiter = || Redlock::run(&redis).key("w").ttl("1s").sh("true");
    let quitter = waiter().wait("1500ms").spawn();
    let victim = waiter().wait("forever").spawn();
    wait_until(PATIENCE, "two waiters to register", || {
        status_json(&redis, "w").contains(r#""waiting":2"#)
    });
    let text = stdout_of("status", &redis, &["--key", "w"]);
    assert!(text.contains("  waiters:  2\n"), "{text}");

    // One gives up: it leaves the registry on its way out.
    quitter.finish().assert_code(75);
    let json = status_json(&redis, "w");
    assert!(json.contains(r#""waiting":1"#), "{json}");

    // One is killed without a word: counted until its entry lapses, then not.
    victim.signal(Signal::SIGKILL);
    victim.finish().assert_signal(9);
    assert!(status_json(&redis, "w").contains(r#""waiting":1"#));
    wait_until(PATIENCE, "the dead waiter's entry to lapse", || {
        status_json(&redis, "w").contains(r#""waiting":0"#)
    });

    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn a_quorum_node_holding_a_set_is_shown_without_a_majority() {
    let servers = start_servers(3);
    let dir = TempDir::new();
    // A semaphore run against two nodes alone (the quorum refuses --limit): two sets.
    let (a, _) = Redlock::run(&servers[0])
        .key("q")
        .args(["--limit", "2"])
        .hold(&dir, "a");
    let (b, _) = Redlock::run(&servers[1])
        .key("q")
        .args(["--limit", "2"])
        .hold(&dir, "b");

    let text = Redlock::admin_quorum("status", &servers)
        .key("q")
        .status(0)
        .stdout_contains("has no majority on 3 nodes: held on 2, free on 1")
        .stdout_contains("is held by 1 of 2 (a semaphore, --limit 2)")
        .output()
        .stdout;
    assert!(text.contains(&format!("pid {}", a.pid())), "{text}");
    let list = Redlock::admin_quorum("list", &servers)
        .any_stdout()
        .output()
        .stdout;
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("\tsemaphore 1/2: "), "{list}");
    assert!(
        list.ends_with("\tno majority: held on 2 of 3 nodes\n"),
        "{list}"
    );
    Redlock::admin_quorum("status", &servers)
        .key("q")
        .arg("--json")
        .status(0)
        .stdout_contains(r#""state":"split""#)
        .stdout_contains(r#""kind":"semaphore""#)
        .output();

    for (proc, tag) in [(a, "a"), (b, "b")] {
        touch(&dir.join(&format!("{tag}.go")));
        proc.finish().assert_code(0);
    }
}
