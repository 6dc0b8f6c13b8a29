//! How redlock reaches etcd, on real clusters: the URL and the flags etcd cannot honour refused
//! in one line (64), an unreachable cluster (69 in time), the documented least-privilege role
//! with authentication on (and a URL without a user), what a refusal advises to grant,
//! `etcds://` with a member's certificate verified and a client certificate given.

use std::time::Duration;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

#[test]
fn what_etcd_cannot_honour_is_refused_in_one_line() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let url = etcd.url();
    let etcds = url.replace("etcd://", "etcds://");
    let with_user = url.replace("etcd://", "etcd://redlock@");
    // (the URLs, more options, what the line says)
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (
            vec![&url],
            vec!["--min-replicas", "1"],
            "--min-replicas is for Redis",
        ),
        (vec![&url], vec!["--fsync"], "--fsync is for Redis"),
        (
            vec![&url, &url],
            vec![],
            "the members of one cluster go in one URL",
        ),
        (
            vec![&url, "redis://127.0.0.1:6379"],
            vec![],
            "Redis and etcd URLs together: a lock lives on one backend (one etcd cluster, or \
             one or more Redis servers)",
        ),
        (
            vec!["etcd://::1:2379"],
            vec![],
            "'::1:2379' is not HOST:PORT (an IPv6 address goes in brackets: [::1]:2379)",
        ),
        (
            vec!["etcd://127.0.0.1:2379,\u{fc}n\u{ef}code.example:2379"],
            vec![],
            "code.example:2379' is not HOST:PORT",
        ),
        (
            vec!["etcd:127.0.0.1:2379"],
            vec![],
            "lacks the '//' after 'etcd:'; use etcd://127.0.0.1:2379",
        ),
        (
            vec!["ETCD://127.0.0.1:2379"],
            vec![],
            "redis+cluster://, etcd://, etcds://, postgres:// or postgresql://)",
        ),
        (
            vec![&etcds],
            vec!["--tls-insecure"],
            "--tls-insecure does not work with etcds://",
        ),
        (
            vec!["etcd://127.0.0.1:2379/path"],
            vec![],
            "no path or parameters",
        ),
        (
            vec![&with_user],
            vec![],
            "names user 'redlock' but no password: put it in a file",
        ),
    ];
    for (urls, args, said) in cases {
        let out = Redlock::new()
            .arg("run")
            .args(urls.iter().flat_map(|u| ["--url", u]))
            .key("refused")
            .args(&args)
            .sh(&marker_script(&dir))
            .status(64)
            .stderr_lines(1)
            .output();
        assert!(out.stderr.contains(said), "{args:?}: {}", out.stderr);
    }
    assert!(
        !dir.join("marker").exists(),
        "a refused run ran its command"
    );
    assert!(
        etcd.get_prefix("redlock:").is_empty(),
        "a refused run wrote to etcd"
    );
    // Unreachable: 69 within the attempt's limit, nothing run.
    let out = Redlock::run_at(&format!("etcd://127.0.0.1:{}", free_port()))
        .key("away")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains("cannot reach etcd at"),
        "{}",
        out.stderr
    );
    assert!(
        out.elapsed < Duration::from_secs(12),
        "took {:?}",
        out.elapsed
    );
}

