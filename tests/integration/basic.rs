//! Running a command under the lock: the key while it runs, release afterwards, the child's
//! environment, fencing tokens, URL forms and who owns stdout/stderr.

use std::fs::File;
use std::time::Duration;

use crate::common::*;

#[test]
fn holds_key_while_running_and_releases_it() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (proc, token) = Redlock::run(&redis).key("job").hold(&dir, "w");
    assert_eq!(
        redis.get(&lock_key("job")).as_deref(),
        Some(token.as_str()),
        "lock key must hold the token the command sees"
    );
    let pttl = redis.pttl(&lock_key("job"));
    assert!(pttl > 0 && pttl <= 30_000, "default ttl 30s, PTTL {pttl}");

    touch(&dir.join("w.go"));
    let out = proc.finish();
    out.assert_code(0);
    assert_eq!(redis.get(&lock_key("job")), None, "lock not released");
    assert_eq!(out.stderr, "", "redlock must be silent on success");
}

#[test]
fn child_environment() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "echo \"$REDLOCK_KEY\" > {k}; echo \"$REDLOCK_TOKEN\" > {t}; \
         echo \"$REDLOCK_FENCING_TOKEN\" > {f}; touch {r}; while [ ! -e {g} ]; do sleep 0.02; done",
        k = dir.sh("key"),
        t = dir.sh("token"),
        f = dir.sh("fence"),
        r = dir.sh("ready"),
        g = dir.sh("go"),
    );
    let proc = Redlock::run(&redis).key("env-check").sh(&script).spawn();
    wait_for_file(&dir.join("ready"));

    assert_eq!(wait_for_line(&dir.join("key")), "env-check");
    let token = wait_for_line(&dir.join("token"));
    let uuid = uuid::Uuid::parse_str(&token)
        .unwrap_or_else(|e| panic!("REDLOCK_TOKEN {token:?} is not a uuid: {e}"));
    assert_eq!(uuid.get_version_num(), 4, "token {token} is not a v4 uuid");
    assert_eq!(
        redis.get(&lock_key("env-check")).as_deref(),
        Some(token.as_str())
    );
    let fence: u64 = wait_for_line(&dir.join("fence"))
        .parse()
        .expect("REDLOCK_FENCING_TOKEN is not an integer");
    assert_eq!(
        redis.get(&fence_key("env-check")),
        Some(fence.to_string()),
        "fencing token must be the counter's value"
    );

    touch(&dir.join("go"));
    proc.finish().assert_code(0);
}

#[test]
fn fencing_tokens_strictly_increase_and_tokens_are_fresh() {
    let redis = RedisServer::start();
    let mut fences = Vec::new();
    let mut tokens = Vec::new();
    for _ in 0..5 {
        let out = Redlock::run(&redis)
            .key("fenced")
            .sh("echo $REDLOCK_FENCING_TOKEN $REDLOCK_TOKEN")
            .any_stdout()
            .output();
        let mut words = out.stdout.split_whitespace();
        let fence: u64 = words.next().unwrap().parse().unwrap();
        fences.push(fence);
        tokens.push(words.next().unwrap().to_string());
    }
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not strictly increasing: {fences:?}"
    );
    let mut unique = tokens.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), tokens.len(), "owner token reused: {tokens:?}");
    assert_eq!(redis.get(&fence_key("fenced")), Some(fences[4].to_string()));
    // The counter lives forty days after the last acquisition (none lives for ever).
    let pttl = redis.pttl(&fence_key("fenced"));
    assert!(
        pttl > 39 * 24 * 3600 * 1000 && pttl <= 40 * 24 * 3600 * 1000,
        "fence counter's PTTL {pttl}"
    );
    fencing_token(&fences[0].to_string());
    assert_eq!(redis.get(&lock_key("fenced")), None);
}

#[test]
fn fencing_counter_is_per_name() {
    let redis = RedisServer::start();
    let fence = |key: &str| -> u64 {
        let out = Redlock::run(&redis)
            .key(key)
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
            .output();
        out.stdout.trim().parse().unwrap()
    };
    let a1 = fence("a");
    let a2 = fence("a");
    let b1 = fence("b");
    assert!(a2 > a1);
    assert_eq!(
        redis.get(&fence_key("b")),
        Some(b1.to_string()),
        "key b has its own counter"
    );
    assert_eq!(redis.get(&fence_key("a")), Some(a2.to_string()));
}

