//! What redlock says when something is wrong: one line that names the culprit (the flag, the
//! environment variable, the kind of server found), says what to do instead, and never shows any
//! part of a password.

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;
use crate::integration::topology::{Cluster, SentinelSetup, replica_of};

/// A password with spaces, an `@` and a `/` in it: every message is checked for each word.
const PASSWORD: &str = "correct horse@battery/staple";
/// The words of [`PASSWORD`]: none may be printed.
const WORDS: [&str; 4] = ["correct", "horse", "battery", "staple"];

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
    Redlock::run_at(&format!("redis://:{}@127.0.0.1:{port}", encoded(PASSWORD)))
        .key("k")
        .sh(&marker_script(&dir))
        .status(0)
        .output();
    assert!(dir.join("marker").exists(), "the command did not run");

    // A wrong password, spaces and all: refused by the server, and no word of it printed.
    // (Encoded: as written, its `/` would end the URL's authority and it would never be sent.)
    let wrong = encoded(&format!("{PASSWORD}x"));
    let out = Redlock::run_at(&format!("redis://:{wrong}@127.0.0.1:{port}"))
        .key("k")
        .command(["true"])
        .status(69)
        .stderr_contains("refused the credentials")
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&WORDS);

    // In REDLOCK_URL whitespace separates URLs: a piece that is not a URL is refused without
    // echoing any piece, with the way out.
    let out = Redlock::sub("run")
        .env(
            "REDLOCK_URL",
            format!("redis://:{PASSWORD}@127.0.0.1:{port}"),
        )
        .key("k")
        .command(["true"])
        .status(64)
        .stderr_contains("%20")
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&WORDS);

    // Malformed URLs of every shape: no word of the password. (The user info runs to the last
    // '@'; what follows it is taken for the host and may be shown.)
    for url in [
        format!("redis://:{PASSWORD}@"),
        format!("redis://user:{PASSWORD}@127.0.0.1:notaport"),
        format!("redis://:{PASSWORD}@127.0.0.1:1/notadb"),
        format!("redis+sentinel://:{PASSWORD}@/svc"),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:1,"),
        format!("rediss://:{PASSWORD}@127.0.0.1:1#insecure"),
    ] {
        let out = Redlock::run_at(&url)
            .key("k")
            .command(["true"])
            .status(64)
            .stderr_lines(1)
            .output();
        out.assert_no_secret(&WORDS);
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
        Redlock::run_at("redis://127.0.0.1:1")
            .env(variable, value)
            .key("k")
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains(&format!("in {variable} (which sets --"))
            .stderr_contains(wanted)
            .stderr_lines(1)
            .output();
        assert!(!dir.join("marker").exists(), "{variable}: the command ran");
    }
    // The same value on the command line names the flag, as before.
    Redlock::run_at("redis://127.0.0.1:1")
        .key("k")
        .ttl("")
        .command(["true"])
        .status(64)
        .stderr_contains("for '--ttl <DURATION>'")
        .output();
    // A false value of a boolean variable is false, not an error.
    let redis = RedisServer::start();
    Redlock::run(&redis)
        .env("REDLOCK_FAIR", "false")
        .key("k")
        .command(["true"])
        .status(0)
        .output();
}

#[test]
fn durations_take_fractions_refuse_negatives_and_typos_get_a_suggestion() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // `--ttl 1.5` is seconds with a fraction, as sleep(1) takes it.
    Redlock::run(&redis)
        .key("k")
        .ttl("1.5")
        .command(["true"])
        .status(0)
        .output();
    // A negative duration is named as such, not taken for a flag.
    Redlock::run(&redis)
        .key("k")
        .ttl("-5s")
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains("'-5s' is negative")
        .stderr_contains("--ttl")
        .output();
    // A typo gets clap's suggestion, on the one line.
    Redlock::run(&redis)
        .key("k")
        .args(["--tll", "5s"])
        .sh(&marker_script(&dir))
        .status(64)
        .stderr_contains("a similar argument exists: '--ttl'")
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists(), "the command ran");
}