/// docs/etcd.md's role, made from the page's lines as written on a real cluster: redlock runs
/// and every admin command works as that user, with its password from a file; another prefix
/// is refused to it (69, saying what to grant); the password is printed nowhere.
#[test]
fn the_documented_role_can_do_everything_redlock_does_and_no_more() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/etcd.md"));
    let lines: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("    etcdctl "))
        .collect();
    assert!(lines.len() >= 5, "{lines:?}");
    for line in &lines {
        let line = line
            .replace("ROOT_PASSWORD", "r00t-pw")
            .replace("PASSWORD", "s3cret-pw");
        let out = etcd.etcdctl(line.split_whitespace());
        assert!(out.status.success(), "etcdctl {line}: {}", out.stderr);
    }
    std::fs::write(dir.join("pw"), "s3cret-pw\n").unwrap();
    let url = etcd.url().replace("etcd://", "etcd://redlock@");
    let as_user = |r: Redlock| r.env("REDLOCK_PASSWORD_FILE", dir.join("pw"));
    let out = as_user(Redlock::run_at(&url))
        .key("job")
        .sh("echo $REDLOCK_FENCING_TOKEN; echo \"$REDLOCK_URL\"")
        .any_stdout()
        .output();
    let mut lines = out.stdout.lines();
    assert!(lines.next().is_some_and(|token| !token.is_empty()));
    // The command's REDLOCK_URL keeps the user, whose password came from a file.
    assert_eq!(lines.next(), Some(url.as_str()), "{}", out.stdout);
    for sub in ["status", "history"] {
        as_user(Redlock::admin_at(sub, &url))
            .key("job")
            .any_stdout()
            .output();
    }
    as_user(Redlock::admin_at("check", &url))
        .key("job")
        .args(["--max-age", "1h"])
        .stdout_contains("OK: ")
        .output();
    as_user(Redlock::admin_at("list", &url)).output();
    as_user(Redlock::admin_at("release", &url))
        .key("job")
        .arg("--force")
        .any_stdout()
        .output();
    // The role stops at its prefix.
    let out = as_user(Redlock::run_at(&url))
        .key("job")
        .args(["--prefix", "other:"])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr
            .contains("does not let this user do what redlock needs"),
        "{}",
        out.stderr
    );
    assert!(!dir.join("marker").exists());
    out.assert_no_secret(&["s3cret-pw"]);
    // A wrong password: 69, one line, neither password shown.
    let out = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", "wrong-pw")
        .key("job")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&["wrong-pw", "s3cret-pw"]);
    // No user named: the line says how to name one.
    Redlock::run_at(&etcd.url())
        .key("job")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("has authentication on: name a user in the URL")
        .stderr_lines(1)
        .output();
}

/// A role that may only read the prefix: the monitoring commands work as its user; `run` and
/// `release --force` are refused (69), advising readwrite. A role without the prefix is
/// refused `status` and `list`, advising read, which docs/etcd.md says is enough for them.
/// Every refusal advised readwrite before.
#[test]
fn a_refusal_advises_what_the_command_needs() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    // A run to read about, before authentication is on.
    Redlock::run_at(&etcd.url()).key("k").sh("true").output();
    for line in [
        "user add root --new-user-password=r00t-pw",
        "user grant-role root root",
        "role add monitor",
        "role grant-permission monitor read redlock: --prefix=true",
        "user add monitor --new-user-password=m0n-pw",
        "user grant-role monitor monitor",
        "role add elsewhere",
        "role grant-permission elsewhere read other: --prefix=true",
        "user add elsewhere --new-user-password=e1se-pw",
        "user grant-role elsewhere elsewhere",
        "auth enable",
    ] {
        let out = etcd.etcdctl(line.split_whitespace());
        assert!(out.status.success(), "etcdctl {line}: {}", out.stderr);
    }
    std::fs::write(dir.join("monitor.pw"), "m0n-pw\n").unwrap();
    std::fs::write(dir.join("elsewhere.pw"), "e1se-pw\n").unwrap();
    let as_user = |user: &str, sub: &str| {
        let url = etcd.url().replace("etcd://", &format!("etcd://{user}@"));
        let redlock = match sub {
            "run" => Redlock::run_at(&url).sh(&marker_script(&dir)),
            _ => Redlock::admin_at(sub, &url),
        };
        let redlock = match sub {
            "list" => redlock,
            "check" => redlock.key("k").args(["--max-age", "1h"]),
            "release" => redlock.key("k").arg("--force"),
            _ => redlock.key("k"),
        };
        redlock.env("REDLOCK_PASSWORD_FILE", dir.join(&format!("{user}.pw")))
    };
    // Held, so that a forced release has something to delete.
    std::fs::write(dir.join("root.pw"), "r00t-pw\n").unwrap();
    let (holder, _) = Redlock::run_at(&etcd.url().replace("etcd://", "etcd://root@"))
        .env("REDLOCK_PASSWORD_FILE", dir.join("root.pw"))
        .key("k")
        .hold(&dir, "h");
    for sub in ["status", "list", "history", "check"] {
        as_user("monitor", sub).any_stdout().output();
    }
    // (user, subcommand, what to grant)
    for (user, sub, grant) in [
        ("monitor", "run", "readwrite"),
        ("monitor", "release", "readwrite"),
        ("elsewhere", "status", "read"),
        ("elsewhere", "list", "read"),
        ("elsewhere", "history", "read"),
    ] {
        let out = as_user(user, sub)
            .status(69)
            .stderr_lines(1)
            .any_stdout()
            .output();
        let advice = format!("grant the user's role {grant} on the prefix");
        assert!(out.stderr.contains(&advice), "{user} {sub}: {}", out.stderr);
        out.assert_no_secret(&["m0n-pw", "e1se-pw"]);
        if sub == "status" {
            // The line docs/messages.md quotes.
            let member = etcd.endpoints()[0].clone();
            assert_snapshot(
                "etcd-permission-denied.stderr",
                out.stderr.trim(),
                &[(&member, "127.0.0.1:2379")],
            );
        }
    }
    assert!(
        !dir.join("marker").exists(),
        "a refused run ran its command"
    );
    touch(&dir.join("h.go"));
    holder.finish_within(Duration::from_secs(20)).assert_code(0);
}