#[test]
fn stdio_belongs_to_the_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    std::fs::write(dir.join("input"), "line one\nline two\n").unwrap();

    // The command's streams, and nothing of redlock's own on them.
    Redlock::run(&redis)
        .key("io")
        .sh("cat; echo to-stderr >&2")
        .stdin(File::open(dir.join("input")).unwrap())
        .status(0)
        .stdout("line one\nline two\n")
        .stderr("to-stderr\n")
        .output();
}

#[test]
fn command_arguments_are_passed_verbatim_without_a_shell() {
    let redis = RedisServer::start();
    Redlock::run(&redis)
        .key("argv")
        .command(["printf", "[%s]\n", "a b", "$HOME", "*", "--key", "-v"])
        .status(0)
        .stdout("[a b]\n[$HOME]\n[*]\n[--key]\n[-v]\n")
        .output();
}

#[test]
fn prefix_option_and_env_change_key_names() {
    let redis = RedisServer::start();
    let dir = TempDir::new();

    let (proc, token) = Redlock::run(&redis)
        .key("job")
        .args(["--prefix", "myapp:"])
        .hold(&dir, "a");
    assert_eq!(redis.get("myapp:{job}").as_deref(), Some(token.as_str()));
    assert_eq!(redis.get(&lock_key("job")), None);
    let fence = wait_for_line(&dir.join("a.fence"));
    assert_eq!(redis.get("myapp:{job}:fence"), Some(fence));
    touch(&dir.join("a.go"));
    proc.finish().assert_code(0);
    assert_eq!(redis.get("myapp:{job}"), None);

    let (proc, token) = Redlock::run(&redis)
        .key("job")
        .env("REDLOCK_PREFIX", "other/")
        .hold(&dir, "b");
    assert_eq!(redis.get("other/{job}").as_deref(), Some(token.as_str()));
    touch(&dir.join("b.go"));
    proc.finish().assert_code(0);
    assert_eq!(redis.get("other/{job}"), None);
}

#[test]
fn unix_socket_url() {
    let redis = RedisServer::start_with(ServerOpts {
        unix: true,
        ..Default::default()
    });
    assert!(redis.url().starts_with("unix://"));
    let dir = TempDir::new();
    let (proc, token) = Redlock::run(&redis).key("sock").hold(&dir, "w");
    assert_eq!(redis.get(&lock_key("sock")), Some(token));
    touch(&dir.join("w.go"));
    proc.finish().assert_code(0);
    assert_eq!(redis.get(&lock_key("sock")), None);
}

#[test]
fn url_from_environment() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (proc, token) = Redlock::sub("run")
        .env("REDLOCK_URL", redis.url())
        .key("envurl")
        .hold(&dir, "w");
    assert_eq!(redis.get(&lock_key("envurl")), Some(token));
    touch(&dir.join("w.go"));
    proc.finish().assert_code(0);
}

#[test]
fn database_number_in_url_selects_the_database() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let url = format!("{}/3", redis.url());
    let (proc, token) = Redlock::run_at(&url).key("db").hold(&dir, "w");
    let keys = redis.all_keys();
    assert!(
        keys.contains(&format!("db3:{}", lock_key("db"))),
        "lock key not in db 3: {keys:?}"
    );
    assert!(
        !keys.contains(&format!("db0:{}", lock_key("db"))),
        "lock key in db 0: {keys:?}"
    );
    let mut con = redis.conn();
    redis::cmd("SELECT").arg(3).exec(&mut con).unwrap();
    let v: Option<String> = redis::cmd("GET")
        .arg(lock_key("db"))
        .query(&mut con)
        .unwrap();
    assert_eq!(v, Some(token));
    touch(&dir.join("w.go"));
    proc.finish().assert_code(0);
    let keys = redis.all_keys();
    assert!(
        !keys.contains(&format!("db3:{}", lock_key("db"))),
        "lock not released in db 3: {keys:?}"
    );
}

#[test]
fn leftover_processes_in_the_group_are_stopped() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // The leader exits at once and leaves a background sleep in its process group.
    let script = format!(
        "sleep 300 >/dev/null 2>&1 & echo $! > {bg}; exit 0",
        bg = dir.sh("bg")
    );
    Redlock::run(&redis)
        .key("leftover")
        .sh(&script)
        .status(0)
        .output();
    let bg = wait_for_pid(&dir.join("bg"));
    wait_pid_dead(bg, Duration::from_secs(2));
    assert_eq!(redis.get(&lock_key("leftover")), None);
}

