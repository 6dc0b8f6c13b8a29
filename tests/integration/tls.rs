//! rediss://: the server certificate is verified (system store, SSL_CERT_FILE, --tls-ca-cert), a
//! certificate from an unknown CA is refused with 69, TLS against a plain port fails within the
//! acquire timeout, mutual TLS with --tls-cert/--tls-key, and --tls-insecure warns.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// Makes a CA (`{name}-ca.crt`) and a server certificate for 127.0.0.1 signed by it, with openssl
/// and P-256 keys (fast to generate). Returns (CA certificate, server certificate, server key).
/// Run an openssl `script` (under `sh -e`), failing the test with openssl's stderr.
pub(super) fn openssl(script: &str) {
    let out = Command::new("sh")
        .args(["-c", script])
        .env("OPENSSL_CONF", "/dev/null")
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(super) fn make_certs(dir: &TempDir, name: &str) -> (PathBuf, PathBuf, PathBuf) {
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
    openssl(&script);
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

/// redlock over TLS: `run --url <url> --key <key>` with SSL_CERT_FILE=ca.
fn tls_run(url: &str, ca: &Path, key: &str) -> Redlock {
    Redlock::run_at(url).key(key).env("SSL_CERT_FILE", ca)
}

#[test]
fn lock_over_tls_with_a_trusted_ca() {
    let dir = TempDir::new();
    let (redis, ca) = tls_server(&dir);
    let seen = dir.join("seen");
    let script = format!("echo \"$REDLOCK_TOKEN\" > {}", shell_quote(&seen));
    // The command checks nothing itself: the test reads the key over the plain port meanwhile.
    tls_run(&redis.tls_url(), &ca, "tls")
        .ttl("2s")
        .sh(&script)
        .status(0)
        .output();
    let token = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(token.trim().len(), 36, "token {token:?}");
    assert_eq!(
        redis.get(&lock_key("tls")),
        None,
        "lock not released over TLS"
    );
    // The acquire reached the TLS server: it moved the fencing counter there.
    fence_of(&redis, "tls");
}

#[test]
fn certificate_from_an_unknown_ca_is_refused_with_69() {
    let dir = TempDir::new();
    let (redis, _good_ca) = tls_server(&dir);
    let (other_ca, _, _) = make_certs(&dir, "other");
    tls_run(&redis.tls_url(), &other_ca, "tls")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("certificate")
        .stderr_lines(1)
        .output();
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
    let out = tls_run(&url, &ca, "tls")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_prefixed()
        .stderr_lines(1)
        .output();
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

/// A client certificate signed by the CA `{ca}-ca.crt` that [`make_certs`] made. Returns
/// (certificate, key).
pub(super) fn make_client_cert(dir: &TempDir, ca: &str) -> (PathBuf, PathBuf) {
    let script = format!(
        r#"set -e
        cd {dir}
        openssl req -subj /CN=redlock-client -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
          -keyout client.key -out client.csr
        echo extendedKeyUsage=clientAuth > client-ext
        openssl x509 -req -days 2 -in client.csr -CA {ca}-ca.crt -CAkey {ca}-ca.key \
          -CAcreateserial -extfile client-ext -out client.crt"#,
        dir = shell_quote(dir.path()),
    );
    openssl(&script);
    (dir.join("client.crt"), dir.join("client.key"))
}

/// `redlock run --url <url> --key <key>`, with no SSL_CERT_FILE.
fn run_with(url: &str, key: &str) -> Redlock {
    Redlock::run_at(url).key(key).env_remove("SSL_CERT_FILE")
}

#[test]
fn tls_ca_cert_option_and_variable_trust_the_ca() {
    let dir = TempDir::new();
    let (redis, ca) = tls_server(&dir);
    let ca_arg = ca.to_str().unwrap();
    // Each run prints its fencing token, parsed below.
    let fence = || {
        run_with(&redis.tls_url(), "ca")
            .sh("echo $REDLOCK_FENCING_TOKEN")
            .any_stdout()
    };
    let first = fence()
        .args(["--tls-ca-cert", ca_arg])
        .status(0)
        .stderr("")
        .output();
    let second = fence().env("REDLOCK_TLS_CA_CERT", &ca).status(0).output();
    // --tls-ca-cert wins over SSL_CERT_FILE.
    let (other_ca, _, _) = make_certs(&dir, "other");
    let third = fence()
        .args(["--tls-ca-cert", ca_arg])
        .env("SSL_CERT_FILE", &other_ca)
        .status(0)
        .output();
    assert_increasing(&[first, second, third].map(|out| fencing_token(&out.stdout)));
}

#[test]
fn tls_ca_cert_of_the_wrong_ca_is_refused_with_69() {
    let dir = TempDir::new();
    let (redis, _good_ca) = tls_server(&dir);
    let (other_ca, _, _) = make_certs(&dir, "other");
    run_with(&redis.tls_url(), "ca")
        .args(["--tls-ca-cert", other_ca.to_str().unwrap()])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("certificate")
        .output();
    assert!(!dir.join("marker").exists());
    assert!(redis.all_keys().is_empty());
}

#[test]
fn mutual_tls_needs_the_client_certificate() {
    let dir = TempDir::new();
    let (ca, crt, key) = make_certs(&dir, "good");
    let (client_crt, client_key) = make_client_cert(&dir, "good");
    let redis = RedisServer::start_with(ServerOpts {
        tls: Some((crt, key)),
        tls_client_ca: Some(ca.clone()),
        ..ServerOpts::default()
    });
    let ca_arg = ca.to_str().unwrap();
    let with_cert = [
        "--tls-ca-cert",
        ca_arg,
        "--tls-cert",
        client_crt.to_str().unwrap(),
        "--tls-key",
        client_key.to_str().unwrap(),
    ];
    run_with(&redis.tls_url(), "mtls")
        .args(with_cert)
        .sh("echo ran")
        .status(0)
        .stdout("ran\n")
        .output();
    let fenced = fence_of(&redis, "mtls");

    // Without a client certificate the server ends the handshake: refused, nothing run.
    let out = run_with(&redis.tls_url(), "mtls")
        .args(["--tls-ca-cert", ca_arg])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(!dir.join("marker").exists());
    assert_eq!(
        fence_of(&redis, "mtls"),
        fenced,
        "the refused run took the lock"
    );
    assert!(
        !out.stderr.contains("PRIVATE KEY"),
        "stderr: {}",
        out.stderr
    );
}

#[test]
fn tls_insecure_connects_to_an_untrusted_server_and_warns() {
    let dir = TempDir::new();
    let (redis, _ca) = tls_server(&dir);
    // With a warning.
    run_with(&redis.tls_url(), "insecure")
        .arg("--tls-insecure")
        .sh("echo ran")
        .status(0)
        .stdout("ran\n")
        .stderr_contains("--tls-insecure")
        .stderr_contains("not verified")
        .output();
    fence_of(&redis, "insecure");
}

#[test]
fn bad_tls_options_are_usage_errors() {
    let dir = TempDir::new();
    let redis = RedisServer::start();
    let (ca, _, _) = make_certs(&dir, "ca");
    let ca_arg = ca.to_str().unwrap();
    let missing = dir.join("missing.pem");
    let missing = missing.to_str().unwrap();
    let tls_url = format!("rediss://127.0.0.1:{}", redis.port());
    let key_file = dir.join("ca-ca.key");
    let cases: [(&str, Vec<&str>, &str); 5] = [
        (&tls_url, vec!["--tls-ca-cert", missing], "missing.pem"),
        (&redis.url(), vec!["--tls-ca-cert", ca_arg], "rediss://"),
        (&tls_url, vec!["--tls-cert", ca_arg], "--tls-key"),
        (
            &tls_url,
            vec!["--tls-insecure", "--tls-ca-cert", ca_arg],
            "--tls-insecure",
        ),
        (
            &tls_url,
            vec!["--tls-ca-cert", key_file.to_str().unwrap()],
            "certificate",
        ),
    ];
    for (url, opts, says) in cases {
        run_with(url, "bad")
            .args(&opts)
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_contains(says)
            .stderr_lines(1)
            .output();
        assert!(!dir.join("marker").exists());
    }
    // REDLOCK_TLS_INSECURE=false is no --tls-insecure: beside --tls-ca-cert it is not refused
    // as one (the run goes on to the server, whose plain port fails the handshake: 69).
    for off in ["false", "0"] {
        run_with(&tls_url, "bad")
            .env("REDLOCK_TLS_INSECURE", off)
            .args(["--tls-ca-cert", ca_arg])
            .sh(&marker_script(&dir))
            .status(69)
            .any_stderr()
            .output();
    }
    assert!(redis.all_keys().is_empty());
}

/// A `--tls-key` that is not the key of `--tls-cert`'s certificate is a usage error on every
/// backend (64, one line), said before any connection: no server is needed to see it, and
/// the command does not run. etcd's and ZooKeeper's clients used to find it only at each
/// member's handshake (69, with no word of the key).
#[test]
fn a_client_key_that_is_not_the_certificates_is_refused_with_64_everywhere() {
    let dir = TempDir::new();
    let (ca, _, _) = make_certs(&dir, "pair");
    let (cert, _) = make_client_cert(&dir, "pair");
    // Another key: the CA's own.
    let other_key = dir.join("pair-ca.key");
    for url in [
        "rediss://127.0.0.1:1",
        "etcds://127.0.0.1:1",
        "postgres://u@127.0.0.1:1/db?sslmode=verify-full",
        "zks://127.0.0.1:1",
    ] {
        let out = Redlock::run_at(url)
            .key("pair")
            .ttl("3s")
            .arg("--tls-ca-cert")
            .arg(&ca)
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&other_key)
            .sh(&marker_script(&dir))
            .status(64)
            .any_stderr()
            .output();
        assert_eq!(
            out.stderr.trim().lines().count(),
            1,
            "{url}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("key") && !out.stderr.contains("PRIVATE KEY"),
            "{url}: {}",
            out.stderr
        );
        assert!(!dir.join("marker").exists(), "{url}: the command ran");
        if url.starts_with("etcds") || url.starts_with("zks") {
            assert_snapshot("tls-key-not-the-certificates.stderr", &out.stderr, &[]);
        }
    }
}
