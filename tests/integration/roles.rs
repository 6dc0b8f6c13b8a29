//! Only a master may hold a lock: a replica given by its URL is refused with 69, naming its
//! master, whether it is read-only or accepts writes (`replica-read-only no`), and nothing is
//! written to it or to its master; ROLE, asked in each new connection's set-up, also names a
//! Sentinel behind a password. A server whose ACL forbids ROLE is used unchecked, said at -v.

use crate::common::*;
use crate::integration::topology::{Sentinel, replica_of};

#[test]
fn a_replica_is_refused_naming_its_master_whether_read_only_or_not() {
    let master = RedisServer::start();
    let replica = replica_of(&master);
    let dir = TempDir::new();
    for read_only in ["no", "yes"] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("replica-read-only")
            .arg(read_only)
            .exec(&mut replica.conn())
            .unwrap();
        let out = Redlock::run(&replica)
            .key("k")
            .sh(&marker_script(&dir))
            .status(69)
            .stderr_lines(1)
            .stderr_contains(&format!(
                "Redis at 127.0.0.1:{} is a replica",
                replica.port()
            ))
            .stderr_contains(&format!(
                "give its master, redis://127.0.0.1:{}",
                master.port()
            ))
            .output();
        assert!(
            !dir.join("marker").exists(),
            "replica-read-only {read_only}: the command ran: {}",
            out.stderr
        );
        assert!(
            replica.all_keys().is_empty() && master.all_keys().is_empty(),
            "replica-read-only {read_only}: keys written: {:?} {:?}",
            replica.all_keys(),
            master.all_keys()
        );
        Redlock::admin("status", &replica)
            .key("k")
            .status(69)
            .stderr_contains("is a replica")
            .output();
    }
}

/// A master and a sentinel of it that wants the password `s3ntinel-pw` from its clients.
fn sentinel_with_password() -> (RedisServer, Sentinel) {
    let master = RedisServer::start();
    let sentinel = Sentinel::start(master.port());
    redis::cmd("ACL")
        .arg(&["SETUSER", "default", "on", "resetpass", ">s3ntinel-pw"])
        .exec(&mut sentinel.conn())
        .unwrap();
    (master, sentinel)
}

#[test]
fn a_sentinel_behind_a_password_given_as_plain_redis_is_named_as_one() {
    let (_master, sentinel) = sentinel_with_password();
    let url = format!("redis://:s3ntinel-pw@127.0.0.1:{}", sentinel.port);
    let out = Redlock::run_at(&url)
        .key("k")
        .command(["true"])
        .status(69)
        .stderr_lines(1)
        .stderr_contains("is a Redis Sentinel")
        .stderr_contains(&format!(
            "use redis+sentinel://127.0.0.1:{}/mymaster",
            sentinel.port
        ))
        .output();
    out.assert_no_secret(&["s3ntinel"]);
}

#[test]
fn a_server_whose_acl_forbids_role_is_used_unchecked_and_says_so_at_v() {
    let redis = RedisServer::start();
    redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "norole",
            "on",
            ">norole-pw",
            "~*",
            "&*",
            "+@all",
            "-role",
        ])
        .exec(&mut redis.conn())
        .unwrap();
    let url = format!("redis://norole:norole-pw@127.0.0.1:{}", redis.port());
    Redlock::run_at(&url)
        .key("k")
        .sh("echo ran")
        .status(0)
        .stdout("ran\n")
        .stderr("")
        .output();
    let out = Redlock::run_at(&url)
        .key("k")
        .args(["-v", "--log-format", "json"])
        .sh("echo ran")
        .status(0)
        .stdout("ran\n")
        .stderr_contains(r#""event":"role_unchecked""#)
        .stderr_contains("not checked whether it is a replica")
        .output();
    out.assert_no_secret(&["norole-pw"]);
}

/// A replica whose ROLE names no master (a bare `slave`) is refused plainly: no URL is made up
/// from a master nobody named.
#[test]
fn a_replica_that_names_no_master_is_refused_without_a_made_up_url() {
    use crate::integration::fake::{Answer, FakeServer, Then};
    let server = FakeServer::start(Answer::Reply {
        reply: b"*1\r\n$5\r\nslave\r\n".to_vec(),
        then: Then::Repeat,
    });
    let out = Redlock::run_at(&server.url())
        .key("k")
        .ttl("3s")
        .command(["true"])
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains(&format!(
            "Redis at {} is a replica; give its master's URL instead",
            server.addr()
        )),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("its master,"), "{}", out.stderr);
    assert!(!out.stderr.contains("redis://its"), "{}", out.stderr);
}

/// A sentinel that wants a password of its own, given none (`sentinel_password=` missing, or
/// only the data nodes' password in the URL): it needs a password, not "wrong password";
/// a wrong one is still refused as such.
#[test]
fn a_sentinel_that_wants_a_password_and_got_none_says_so() {
    let (_master, sentinel) = sentinel_with_password();
    let at = format!("127.0.0.1:{}", sentinel.port);
    for url in [
        format!("redis+sentinel://{at}/mymaster"),
        format!("redis+sentinel://:data-pw@{at}/mymaster"),
    ] {
        Redlock::run_at(&url)
            .key("k")
            .command(["true"])
            .status(69)
            .stderr(&format!(
                "redlock: cannot take lock 'k': the Redis Sentinel at {at} needs a password: \
                 give it as sentinel_password=PASSWORD in the URL's parameters \
                 (REDLOCK_PASSWORD and --password-file are the data nodes')\n"
            ))
            .output();
    }
    Redlock::run_at(&format!(
        "redis+sentinel://{at}/mymaster?sentinel_password=wrong"
    ))
    .key("k")
    .command(["true"])
    .status(69)
    .stderr_contains("refused the credentials")
    .stderr_lines(1)
    .output();
}
