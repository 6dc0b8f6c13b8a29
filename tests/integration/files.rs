//! The files a user names: a device, a directory, a socket (or a FIFO where no pipe will do)
//! where `--password-file`, `--tls-ca-cert`, `--tls-cert`, `--tls-key`, `SSL_CERT_FILE` or
//! `--metrics-file` expects a file is refused at start with 64 and one line naming the option, the path and what is there,
//! before any lock is taken; a file larger than its cap (64 KiB for a password, 1 MiB for PEM)
//! too. Each run is under a 1 GiB address-space limit and a deadline, so a redlock that read a
//! device into memory, or waited on a FIFO, fails the test instead of taking the machine.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;

/// At most 1 GiB of address space for redlock.
const LIMITED: [&str; 2] = ["prlimit", "--as=1073741824"];
/// Refusing a file takes no time; a loaded machine gets some.
const PROMPT: Duration = Duration::from_secs(5);

/// Things that are not regular files, each with how redlock names it.
fn not_files(dir: &TempDir) -> (Vec<(PathBuf, &'static str)>, UnixListener) {
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let socket = dir.join("socket");
    let listener = UnixListener::bind(&socket).unwrap();
    let sub = dir.join("subdir");
    std::fs::create_dir(&sub).unwrap();
    // A link to a device is the device.
    let link = dir.join("zero-link");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let things = vec![
        (fifo, "a FIFO"),
        (PathBuf::from("/dev/zero"), "a character device"),
        (link, "a character device"),
        (sub, "a directory"),
        (socket, "a socket"),
    ];
    (things, listener)
}

/// What a case adds to a command line: the file option under test.
type Setup<'a> = dyn Fn(Redlock) -> Redlock + 'a;

/// `redlock run` against `redis` (`rediss://` on its plain port when `tls`: nothing connects),
/// with `setup` adding the file option; it must exit 64 promptly with the one line `want`,
/// without running the command or leaving a key.
#[track_caller]
fn refused(
    redis: &RedisServer,
    dir: &TempDir,
    tls: bool,
    setup: &dyn Fn(Redlock) -> Redlock,
    want: &str,
) {
    let url = if tls {
        format!("rediss://127.0.0.1:{}", redis.port())
    } else {
        redis.url()
    };
    let out = setup(Redlock::run_at(&url).through(LIMITED))
        .key("files")
        .sh(&marker_script(dir))
        .status(64)
        .stderr(&format!("redlock: {want}\n"))
        .output();
    assert!(out.elapsed < PROMPT, "took {:?}: {want}", out.elapsed);
    assert!(!dir.join("marker").exists(), "the command ran: {want}");
    assert!(
        redis.all_keys().is_empty(),
        "{want}: {:?}",
        redis.all_keys()
    );
}

#[test]
fn a_file_option_that_is_not_a_regular_file_is_refused_at_start() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let (things, _listener) = not_files(&dir);
    let cert = dir.join("cert.pem");
    write_file(&cert, "-----BEGIN CERTIFICATE-----\n", 0o600);
    for (path, what) in &things {
        let p = path.as_os_str();
        let cases: [(&str, bool, &Setup); 7] = [
            ("--password-file", false, &|r| {
                r.arg("--password-file").arg(p)
            }),
            ("--password-file", false, &|r| {
                r.env("REDLOCK_PASSWORD_FILE", p)
            }),
            ("--tls-ca-cert", true, &|r| r.arg("--tls-ca-cert").arg(p)),
            ("--tls-cert", true, &|r| {
                r.arg("--tls-cert").arg(p).arg("--tls-key").arg(&cert)
            }),
            ("--tls-key", true, &|r| {
                r.arg("--tls-cert").arg(&cert).arg("--tls-key").arg(p)
            }),
            ("SSL_CERT_FILE", true, &|r| r.env("SSL_CERT_FILE", p)),
            ("--metrics-file", false, &|r| r.arg("--metrics-file").arg(p)),
        ];
        for (option, tls, setup) in cases {
            // A FIFO is a pipe, which the files redlock only reads may be (process
            // substitution; credentials::a_password_through_a_pipe_is_read): SSL_CERT_FILE,
            // read by rustls-native-certs, and the metrics file, written, may not.
            if *what == "a FIFO" && !matches!(option, "SSL_CERT_FILE" | "--metrics-file") {
                continue;
            }
            let want = format!("{option} {}: not a regular file ({what})", path.display());
            refused(&redis, &dir, tls, setup, &want);
        }
    }
    // The admin subcommands read the same files the same way.
    let zero = things[1].0.as_os_str();
    for sub in ["status", "history", "release"] {
        let admin = Redlock::admin(sub, &redis).through(LIMITED).key("files");
        let admin = if sub == "release" {
            admin.arg("--force")
        } else {
            admin
        };
        let out = admin
            .arg("--password-file")
            .arg(zero)
            .status(64)
            .stderr_contains("--password-file ")
            .stderr_contains(": not a regular file (a character device)")
            .stderr_lines(1)
            .output();
        assert!(out.elapsed < PROMPT, "{sub} took {:?}", out.elapsed);
    }
}

