//! rediss://: the server certificate is verified (system store, SSL_CERT_FILE), a certificate from
//! an unknown CA is refused with 69, and TLS against a plain port fails within the acquire timeout.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::util::*;

const T: Duration = Duration::from_secs(20);

/// Makes a CA (`{name}-ca.crt`) and a server certificate for 127.0.0.1 signed by it, with openssl
/// and P-256 keys (fast to generate). Returns (CA certificate, server certificate, server key).
fn make_certs(dir: &TempDir, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let script = format!(
        r#"set -e
        cd {dir}
        key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        openssl req -x509 -days 2 -subj "/CN=redlock test CA {name}" $key -keyout {name}-ca.key -out {name}-ca.crt
        openssl req -subj /CN=localhost $key -keyout {name}-srv.key -out {name}-srv.csr
        echo subjectAltName=IP:127.0.0.1,DNS:localhost > {name}-ext
        openssl x509 -req -days 2 -in {name}-srv.csr -CA {name}-ca.crt -CAkey {name}-ca.key \
          -CAcreateserial -extfile {name}-ext -out {name}-srv.crt"#,
        dir = shell_quote(dir.path()),
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("OPENSSL_CONF", "/dev/null")
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = |suffix: &str| dir.join(&format!("{name}-{suffix}"));
    (path("ca.crt"), path("srv.crt"), path("srv.key"))
}

fn tls_server(dir: &TempDir) -> (RedisServer, PathBuf) {
    let (ca, crt, key) = make_certs(dir, "good");
    let redis = RedisServer::start_with(ServerOpts {
        tls: Some((crt, key)),
        ..ServerOpts::default()
    });
    (redis, ca)
}

/// redlock over TLS: `run --url <url> --key <key> -- sh -c <script>` with SSL_CERT_FILE=ca.
fn tls_run(url: &str, ca: &PathBuf, key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.env("SSL_CERT_FILE", ca)
        .args(["run", "--url", url, "--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

#[test]
fn lock_over_tls_with_a_trusted_ca() {
    let dir = TempDir::new();
    let (redis, ca) = tls_server(&dir);
    let seen = dir.join("seen");
    let script = format!("echo \"$REDLOCK_TOKEN\" > {}", shell_quote(&seen));
    // The command checks nothing itself: the test reads the key over the plain port meanwhile.
    let out = run_timeout(
        tls_run(&redis.tls_url(), &ca, "tls", &["--ttl", "2s"], &script),
        T,
    );
    out.assert_code(0);
    let token = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(token.trim().len(), 36, "token {token:?}");
    assert_eq!(
        redis.get(&lock_key("tls")),
        None,
        "lock not released over TLS"
    );
    let fence: Option<String> = redis.get(&fence_key("tls"));
    assert_eq!(
        fence.as_deref(),
        Some("1"),
        "the acquire did not reach the TLS server"
    );
}

#[test]
fn certificate_from_an_unknown_ca_is_refused_with_69() {
    let dir = TempDir::new();
    let (redis, _good_ca) = tls_server(&dir);
    let (other_ca, _, _) = make_certs(&dir, "other");
    let out = run_timeout(
        tls_run(
            &redis.tls_url(),
            &other_ca,
            "tls",
            &[],
            &marker_script(&dir),
        ),
        T,
    );
    out.assert_code(69);
    assert!(out.stderr.contains("certificate"), "stderr: {}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "stderr: {}", out.stderr);
    assert!(
        !dir.join("marker").exists(),
        "command ran without a verified server"
    );
    assert!(
        redis.all_keys().is_empty(),
        "keys left: {:?}",
        redis.all_keys()
    );
}

#[test]
fn tls_against_a_plain_port_fails_with_69_within_the_acquire_timeout() {
    let dir = TempDir::new();
    let redis = RedisServer::start();
    let (ca, _, _) = make_certs(&dir, "ca");
    let url = format!("rediss://127.0.0.1:{}", redis.port());
    // The acquire timeout is ttl/3: 1 s here.
    let out = run_timeout(
        tls_run(&url, &ca, "tls", &["--ttl", "3s"], &marker_script(&dir)),
        T,
    );
    out.assert_code(69);
    assert!(
        out.elapsed < Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
    assert!(!dir.join("marker").exists());
    assert!(
        redis.all_keys().is_empty(),
        "keys left: {:?}",
        redis.all_keys()
    );
}