#[test]
fn help_wraps_to_the_terminal_and_to_100_columns_elsewhere() {
    let widest = |columns: Option<&str>| {
        let help = Redlock::sub("run").arg("--help");
        let help = match columns {
            Some(c) => help.env("COLUMNS", c),
            None => help.env_remove("COLUMNS"),
        };
        let out = help.any_stdout().output();
        // A URL template is one word and may stand out; every other line fits.
        out.stdout
            .lines()
            .filter(|line| !line.contains("://") && !line.starts_with("Usage:"))
            .map(|line| line.chars().count())
            .max()
            .unwrap()
    };
    let wide = widest(None);
    assert!((81..=100).contains(&wide), "{wide} columns");
    assert!(widest(Some("60")) <= 60, "{}", widest(Some("60")));
}

/// One `redlock run` against `url`: exit 69, nothing run, one line on stderr; the line.
#[track_caller]
fn refused_line(url: &str) -> String {
    let dir = TempDir::new();
    let out = Redlock::run_at(url)
        .key("k")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists(), "{url}: the command ran");
    out.stderr.trim().to_owned()
}

#[test]
fn the_wrong_kind_of_server_is_named_with_what_to_use_instead() {
    // A replica given as plain Redis: it says so and names the master, without retrying.
    let master = RedisServer::start();
    let replica = replica_of(&master);
    let line = refused_line(&replica.url());
    let ports = [
        (format!(":{}", replica.port()), ":6380".to_owned()),
        (format!(":{}", master.port()), ":6379".to_owned()),
    ];
    let shown: Vec<(&str, &str)> = ports
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_snapshot("replica-as-redis.stderr", &line, &shown);
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
    let port = format!(":{}", locked.port());
    assert_snapshot("password-needed.stderr", &line, &[(&port, ":6379")]);
    assert!(
        line.contains("needs a password") && line.contains("REDLOCK_PASSWORD"),
        "{line}"
    );
    // And a wrong one: refused credentials, the password not shown.
    let line = refused_line(&format!("redis://:wrong-pw@127.0.0.1:{}", locked.port()));
    assert_snapshot("credentials-refused.stderr", &line, &[(&port, ":6379")]);
    assert!(
        line.contains("refused the credentials") && !line.contains("wrong-pw"),
        "{line}"
    );

    // Something that speaks HTTP.
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http_port = http.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in http.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let line = refused_line(&format!("redis://127.0.0.1:{http_port}"));
    let port = format!(":{http_port}");
    assert_snapshot("http-server.stderr", &line, &[(&port, ":8080")]);
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
    let port = format!(":{tls_port}");
    assert_snapshot("tls-port-as-redis.stderr", &line, &[(&port, ":6380")]);
    assert!(
        line.contains("TLS port") && line.contains("rediss://"),
        "{line}"
    );
    let line = refused_line(&format!("rediss://127.0.0.1:{}", master.port()));
    let port = format!(":{}", master.port());
    assert_snapshot("plain-port-as-rediss.stderr", &line, &[(&port, ":6379")]);
    assert!(
        line.contains("not TLS") && line.contains("redis://"),
        "{line}"
    );
}

#[test]
fn a_sentinel_given_as_plain_redis_names_the_url_to_use() {
    let setup = SentinelSetup::start();
    let port = setup.sentinels[0].port;
    let url = format!("redis://127.0.0.1:{port}");
    let line = refused_line(&url);
    let shown = format!(":{port}");
    assert_snapshot("sentinel-as-redis.stderr", &line, &[(&shown, ":26379")]);
    assert!(
        line.contains("is a Redis Sentinel")
            && line.contains(&format!("redis+sentinel://127.0.0.1:{port}/mymaster")),
        "{line}"
    );
    // status says the same.
    Redlock::admin_at("status", &url)
        .key("k")
        .status(69)
        .stderr_contains("is a Redis Sentinel")
        .output();
}

