//! No part of a password is printed, whatever the URL form: plain, TLS, unix sockets (with
//! `?pass=`, `?password=`, or user info, which redlock refuses), Sentinel (the master's and the
//! sentinels' own `sentinel_password=`) and Cluster, well-formed (the server unreachable) or
//! malformed (the URL quoted in the error); from `--url` and from `REDLOCK_URL`; for `run` and
//! every admin command; in text and in JSON. The command's `REDLOCK_URL` carries no password.

use crate::common::*;
use crate::integration::topology::Sentinel;

const PW: &str = "S3cr3tPW";

/// Every four-character piece of the password: none may be printed.
fn pieces() -> Vec<&'static str> {
    (0..=PW.len() - 4).map(|i| &PW[i..i + 4]).collect()
}

/// Every URL form, each carrying [`PW`]; `closed` is a port nobody listens on.
fn urls(closed: u16) -> Vec<String> {
    let at = format!("127.0.0.1:{closed}");
    [
        // Well-formed: redlock gets as far as the (absent) server.
        format!("redis://:{PW}@{at}"),
        format!("redis://alice:{PW}@{at}/0"),
        format!("rediss://:{PW}@{at}"),
        format!("redis+unix:///nonexistent/r.sock?pass={PW}"),
        format!("unix:///nonexistent/r.sock?db=1&password={PW}"),
        format!("redis+sentinel://:{PW}@{at}/svc?sentinel_password={PW}"),
        format!("rediss+sentinel://{at}/svc?sentinel_username=u&sentinel_password={PW}&db=1"),
        format!("redis+cluster://:{PW}@{at}"),
        format!("rediss+cluster://alice:{PW}@{at},127.0.0.1"),
        // Malformed: the URL is quoted in the error.
        format!("redis+unix://:{PW}@/tmp/r.sock"),
        format!("unix://:{PW}@/tmp/r.sock"),
        format!("unix://alice:{PW}@/tmp/r.sock"),
        format!("redis://:{PW}@127.0.0.1:99999"),
        format!("rediss://alice:{PW}@[::1"),
        format!("redis+sentinel://:{PW}@h:x/svc?sentinel_password={PW}"),
        format!("redis+sentinel://h/svc?sentinel_password={PW}&what=1"),
        format!("redis+cluster://:{PW}@h/0"),
        format!("valkey://:{PW}@{at}"),
        format!("redis://:{PW}@{at}\n/x"),
        // A scheme without its `//`: said, never the rest.
        format!("redis:{PW}@{at}"),
        format!("rediss::{PW}@{at}"),
        format!("unix:/tmp/x?pass={PW}"),
        format!("redis+unix:/tmp/x?db=1&pass={PW}"),
        format!("redis+sentinel:{PW}@{at}/svc"),
    ]
    .into()
}

/// `redlock <sub>` on `url`, from the flag or the variable, with `--log-format <format>`.
fn invocation(sub: &str, dir: &TempDir, url: &str, from_env: bool, format: &str) -> Redlock {
    let redlock = match sub {
        "run" => Redlock::sub("run")
            .key("k")
            .ttl("1s")
            .sh(&marker_script(dir)),
        "status" => Redlock::sub("status").key("k"),
        "list" => Redlock::sub("list"),
        _ => Redlock::sub("release").key("k").arg("--force"),
    };
    let redlock = redlock.args(["--log-format", format]);
    if from_env {
        redlock.env("REDLOCK_URL", url)
    } else {
        redlock.url(url)
    }
}

