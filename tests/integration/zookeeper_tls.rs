//! `zks://` against a real member serving TLS as docs/zookeeper.md's "TLS on the members" sets
//! one up: its `zoo.cfg` lines as pasted (the test's files and port in place of the page's),
//! its PKCS#8 key before the certificate in one PEM file, Netty's codec on the classpath. A run
//! with the CA and a client certificate takes the lock; the wrong CA, no client certificate,
//! and the plain port are refused (69) each with its own reason, the command not run.

use std::path::Path;

use super::tls::{make_certs, make_client_cert, openssl};
use crate::common::*;

/// The page's indented block that starts with `secureClientPort=`, line by line.
fn member_block() -> Vec<String> {
    let page = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/zookeeper.md"));
    let lines: Vec<&str> = page.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("    secureClientPort="))
        .expect("docs/zookeeper.md's member block");
    lines[start..]
        .iter()
        .map_while(|l| l.strip_prefix("    "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn zks_takes_the_lock_on_a_member_set_up_as_the_page_says() {
    let dir = TempDir::new();
    let (ca, srv_crt, srv_key) = make_certs(&dir, "zk");
    let (client_crt, client_key) = make_client_cert(&dir, "zk");
    // The page's key form: PKCS#8, then the certificate, in one file.
    let member_pem = dir.join("member.pem");
    openssl(&format!(
        "openssl pkcs8 -topk8 -nocrypt -in {key} > {pem} && cat {crt} >> {pem}",
        key = shell_quote(&srv_key),
        crt = shell_quote(&srv_crt),
        pem = shell_quote(&member_pem),
    ));
    let port = free_ports(1)[0];
    let block = member_block();
    assert!(
        block
            .iter()
            .any(|l| l.starts_with("ssl.keyStore.location=")),
        "{block:?}"
    );
    let config: Vec<String> = block
        .iter()
        .map(|l| {
            l.replace("2281", &port.to_string())
                .replace(
                    "/etc/zookeeper/tls/member.pem",
                    &member_pem.display().to_string(),
                )
                .replace("/etc/zookeeper/tls/ca.pem", &ca.display().to_string())
        })
        .collect();
    let zk = ZkEnsemble::start_with(ZkOpts {
        members: 1,
        extra_config: config,
        tls: true,
        ..ZkOpts::default()
    });
    let url = format!("zks://127.0.0.1:{port}");
    let tls = |r: Redlock, ca: &Path, client: bool| {
        let r = r.arg("--tls-ca-cert").arg(ca);
        match client {
            true => r
                .arg("--tls-cert")
                .arg(&client_crt)
                .arg("--tls-key")
                .arg(&client_key),
            false => r,
        }
    };
    let out = tls(Redlock::run_at(&url), &ca, true)
        .key("tls")
        .ttl("3s")
        .sh("echo $REDLOCK_FENCING_TOKEN")
        .any_stdout()
        .output();
    assert!(out.stdout.trim().parse::<u64>().is_ok(), "{}", out.stdout);
    assert!(zk.ls("/").contains(&"redlock:{tls}".to_owned()));
    tls(Redlock::admin_at("status", &url), &ca, true)
        .key("tls")
        .stdout_contains("is free")
        .output();

    // With a user, the nodes let in that user alone, by its password: not whoever shows a
    // certificate of the same subject (ZooKeeper logs a TLS client in by its certificate too).
    let owned = format!("zks://redlock@127.0.0.1:{port}");
    tls(Redlock::run_at(&owned), &ca, true)
        .env("REDLOCK_PASSWORD", "s3cret")
        .key("owned")
        .ttl("3s")
        .sh("true")
        .output();
    tls(Redlock::run_at(&url), &ca, true)
        .key("owned")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("not authorized")
        .output();
    assert!(!dir.join("marker").exists());

    // A run refused (69) in one line that says `why`, its command not run.
    let refused = |r: Redlock, why: &str| {
        let out = r
            .key("tls")
            .ttl("3s")
            .sh(&marker_script(&dir))
            .status(69)
            .any_stderr()
            .output();
        eprintln!("refused: {}", out.stderr.trim());
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains(why), "{}", out.stderr);
        assert!(!dir.join("marker").exists());
    };
    // Refused, each in one line saying why, the command not run: another CA; no client
    // certificate (the member asks for one: `ssl.clientAuth` is `need` by default); TLS to the
    // plain port.
    let (other_ca, _, _) = make_certs(&dir, "other");
    let plain = format!("zks://{}", zk.endpoints()[0]);
    for (url, ca, client, why) in [
        (
            url.as_str(),
            other_ca.as_path(),
            true,
            "from a CA redlock does not trust",
        ),
        (
            url.as_str(),
            ca.as_path(),
            false,
            "refused redlock's client certificate",
        ),
        (plain.as_str(), ca.as_path(), true, "not a TLS port"),
    ] {
        refused(tls(Redlock::run_at(url), ca, client), why);
    }
    // A client certificate of another CA: the member's alert says so.
    let other = TempDir::new();
    make_certs(&other, "other");
    let (other_crt, other_key) = make_client_cert(&other, "other");
    let foreign = tls(Redlock::run_at(&url), &ca, false)
        .arg("--tls-cert")
        .arg(&other_crt)
        .arg("--tls-key")
        .arg(&other_key);
    refused(foreign, "refused redlock's client certificate");

    // zk:// at the TLS port: the member answers redlock's own TLS hello, so the URL's scheme is
    // the mistake. zks:// where nothing listens, where nothing resolves, where something takes
    // the connection and says nothing, and where something answers in another protocol: no
    // word of certificates.
    let closed = free_ports(1)[0];
    let silent = fake_member(b"");
    let http = fake_member(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    for (url, tls_options, why) in [
        (
            format!("zk://127.0.0.1:{port}"),
            false,
            "speaks TLS on that port: use zks://",
        ),
        (
            format!("zks://127.0.0.1:{closed}"),
            true,
            "each refused the connection or did not answer",
        ),
        (
            format!("zks://no-such-member.invalid:{closed}"),
            true,
            "a name that does not resolve: no-such-member.invalid",
        ),
        (
            format!("zks://127.0.0.1:{silent}"),
            true,
            "each took the connection and said nothing",
        ),
        (
            format!("zks://127.0.0.1:{http}"),
            true,
            "did not answer in TLS",
        ),
    ] {
        let r = match tls_options {
            true => tls(Redlock::run_at(&url), &ca, true),
            false => Redlock::run_at(&url),
        };
        refused(r, why);
    }
}

/// A port on 127.0.0.1 where something takes every connection, sends `answer` (nothing: it
/// stays silent), and keeps the connection open until the test's process ends.
fn fake_member(answer: &'static [u8]) -> u16 {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port for a fake member");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(answer);
            held.push(stream);
        }
    });
    port
}

/// Members that take the connection and say nothing (frozen, say), more of them than one
/// attempt has time for: the run is not taken (69), and the line says why the attempt ran out
/// and that `--wait` tries again.
#[test]
fn silent_members_that_use_up_the_attempt_are_said_as_such() {
    let dir = TempDir::new();
    let members: Vec<String> = (0..8)
        .map(|_| format!("127.0.0.1:{}", fake_member(b"")))
        .collect();
    let started = std::time::Instant::now();
    let out = Redlock::run_at(&format!("zk://{}", members.join(",")))
        .key("silent")
        .ttl("3s")
        .sh(&marker_script(&dir))
        .status(69)
        .any_stderr()
        .output();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("answered in time") && out.stderr.contains("--wait tries again"),
        "{}",
        out.stderr
    );
    assert!(!dir.join("marker").exists());
}