/// etcds://: the member's certificate is verified against --tls-ca-cert (an unknown CA is
/// refused, 69, nothing run), and with the member asking for a client certificate,
/// --tls-cert/--tls-key give one.
#[test]
fn etcds_verifies_the_member_and_gives_a_client_certificate() {
    use super::tls::{make_certs, make_client_cert};
    let dir = TempDir::new();
    let (ca, crt, key) = make_certs(&dir, "etcd");
    let (other_ca, _, _) = make_certs(&dir, "other");
    let (client_crt, client_key) = make_client_cert(&dir, "etcd");
    let port = free_port();
    let peer = free_port();
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let mut cmd = std::process::Command::new(etcd_binary());
    cmd.current_dir(dir.path())
        .args(["--name", "m0", "--data-dir", &path(&dir.join("data"))])
        .args(["--listen-client-urls", &format!("https://127.0.0.1:{port}")])
        .args([
            "--advertise-client-urls",
            &format!("https://127.0.0.1:{port}"),
        ])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
        ])
        .args(["--initial-cluster", &format!("m0=http://127.0.0.1:{peer}")])
        .args(["--cert-file", &path(&crt), "--key-file", &path(&key)])
        .args(["--client-cert-auth", "--trusted-ca-file", &path(&ca)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _etcd = Proc::spawn(cmd);
    let url = format!("etcds://127.0.0.1:{port}");
    let with_client = |r: Redlock| {
        r.args(["--tls-ca-cert", &path(&ca)]).args([
            "--tls-cert",
            &path(&client_crt),
            "--tls-key",
            &path(&client_key),
        ])
    };
    wait_until(PATIENCE, "etcd over TLS", || {
        with_client(Redlock::admin_at("list", &url))
            .any_status()
            .any_stderr()
            .output()
            .code()
            == 0
    });
    with_client(Redlock::run_at(&url))
        .key("tls")
        .sh("true")
        .output();
    // The member's certificate from a CA we were not told of.
    let out = Redlock::run_at(&url)
        .key("tls")
        .args(["--tls-ca-cert", &path(&other_ca)])
        .args([
            "--tls-cert",
            &path(&client_crt),
            "--tls-key",
            &path(&client_key),
        ])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains("a CA redlock does not trust") && out.stderr.contains("--tls-ca-cert"),
        "{}",
        out.stderr
    );
    // No client certificate where the member asks for one: however the handshake's failure
    // reaches redlock (an alert, a closed connection), the line says what to give.
    let out = Redlock::run_at(&url)
        .key("tls")
        .args(["--tls-ca-cert", &path(&ca)])
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.stderr.contains("--tls-cert and --tls-key"),
        "{}",
        out.stderr
    );
    // Plain etcd:// against the TLS port: 69 within the attempt's limit.
    let out = Redlock::run_at(&format!("etcd://127.0.0.1:{port}"))
        .key("tls")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    assert!(
        out.elapsed < Duration::from_secs(12),
        "took {:?}",
        out.elapsed
    );
    assert!(out.stderr.contains("etcds://"), "{}", out.stderr);
    assert!(!dir.join("marker").exists(), "a command ran");
}
