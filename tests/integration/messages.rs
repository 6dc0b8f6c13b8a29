//! What redlock says when something is wrong: one line that names the culprit (the flag or the
//! environment variable), says what to do instead, and never shows any part of a password.

use std::time::Duration;

use crate::util::*;

const T: Duration = Duration::from_secs(20);

/// A password with spaces, an `@` and a `/` in it: every message is checked for each word.
const PASSWORD: &str = "correct horse@battery/staple";

#[track_caller]
fn assert_no_secret(out: &Output) {
    for word in ["correct", "horse", "battery", "staple"] {
        assert!(
            !out.stderr.contains(word) && !out.stdout.contains(word),
            "'{word}' of the password was printed:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
}

/// The password percent-encoded for a URL, as RFC 3986 wants it.
fn encoded(password: &str) -> String {
    password
        .replace('%', "%25")
        .replace(' ', "%20")
        .replace('@', "%40")
        .replace('/', "%2F")
}

#[test]
fn a_url_with_a_password_with_spaces_works_from_the_flag_and_is_never_shown() {
    let redis = RedisServer::start();
    // Set once it runs: redis-server's command line would split the password at its spaces.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(PASSWORD)
        .query(&mut redis.conn())
        .unwrap();
    let dir = TempDir::new();
    let port = redis.port();
    // --url takes one URL, whatever it holds: the password with its spaces authenticates.
    let mut cmd = redlock();
    cmd.args([
        "run",
        "--url",
        &format!("redis://:{}@127.0.0.1:{port}", encoded(PASSWORD)),
    ])
    .args(["--key", "k", "--", "sh", "-c", &marker_script(&dir)]);
    let out = run_timeout(cmd, T);
    out.assert_code(0);
    assert!(dir.join("marker").exists(), "the command did not run");

    // A wrong password, spaces and all: refused, and no word of it printed.
    let mut cmd = redlock();
    cmd.args(["run", "--url"])
        .arg(format!("redis://:{PASSWORD}x@127.0.0.1:{port}"))
        .args(["--key", "k", "--", "true"]);
    let out = run_timeout(cmd, T);
    assert!(matches!(out.code(), 64 | 69), "{}", out.stderr);
    assert_no_secret(&out);

    // In REDLOCK_URL whitespace separates URLs: a piece that is not a URL is refused without
    // echoing any piece, with the way out.
    let mut cmd = redlock();
    cmd.env(
        "REDLOCK_URL",
        format!("redis://:{PASSWORD}@127.0.0.1:{port}"),
    )
    .args(["run", "--key", "k", "--", "true"]);
    let out = run_timeout(cmd, T);
    out.assert_code(64);
    assert_no_secret(&out);
    assert!(out.stderr.contains("%20"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);

    // Malformed URLs of every shape: exit 64, no word of the password. (The user info runs to
    // the last '@'; what follows it is taken for the host and may be shown.)
    for url in [
        format!("redis://:{PASSWORD}@"),
        format!("redis://user:{PASSWORD}@127.0.0.1:notaport"),
        format!("redis://:{PASSWORD}@127.0.0.1:1/notadb"),
        format!("redis+sentinel://:{PASSWORD}@/svc"),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:1,"),
        format!("rediss://:{PASSWORD}@127.0.0.1:1#insecure"),
    ] {
        let mut cmd = redlock();
        cmd.args(["run", "--url", &url, "--key", "k", "--", "true"]);
        let out = run_timeout(cmd, T);
        assert!(
            matches!(out.code(), 64 | 69),
            "{url}: exit {}\n{}",
            out.code(),
            out.stderr
        );
        assert_no_secret(&out);
    }
}

#[test]
fn a_bad_environment_value_names_the_variable() {
    for (variable, value, wanted) in [
        ("REDLOCK_TTL", "", "empty duration"),
        ("REDLOCK_WAIT", "", "empty duration"),
        ("REDLOCK_METRICS_FILE", "", "REDLOCK_METRICS_FILE"),
        ("REDLOCK_PREFIX", "", "must not be empty"),
        ("REDLOCK_TLS_INSECURE", "bogus", "not a boolean"),
        ("REDLOCK_FAIR", "maybe", "not a boolean"),
    ] {
        let dir = TempDir::new();
        let mut cmd = redlock();
        cmd.env(variable, value)
            .args(["run", "--url", "redis://127.0.0.1:1", "--key", "k"])
            .args(["--", "sh", "-c", &marker_script(&dir)]);
        let out = run_timeout(cmd, T);
        out.assert_code(64);
        let line = out.stderr.trim();
        assert!(
            line.contains(&format!("in {variable} (which sets --")) && line.contains(wanted),
            "{variable}={value:?}: {line}"
        );
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(!dir.join("marker").exists(), "{variable}: the command ran");
    }
    // The same value on the command line names the flag, as before.
    let mut cmd = redlock();
    cmd.args([
        "run",
        "--url",
        "redis://127.0.0.1:1",
        "--key",
        "k",
        "--ttl",
        "",
    ])
    .args(["--", "true"]);
    let out = run_timeout(cmd, T);
    out.assert_code(64);
    assert!(
        out.stderr.contains("for '--ttl <DURATION>'"),
        "{}",
        out.stderr
    );
    // A false value of a boolean variable is false, not an error.
    let redis = RedisServer::start();
    let mut cmd = redlock();
    cmd.env("REDLOCK_FAIR", "false").args([
        "run",
        "--url",
        &redis.url(),
        "--key",
        "k",
        "--",
        "true",
    ]);
    run_timeout(cmd, T).assert_code(0);
}

#[test]
fn durations_take_fractions_refuse_negatives_and_typos_get_a_suggestion() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // `--ttl 1.5` is seconds with a fraction, as sleep(1) takes it.
    let mut cmd = redlock();
    cmd.args(["run", "--url", &redis.url(), "--key", "k", "--ttl", "1.5"])
        .args(["--", "sh", "-c", "echo $REDLOCK_KEY"]);
    let out = run_timeout(cmd, T);
    out.assert_code(0);
    // A negative duration is named as such, not taken for a flag.
    let mut cmd = redlock();
    cmd.args(["run", "--url", &redis.url(), "--key", "k", "--ttl", "-5s"])
        .args(["--", "sh", "-c", &marker_script(&dir)]);
    let out = run_timeout(cmd, T);
    out.assert_code(64);
    assert!(
        out.stderr.contains("'-5s' is negative") && out.stderr.contains("--ttl"),
        "{}",
        out.stderr
    );
    // A typo gets clap's suggestion, on the one line.
    let mut cmd = redlock();
    cmd.args(["run", "--url", &redis.url(), "--key", "k", "--tll", "5s"])
        .args(["--", "sh", "-c", &marker_script(&dir)]);
    let out = run_timeout(cmd, T);
    out.assert_code(64);
    assert!(
        out.stderr.contains("a similar argument exists: '--ttl'"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(!dir.join("marker").exists(), "the command ran");
}

#[test]
fn help_wraps_to_the_terminal_and_to_100_columns_elsewhere() {
    let widest = |columns: Option<&str>| {
        let mut cmd = redlock();
        cmd.args(["run", "--help"]);
        match columns {
            Some(c) => cmd.env("COLUMNS", c),
            None => cmd.env_remove("COLUMNS"),
        };
        let out = run_timeout(cmd, T);
        out.assert_code(0);
        // A URL template is one word and may stand out; every other line fits.
        out.stdout
            .lines()
            .filter(|line| !line.contains("://") && !line.starts_with("Usage:"))
            .map(|line| line.chars().count())
            .max()
            .unwrap()
    };
    assert!(widest(None) <= 100, "{}", widest(None));
    assert!(widest(None) > 80, "help should use the 100 columns");
    assert!(widest(Some("60")) <= 60, "{}", widest(Some("60")));
}