#[test]
fn a_file_larger_than_its_cap_is_refused_without_being_read_whole() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let big = |name: &str, len: usize, head: &str| -> PathBuf {
        let path = dir.join(name);
        let mut bytes = head.as_bytes().to_vec();
        bytes.resize(len, b'x');
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let password = big("password", (64 << 10) + 1, "");
    let pem = big("ca.pem", (1 << 20) + 1, "-----BEGIN CERTIFICATE-----\n");
    let shown = |p: &Path| p.display().to_string();
    refused(
        &redis,
        &dir,
        false,
        &|r| r.arg("--password-file").arg(&password),
        &format!(
            "--password-file {}: larger than 64 KiB: a password file holds one password",
            shown(&password)
        ),
    );
    refused(
        &redis,
        &dir,
        true,
        &|r| r.arg("--tls-ca-cert").arg(&pem),
        &format!(
            "--tls-ca-cert {}: larger than 1 MiB, more than a PEM file of certificates holds",
            shown(&pem)
        ),
    );
    refused(
        &redis,
        &dir,
        true,
        &|r| r.env("SSL_CERT_FILE", &pem),
        &format!(
            "SSL_CERT_FILE {}: larger than 1 MiB, more than a PEM file of certificates holds",
            shown(&pem)
        ),
    );
    // No word of the password file is shown.
    let out = Redlock::run(&redis)
        .key("files")
        .arg("--password-file")
        .arg(&password)
        .command(["true"])
        .status(64)
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&["xxxx"]);
}

#[test]
fn a_metrics_file_turned_into_a_fifo_during_the_run_never_blocks_its_end() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let prom = dir.join("job.prom");
    // The command turns the metrics file into a FIFO, and puts one where redlock (its parent)
    // writes its temporary file: neither is opened, neither blocks.
    let script = format!(
        "mkfifo {prom} && mkfifo {dir}/.job.prom.$PPID.tmp",
        prom = dir.sh("job.prom"),
        dir = shell_quote(dir.path()),
    );
    let out = Redlock::run(&redis)
        .through(LIMITED)
        .key("files")
        .arg("--metrics-file")
        .arg(&prom)
        .sh(&script)
        .status(0)
        .stderr(&format!(
            "redlock: warning: --metrics-file {}: not a regular file (a FIFO); the metrics were not written\n",
            prom.display()
        ))
        .output();
    assert!(out.elapsed < PROMPT, "took {:?}", out.elapsed);
    assert_eq!(
        redis.get(&lock_key("files")),
        None,
        "the lock is still held"
    );

    // A FIFO at the temporary file's name alone is replaced by the file: written, and renamed.
    let other = dir.join("other.prom");
    let out = Redlock::run(&redis)
        .through(LIMITED)
        .key("files")
        .arg("--metrics-file")
        .arg(&other)
        .sh(&format!(
            "mkfifo {}/.other.prom.$PPID.tmp",
            shell_quote(dir.path())
        ))
        .status(0)
        .output();
    assert!(out.elapsed < PROMPT, "took {:?}", out.elapsed);
    assert!(read(&other).contains("redlock_exit_status{key=\"files\"} 0"));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".other"))
        .collect();
    // Only the lock file that runs take turns on stays, as it is meant to.
    assert_eq!(left, [".other.prom.lock"], "temporary files left");
}

/// `SSL_CERT_FILE` is read wherever the system's store is, on every backend: an `etcds://` URL
/// without `--tls-ca-cert`, and PostgreSQL's `sslrootcert=system`. A FIFO, a device or a
/// directory there is refused at start (64) as on `rediss://`, before anything connects: no
/// hang, no memory filled. (Nothing listens at the URLs: the refusal comes first.)
#[test]
fn ssl_cert_file_is_checked_on_every_backend_that_reads_the_systems_store() {
    let dir = TempDir::new();
    let (things, _listener) = not_files(&dir);
    let port = free_port();
    let urls = [
        format!("etcds://127.0.0.1:{port}"),
        format!("postgres://u@127.0.0.1:{port}/db?sslmode=verify-full&sslrootcert=system"),
    ];
    for url in &urls {
        for (path, what) in &things {
            let want = format!(
                "SSL_CERT_FILE {}: not a regular file ({what})",
                path.display()
            );
            let out = Redlock::run_at(url)
                .through(LIMITED)
                .env("SSL_CERT_FILE", path)
                .key("files")
                .sh(&marker_script(&dir))
                .status(64)
                .stderr_contains(&want)
                .stderr_lines(1)
                .output();
            assert!(
                out.elapsed < PROMPT,
                "{url}: took {:?}: {want}",
                out.elapsed
            );
            assert!(
                !dir.join("marker").exists(),
                "{url}: the command ran: {want}"
            );
        }
    }
}
