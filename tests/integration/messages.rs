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

/// One `redlock run` against `url`: exit 69, nothing run, one line; the line.
fn refused_line(url: &str) -> String {
    let dir = TempDir::new();
    let mut cmd = redlock();
    cmd.args(["run", "--url", url, "--key", "k", "--ttl", "3s"])
        .args(["--", "sh", "-c", &marker_script(&dir)]);
    let out = run_timeout(cmd, T);
    out.assert_code(69);
    assert!(!dir.join("marker").exists(), "{url}: the command ran");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    out.stderr.trim().to_owned()
}

#[test]
fn the_wrong_kind_of_server_is_named_with_what_to_use_instead() {
    // A replica given as plain Redis: it says so and names the master, without retrying.
    let master = RedisServer::start();
    let replica = RedisServer::start_with(ServerOpts {
        args: vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            master.port().to_string(),
        ],
        ..ServerOpts::default()
    });
    let line = refused_line(&replica.url());
    assert!(
        line.contains("is a replica")
            && line.contains(&format!("redis://127.0.0.1:{}", master.port())),
        "{line}"
    );

    // A password-protected Redis without a password: not a network fault.
    let locked = RedisServer::start_with(ServerOpts {
        password: Some("s3cret-pw".into()),
        ..ServerOpts::default()
    });
    let line = refused_line(&locked.url_without_password());
    assert!(
        line.contains("needs a password") && line.contains("REDLOCK_PASSWORD"),
        "{line}"
    );
    // And a wrong one: refused credentials, the password not shown.
    let wrong = format!("redis://:wrong-pw@127.0.0.1:{}", locked.port());
    let line = refused_line(&wrong);
    assert!(
        line.contains("refused the credentials") && !line.contains("wrong-pw"),
        "{line}"
    );

    // Something that speaks HTTP.
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http_port = http.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in http.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let line = refused_line(&format!("redis://127.0.0.1:{http_port}"));
    assert!(
        line.contains("answered in HTTP") && !line.contains("\\n"),
        "{line}"
    );

    // A TLS port given as redis://, and a plain port given as rediss://.
    let dir = TempDir::new();
    let (crt, key) = (dir.join("srv.crt"), dir.join("srv.key"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-nodes",
        ])
        .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .env("OPENSSL_CONF", "/dev/null")
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let tls = RedisServer::start_with(ServerOpts {
        tls: Some((crt, key)),
        ..ServerOpts::default()
    });
    let tls_port = tls.tls_url().rsplit(':').next().unwrap().to_owned();
    let line = refused_line(&format!("redis://127.0.0.1:{tls_port}"));
    assert!(
        line.contains("TLS port") && line.contains("rediss://"),
        "{line}"
    );
    let line = refused_line(&format!("rediss://127.0.0.1:{}", master.port()));
    assert!(
        line.contains("not TLS") && line.contains("redis://"),
        "{line}"
    );
}

#[test]
fn a_sentinel_given_as_plain_redis_names_the_url_to_use() {
    let setup = crate::topology::SentinelSetup::start();
    let port = setup.sentinels[0].port;
    let line = refused_line(&format!("redis://127.0.0.1:{port}"));
    assert!(
        line.contains("is a Redis Sentinel")
            && line.contains(&format!("redis+sentinel://127.0.0.1:{port}/mymaster")),
        "{line}"
    );
    // status says the same.
    let out = run_timeout(
        {
            let mut cmd = redlock();
            cmd.args([
                "status",
                "--url",
                &format!("redis://127.0.0.1:{port}"),
                "--key",
                "k",
            ]);
            cmd
        },
        T,
    );
    out.assert_code(69);
    assert!(out.stderr.contains("is a Redis Sentinel"), "{}", out.stderr);
}

#[test]
fn list_and_status_keep_odd_names_on_one_line() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let name = "tab\there\nnewline\\slash";
    let ready = dir.join("ready");
    let script = format!("touch {}; sleep 30", shell_quote(&ready));
    let mut cmd = redlock();
    cmd.args(["run", "--url", &redis.url(), "--key", name, "--ttl", "5s"])
        .args(["--", "sh", "-c", &script]);
    let _holder = Proc::spawn(cmd);
    wait_for_file(&ready);
    let out = run_timeout(admin(&redis, "list", &[]), T);
    out.assert_code(0);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let first = out.stdout.split('\t').next().unwrap();
    assert_eq!(first, "tab\\there\\nnewline\\\\slash");
    let out = run_timeout(admin(&redis, "status", &["--key", name]), T);
    out.assert_code(0);
    assert!(
        out.stdout
            .starts_with("lock 'tab\\there\\nnewline\\\\slash' (redlock:{tab\\there"),
        "{}",
        out.stdout
    );
    // JSON carries the name as it is.
    let out = run_timeout(admin(&redis, "list", &["--json"]), T);
    assert!(
        out.stdout.contains(r#""key":"tab\there\nnewline\\slash""#),
        "{}",
        out.stdout
    );
}

#[test]
fn release_says_what_it_did_in_json() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let ready = dir.join("ready");
    let script = format!("touch {}; sleep 30", shell_quote(&ready));
    let mut cmd = redlock();
    cmd.args(["run", "--url", &redis.url(), "--key", "j", "--ttl", "5s"])
        .args(["--", "sh", "-c", &script]);
    let holder = Proc::spawn(cmd);
    wait_for_file(&ready);
    let token = redis.get(&lock_key("j")).unwrap();
    let out = run_timeout(
        admin(&redis, "release", &["--key", "j", "--force", "--json"]),
        T,
    );
    out.assert_code(0);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    for part in [
        r#""key":"j""#,
        r#""result":"released""#,
        &format!(r#""token":"{token}""#),
        r#""fence":2"#,
        r#""error":null"#,
    ] {
        assert!(out.stdout.contains(part), "{part}: {}", out.stdout);
    }
    assert!(
        out.stdout.contains(r#""holder":{"host":"#),
        "{}",
        out.stdout
    );
    // The holder finds its lock gone.
    assert_eq!(holder.finish(T).code(), 76);
    let out = run_timeout(
        admin(&redis, "release", &["--key", "j", "--force", "--json"]),
        T,
    );
    out.assert_code(0);
    assert!(
        out.stdout.contains(r#""result":"free""#) && out.stdout.contains(r#""token":null"#),
        "{}",
        out.stdout
    );
    // A quorum: one object per node, a node down among them.
    let nodes = start_servers(2);
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let mut cmd = redlock();
    cmd.args(["release", "--key", "j", "--force", "--json"])
        .args([
            "--url",
            &nodes[0].url(),
            "--url",
            &nodes[1].url(),
            "--url",
            &dead,
        ]);
    let out = run_timeout(cmd, T);
    out.assert_code(69);
    assert!(
        out.stdout.starts_with(r#"{"key":"j","per_node":[{"#)
            && out.stdout.matches(r#""result":"free""#).count() == 2
            && out.stdout.contains(r#""result":"error""#),
        "{}",
        out.stdout
    );
}