#[test]
fn verbose_output_is_prefixed_and_quiet_is_silent() {
    let redis = RedisServer::start();
    // Diagnostics go to stderr, never to stdout.
    let out = Redlock::run(&redis)
        .key("verbose")
        .args(["-v", "-v"])
        .env("REDLOCK_TTL", "5s")
        .sh("exit 0")
        .status(0)
        .stderr_prefixed()
        .stdout("")
        .output();
    assert!(!out.stderr.is_empty(), "-vv printed nothing");

    Redlock::run(&redis)
        .key("verbose")
        .arg("-q")
        .sh("echo hi")
        .status(0)
        .stdout("hi\n")
        .stderr("")
        .output();
}

/// The command's REDLOCK_URL loses the password and keeps the rest: the database above all, or a
/// nested `redlock status` would look at database 0 and find the lock free. Whatever the order
/// of the socket URL's parameters, and in the path of a TCP URL.
#[test]
fn the_commands_url_keeps_the_database_in_any_order_and_no_password() {
    const PW: &str = "db-s3cret";
    let dir = TempDir::new();
    let pw_file = dir.join("pw");
    write_file(&pw_file, &format!("{PW}\n"), 0o600);
    let with_password = |unix| ServerOpts {
        unix,
        password: Some(PW.into()),
        ..ServerOpts::default()
    };
    let socket = RedisServer::start_with(with_password(true));
    let tcp = RedisServer::start_with(with_password(false));
    let sock = socket.socket_path().display().to_string();
    let port = tcp.port();
    for (url, seen) in [
        (
            format!("redis+unix://{sock}?pass={PW}&db=2"),
            format!("redis+unix://{sock}?db=2"),
        ),
        (
            format!("redis+unix://{sock}?db=2&pass={PW}"),
            format!("redis+unix://{sock}?db=2"),
        ),
        (
            format!("redis://:{PW}@127.0.0.1:{port}/2"),
            format!("redis://127.0.0.1:{port}/2"),
        ),
    ] {
        // The nested status reads the URL the command got, with the password from a file.
        let script = format!(
            "echo \"$REDLOCK_URL\"; REDLOCK_PASSWORD_FILE={} {} status --key nested",
            shell_quote(&pw_file),
            shell_quote(std::path::Path::new(BIN))
        );
        let out = Redlock::sub("run")
            .env("REDLOCK_URL", &url)
            .key("nested")
            .sh(&script)
            .any_stdout()
            .output();
        out.assert_no_secret(&[PW]);
        let mut lines = out.stdout.lines();
        assert_eq!(lines.next(), Some(seen.as_str()), "{url}: {}", out.stdout);
        assert_eq!(
            lines.next(),
            Some("lock 'nested' (redlock:{nested}) is held"),
            "{url}: {}",
            out.stdout
        );
    }
}

/// The command's REDLOCK_URL names the servers redlock locked on, wherever they came from: from
/// `--url` with REDLOCK_URL unset, from `--url` over a REDLOCK_URL naming another server, and
/// every `--url` of a quorum. A nested `redlock status` then finds the lock held, and no
/// password reaches the command.
#[test]
fn the_commands_url_names_the_servers_given_by_url() {
    const PW: &str = "url-s3cret";
    let dir = TempDir::new();
    let pw_file = dir.join("pw");
    write_file(&pw_file, &format!("{PW}\n"), 0o600);
    let opts = || ServerOpts {
        password: Some(PW.into()),
        ..ServerOpts::default()
    };
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_with(opts())).collect();
    let elsewhere = format!("redis://:other-s3cret@127.0.0.1:{}", free_port());
    let script = format!(
        "echo \"$REDLOCK_URL\"; REDLOCK_PASSWORD_FILE={} {} status --key nested",
        shell_quote(&pw_file),
        shell_quote(std::path::Path::new(BIN))
    );
    let plain = |s: &RedisServer| s.url_without_password();
    let all: Vec<String> = servers.iter().map(plain).collect();
    for (redlock, seen) in [
        (Redlock::run(&servers[0]), plain(&servers[0])),
        (
            Redlock::run(&servers[0]).env("REDLOCK_URL", &elsewhere),
            plain(&servers[0]),
        ),
        (
            Redlock::run_quorum(&servers).env("REDLOCK_URL", &elsewhere),
            all.join(" "),
        ),
    ] {
        let out = redlock.key("nested").sh(&script).any_stdout().output();
        out.assert_no_secret(&[PW, "other-s3cret"]);
        let mut lines = out.stdout.lines();
        assert_eq!(lines.next(), Some(seen.as_str()), "{}", out.stdout);
        assert!(
            lines.next().is_some_and(|l| l.contains("is held")),
            "{seen}: {}",
            out.stdout
        );
    }
}