#[test]
fn list_and_status_keep_odd_names_on_one_line() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let name = "tab\there\nnewline\\slash";
    let (holder, _) = Redlock::run(&redis).key(name).ttl("5s").hold(&dir, "h");
    let out = Redlock::admin("list", &redis).any_stdout().output();
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let first = out.stdout.split('\t').next().unwrap();
    assert_eq!(first, "tab\\there\\nnewline\\\\slash");
    Redlock::admin("status", &redis)
        .key(name)
        .status(0)
        .stdout_contains("lock 'tab\\there\\nnewline\\\\slash' (redlock:{tab\\there")
        .output();
    // JSON carries the name as it is.
    Redlock::admin("list", &redis)
        .arg("--json")
        .status(0)
        .stdout_contains(r#""key":"tab\there\nnewline\\slash""#)
        .output();
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

#[test]
fn release_says_what_it_did_in_json() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (holder, token) = Redlock::run(&redis).key("j").ttl("5s").hold(&dir, "h");
    let out = Redlock::admin("release", &redis)
        .key("j")
        .args(["--force", "--json"])
        .status(0)
        .stdout_contains(r#""key":"j""#)
        .stdout_contains(r#""result":"released""#)
        .stdout_contains(&format!(r#""token":"{token}""#))
        .stdout_contains(r#""fence":"#)
        .stdout_contains(r#""holder":{"host":"#)
        .stdout_contains(r#""error":null"#)
        .output();
    // The counter moved past the holder's token, and the JSON says to what.
    let fenced = fence_of(&redis, "j");
    assert_increasing(&[fencing_token(&read(&dir.join("h.fence"))), fenced]);
    assert!(
        out.stdout.contains(&format!(r#""fence":{fenced}"#)),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    // The holder finds its lock gone.
    holder.finish().assert_code(76);
    Redlock::admin("release", &redis)
        .key("j")
        .args(["--force", "--json"])
        .status(0)
        .stdout_contains(r#""result":"free""#)
        .stdout_contains(r#""token":null"#)
        .output();
    // A quorum: one object per node, a node down among them.
    let nodes = start_servers(2);
    let out = Redlock::admin_quorum("release", &nodes)
        .url(&format!("redis://127.0.0.1:{}", free_port()))
        .key("j")
        .args(["--force", "--json"])
        .status(69)
        .stdout_contains(r#"{"key":"j","per_node":[{"#)
        .stdout_contains(r#""result":"error""#)
        .stderr_prefixed()
        .stderr_contains("cannot reach Redis at 127.0.0.1:")
        .stderr_contains("lock 'j' was not released on 1 of 3 nodes")
        .stderr_lines(2)
        .output();
    assert_eq!(
        out.stdout.matches(r#""result":"free""#).count(),
        2,
        "{}",
        out.stdout
    );
}

#[test]
fn the_command_line_is_checked_and_failures_to_start_are_named_as_a_shell_would() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // An empty command is a usage error, before any lock is taken.
    Redlock::run(&redis)
        .key("cmd")
        .command([""])
        .status(64)
        .stderr_contains("the command is empty")
        .stderr_lines(1)
        .output();
    // A shell line given as one word: not found, with the hint that no shell is involved.
    Redlock::run(&redis)
        .key("cmd")
        .command(["echo hi"])
        .status(127)
        .stderr_contains("command not found")
        .stderr_contains("sh -c")
        .stderr_lines(1)
        .output();
    // A script whose interpreter is missing, or whose #! line ends in CR: 126, bad interpreter.
    for (name, first_line, hint) in [
        (
            "missing",
            "#!/nonexistent/interp",
            "bad interpreter '/nonexistent/interp'",
        ),
        ("crlf", "#!/bin/sh\r", "DOS line endings"),
    ] {
        let script = dir.join(name);
        std::fs::write(&script, format!("{first_line}\necho ran\n")).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Redlock::run(&redis)
            .key("cmd")
            .command([&script])
            .status(126)
            .stderr_contains("bad interpreter")
            .stderr_contains(hint)
            .stderr_lines(1)
            .stdout("")
            .output();
    }
    // A directory, and a file without the execute bit: 126.
    Redlock::run(&redis)
        .key("cmd")
        .command([dir.path()])
        .status(126)
        .stderr_contains("is a directory")
        .output();
    let plain = dir.join("plain");
    std::fs::write(&plain, "echo ran\n").unwrap();
    Redlock::run(&redis)
        .key("cmd")
        .command([&plain])
        .status(126)
        .stderr_contains("Permission denied")
        .output();
    // Nothing stays locked.
    assert_eq!(redis.get(&lock_key("cmd")), None);
}

#[test]
fn the_command_gets_no_credentials() {
    let redis = RedisServer::start_with(ServerOpts {
        password: Some("env-s3cret".into()),
        ..ServerOpts::default()
    });
    let port = redis.port();
    // The password from REDLOCK_PASSWORD, a wrong one in REDLOCK_URL (REDLOCK_PASSWORD wins).
    let out = Redlock::sub("run")
        .env("REDLOCK_PASSWORD", "env-s3cret")
        .env(
            "REDLOCK_URL",
            format!("redis://:url-s3cret@127.0.0.1:{port}"),
        )
        .key("creds")
        .sh("env")
        .any_stdout()
        .output();
    assert!(
        !out.stdout.contains("s3cret"),
        "the command saw a password:\n{}",
        out.stdout
    );
    assert!(!out.stdout.contains("REDLOCK_PASSWORD="), "{}", out.stdout);
    assert!(
        out.stdout
            .lines()
            .any(|l| l == format!("REDLOCK_URL=redis://127.0.0.1:{port}")),
        "{}",
        out.stdout
    );
    // A user name stays; only the password goes.
    Redlock::sub("run")
        .env(
            "REDLOCK_URL",
            format!("redis://default:env-s3cret@127.0.0.1:{port}"),
        )
        .key("creds")
        .sh("echo \"$REDLOCK_URL\"")
        .stdout(&format!("redis://default@127.0.0.1:{port}\n"))
        .output();
}

#[test]
fn a_cluster_node_given_as_plain_redis_names_the_url_to_use() {
    let cluster = Cluster::start();
    let slot = cluster.slot("{k}");
    let owner = cluster.owner(slot, 0);
    let other = (owner + 1) % cluster.nodes.len();
    let line = refused_line(&cluster.nodes[other].url());
    let port = format!(":{}", cluster.nodes[other].port());
    assert_snapshot("cluster-node-as-redis.stderr", &line, &[(&port, ":7000")]);
    assert!(
        line.contains("is a Cluster node that does not serve the lock's slot")
            && line.contains("redis+cluster://"),
        "{line}"
    );
}

#[test]
fn a_url_without_a_scheme_names_the_url_to_use() {
    for redlock in [
        Redlock::sub("run").env("REDLOCK_URL", "127.0.0.1:6379"),
        Redlock::sub("run").url("127.0.0.1:6379"),
    ] {
        let out = redlock
            .key("k")
            .command(["true"])
            .status(64)
            .stderr_lines(1)
            .stderr_contains("'127.0.0.1:6379' is not a URL: it has no scheme")
            .stderr_contains("use redis://127.0.0.1:6379")
            .output();
        assert!(!out.stderr.contains("whitespace"), "{}", out.stderr);
    }
    // The `//` forgotten after a scheme: the URL meant, not the scheme taken for a host.
    for redlock in [
        Redlock::sub("run").env("REDLOCK_URL", "redis:127.0.0.1:7311"),
        Redlock::sub("run").url("redis:127.0.0.1:7311"),
    ] {
        redlock
            .key("k")
            .command(["true"])
            .status(64)
            .stderr_lines(1)
            .stderr_contains(
                "'redis:127.0.0.1:7311' is not a URL: it lacks the '//' after 'redis:'; use \
                 redis://127.0.0.1:7311",
            )
            .output();
    }
    // Anything but host:port may hold a password: not quoted.
    Redlock::sub("run")
        .env("REDLOCK_URL", ":hunter2@127.0.0.1:6379")
        .key("k")
        .command(["true"])
        .status(64)
        .stderr_contains("has no scheme")
        .output()
        .assert_no_secret(&["hunter2"]);
}