#[test]
fn no_url_form_prints_any_part_of_its_password() {
    let closed = free_port();
    let dir = TempDir::new();
    let mut failures = Vec::new();
    for url in urls(closed) {
        for sub in ["run", "status", "list", "release"] {
            for format in ["text", "json"] {
                for from_env in [false, true] {
                    // Checked below, every invocation's problems gathered in one failure.
                    let out = invocation(sub, &dir, &url, from_env, format)
                        .any_status()
                        .any_stdout()
                        .any_stderr()
                        .output();
                    let printed = format!("{}{}", out.stdout, out.stderr);
                    let how = if from_env { "REDLOCK_URL" } else { "--url" };
                    if pieces().iter().any(|p| printed.contains(p)) {
                        failures.push(format!("{sub} {how} {url:?} ({format}): {printed:?}"));
                    }
                    if !matches!(out.status.code(), Some(64 | 69)) {
                        failures.push(format!(
                            "{sub} {how} {url:?} ({format}): {:?}, want 64 or 69",
                            out.status
                        ));
                    }
                }
            }
        }
    }
    assert!(!dir.join("marker").exists(), "a command ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_commands_url_drops_the_sentinels_password() {
    let master = RedisServer::start();
    let sentinel = Sentinel::start(master.port());
    redis::cmd("ACL")
        .arg(&["SETUSER", "default", "on", "resetpass", &format!(">{PW}")])
        .exec(&mut sentinel.conn())
        .unwrap();
    let url = format!(
        "redis+sentinel://127.0.0.1:{}/mymaster?db=2&sentinel_password={PW}",
        sentinel.port
    );
    Redlock::sub("run")
        .env("REDLOCK_URL", &url)
        .key("k")
        .sh("echo \"$REDLOCK_URL\"")
        .status(0)
        .stdout(&format!(
            "redis+sentinel://127.0.0.1:{}/mymaster?db=2\n",
            sentinel.port
        ))
        .stderr("")
        .output();
}

/// A query parameter redlock does not take is refused with 64, not ignored: `?password=` on a
/// socket URL (the crate reads only `pass=`) would otherwise leave the server without the
/// password it was given. The value is never shown, nor anything after a password.
#[test]
fn an_unknown_url_parameter_is_refused_without_showing_a_password() {
    let redis = RedisServer::start_with(ServerOpts {
        unix: true,
        password: Some(PW.into()),
        ..ServerOpts::default()
    });
    let sock = redis.socket_path().display().to_string();
    let dir = TempDir::new();
    for (url, says) in [
        (
            format!("unix://{sock}?password={PW}"),
            "unknown parameter 'password': a unix:// URL takes db, user, pass and protocol; \
             the password goes in pass=",
        ),
        (
            format!("redis+unix://{sock}?pass={}&{}", &PW[..4], &PW[4..]),
            "unknown parameter after the password (a '&' in a password is written %26)",
        ),
        (
            format!("redis://:{PW}@127.0.0.1:1/?db=2"),
            "unknown parameter 'db': a redis:// URL takes only protocol; the database goes in the path: /2",
        ),
    ] {
        for sub in ["run", "status"] {
            let out = invocation(sub, &dir, &url, false, "text")
                .status(64)
                .stderr_contains(says)
                .stderr_lines(1)
                .output();
            out.assert_no_secret(&pieces());
        }
    }
    assert!(!dir.join("marker").exists(), "a command ran");
    // The parameter it does take authenticates.
    Redlock::run_at(&format!("unix://{sock}?pass={PW}"))
        .key("k")
        .command(["true"])
        .output();
}

/// A scheme whose `//` is missing is named as such (the docs promise "it lacks the '//' after
/// 'redis:'"), not called no scheme at all; and nothing after the scheme is shown, since it may
/// hold the password.
#[test]
fn a_scheme_without_its_slashes_is_named_without_the_rest() {
    let closed = free_port();
    for (url, scheme) in [
        (format!("redis:{PW}@127.0.0.1:{closed}"), "redis"),
        (format!("REDISS::{PW}@127.0.0.1:{closed}"), "REDISS"),
        (format!("unix:/tmp/x?pass={PW}"), "unix"),
        (format!("redis+unix:/tmp/x?pass={PW}"), "redis+unix"),
        (format!("redis+sentinel:{PW}@h:1/svc"), "redis+sentinel"),
        (format!("rediss+cluster:{PW}@h:1"), "rediss+cluster"),
    ] {
        for from_env in [false, true] {
            let redlock = Redlock::sub("run").key("k").command(["true"]);
            let redlock = if from_env {
                redlock.env("REDLOCK_URL", &url)
            } else {
                redlock.url(&url)
            };
            let out = redlock
                .status(64)
                .stderr_lines(1)
                .stderr_contains(&format!("lacks the '//' after '{scheme}:'"))
                .stderr_contains(&format!("{scheme}://"))
                .output();
            assert!(!out.stderr.contains("no scheme"), "{url}: {}", out.stderr);
            out.assert_no_secret(&pieces());
        }
    }
}
