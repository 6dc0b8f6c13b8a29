//! How redlock reaches etcd, on real clusters: the URL and the flags etcd cannot honour refused
//! in one line (64), an unreachable cluster (69 in time), the documented least-privilege roles
//! with authentication on (and a URL without a user), made by pasting docs/etcd.md's blocks as
//! written, plain and over TLS, what a refusal advises to grant, `etcds://` with a member's certificate verified and a client
//! certificate given.

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
            "redis+cluster://, etcd://, etcds://, postgres://, postgresql://, zk:// or zks://)",
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

/// The indented code block of docs/etcd.md whose first line starts with `first`, as a user
/// pastes it. Panics unless there is exactly one.
fn etcd_page_block(first: &str) -> String {
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/etcd.md"));
    let lines: Vec<&str> = page.lines().collect();
    let blocks: Vec<String> = (0..lines.len())
        .filter(|i| {
            lines[*i].starts_with(&format!("    {first}"))
                && (*i == 0 || !lines[*i - 1].starts_with("    "))
        })
        .map(|i| {
            lines[i..]
                .iter()
                .map_while(|line| line.strip_prefix("    "))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    assert_eq!(blocks.len(), 1, "docs/etcd.md's blocks starting {first:?}");
    blocks.into_iter().next().unwrap()
}

/// The passwords the test gives for the page's placeholders.
const ROOT_PW: &str = "r00t-pw";
const JOB_PW: &str = "s3cret-pw";
const MONITOR_PW: &str = "m0nitor-pw";

/// Runs `exports`, then `lines`, in one shell as a user pastes them, with the etcdctl the
/// fixtures run first on PATH and no ETCD* variable of ours; each line must succeed. The page's
/// password placeholders become the test's passwords. Returns what the lines print.
fn paste(exports: &str, lines: &str) -> String {
    let script = format!("set -e\n{exports}\n{lines}\n")
        .replace("ROOT_PASSWORD", ROOT_PW)
        .replace("MONITOR_PASSWORD", MONITOR_PW)
        .replace("PASSWORD", JOB_PW);
    let etcdctl = etcdctl_binary();
    let path = std::env::join_paths(
        std::iter::once(etcdctl.parent().unwrap().to_path_buf()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    // etcdctl waits forever for an endpoint that does not answer (127.0.0.1:2379 where
    // nothing listens, say): timeout(1) ends the shell and its etcdctl, and the test says so.
    let mut cmd = std::process::Command::new("timeout");
    cmd.args(["15", "bash", "--norc", "--noprofile", "-c", &script])
        .env("PATH", path);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ETCD") {
            cmd.env_remove(&name);
        }
    }
    let out = Proc::spawn(cmd).finish();
    let hung = if out.code() == 124 {
        " (a line hung)"
    } else {
        ""
    };
    assert_eq!(out.code(), 0, "{script}\nstderr{hung}:\n{}", out.stderr);
    out.stdout
}

/// Pastes `exports` and docs/etcd.md's role block (see [`paste`]).
fn paste_the_role_block(exports: &str) {
    let role = etcd_page_block("etcdctl user add root ");
    assert!(role.ends_with("etcdctl auth enable"), "{role}");
    paste(exports, &role);
}

/// docs/etcd.md's role, made from the page's blocks as pasted on a real cluster, with
/// `ETCDCTL_ENDPOINTS` its own: redlock runs and every admin command works as `redlock`, with
/// its password from a file; another prefix is refused to it (69, saying what to grant); the
/// password is printed nowhere. As `redlock-monitor`, every admin command that reads works
/// and `run` is refused. The page's line that deletes a lock's record of runs deletes it.
#[test]
fn the_documented_role_can_do_everything_redlock_does_and_no_more() {
    let etcd = EtcdCluster::start_with(EtcdOpts {
        members: 1,
        ..EtcdOpts::default()
    });
    let dir = TempDir::new();
    let exports = etcd_page_block("export ETCDCTL_ENDPOINTS=10.").replace(
        "10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379",
        &etcd.endpoints().join(","),
    );
    assert!(exports.contains(&etcd.endpoints()[0]), "{exports}");
    paste_the_role_block(&exports);
    std::fs::write(dir.join("pw"), format!("{JOB_PW}\n")).unwrap();
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
    // The monitoring user reads what every admin command reads, and may not take a lock.
    std::fs::write(dir.join("monitor-pw"), format!("{MONITOR_PW}\n")).unwrap();
    let monitor = etcd.url().replace("etcd://", "etcd://redlock-monitor@");
    let as_monitor = |r: Redlock| r.env("REDLOCK_PASSWORD_FILE", dir.join("monitor-pw"));
    for sub in ["status", "history"] {
        as_monitor(Redlock::admin_at(sub, &monitor))
            .key("job")
            .any_stdout()
            .output();
    }
    as_monitor(Redlock::admin_at("check", &monitor))
        .key("job")
        .args(["--max-age", "1h"])
        .stdout_contains("OK: ")
        .output();
    as_monitor(Redlock::admin_at("list", &monitor)).output();
    let out = as_monitor(Redlock::run_at(&monitor))
        .key("job")
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
    out.assert_no_secret(&[MONITOR_PW]);
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
    out.assert_no_secret(&[JOB_PW]);
    // A wrong password: 69, one line, neither password shown.
    let out = Redlock::run_at(&url)
        .env("REDLOCK_PASSWORD", "wrong-pw")
        .key("job")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_lines(1)
        .output();
    out.assert_no_secret(&["wrong-pw", JOB_PW]);
    // No user named: the line says how to name one.
    Redlock::run_at(&etcd.url())
        .key("job")
        .sh(&marker_script(&dir))
        .status(69)
        .stderr_contains("has authentication on: name a user in the URL")
        .stderr_lines(1)
        .output();
    // The page's line that deletes a lock's record of runs, pasted below the same exports.
    let page = read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/etcd.md"));
    let delete = page
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|span| span.starts_with("etcdctl ") && span.contains(" del "))
        .expect("docs/etcd.md's line that deletes a record of runs")
        .replace("{NAME}", "{job}");
    let keys = "etcdctl --user root:ROOT_PASSWORD get --prefix --keys-only 'redlock:{job}/'";
    assert_ne!(
        paste(&exports, keys).trim(),
        "",
        "no record of runs to delete"
    );
    paste(&exports, &delete);
    assert_eq!(paste(&exports, keys).trim(), "", "{delete} left keys");
}

/// One etcd member that speaks TLS on its client port, with a certificate signed by its own CA
/// and asking every client for a certificate of that CA (`--client-cert-auth`).
struct TlsMember {
    _etcd: Proc,
    port: u16,
    ca: std::path::PathBuf,
    client_crt: std::path::PathBuf,
    client_key: std::path::PathBuf,
}

impl TlsMember {
    fn start(dir: &TempDir) -> TlsMember {
        use super::tls::{make_certs, make_client_cert};
        let (ca, crt, key) = make_certs(dir, "etcd");
        let (client_crt, client_key) = make_client_cert(dir, "etcd");
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
        TlsMember {
            _etcd: Proc::spawn(cmd),
            port,
            ca,
            client_crt,
            client_key,
        }
    }

    /// `redlock` with the CA and the client certificate.
    fn with_client(&self, r: Redlock) -> Redlock {
        let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
        r.args(["--tls-ca-cert", &path(&self.ca)]).args([
            "--tls-cert",
            &path(&self.client_crt),
            "--tls-key",
            &path(&self.client_key),
        ])
    }

    /// Waits until the member answers `redlock list` over TLS.
    fn wait_ready(&self) {
        let url = format!("etcds://127.0.0.1:{}", self.port);
        wait_until(PATIENCE, "etcd over TLS", || {
            self.with_client(Redlock::admin_at("list", &url))
                .any_status()
                .any_stderr()
                .output()
                .code()
                == 0
        });
    }
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
    use super::tls::make_certs;
    let dir = TempDir::new();
    let member = TlsMember::start(&dir);
    let (other_ca, _, _) = make_certs(&dir, "other");
    let (port, ca, client_crt, client_key) = (
        member.port,
        &member.ca,
        &member.client_crt,
        &member.client_key,
    );
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let url = format!("etcds://127.0.0.1:{port}");
    member.wait_ready();
    member
        .with_client(Redlock::run_at(&url))
        .key("tls")
        .sh("true")
        .output();
    // The member's certificate from a CA we were not told of.
    let out = Redlock::run_at(&url)
        .key("tls")
        .args(["--tls-ca-cert", &path(&other_ca)])
        .args([
            "--tls-cert",
            &path(client_crt),
            "--tls-key",
            &path(client_key),
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
        .args(["--tls-ca-cert", &path(ca)])
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

/// docs/etcd.md's exports for a TLS cluster, pasted as written with the test member's address
/// and files, and the role block below them: every line reaches the member through its CA and
/// the client certificate, and the role made works over `etcds://`.
#[test]
fn the_documented_role_is_made_on_a_tls_cluster_as_pasted() {
    let dir = TempDir::new();
    let member = TlsMember::start(&dir);
    member.wait_ready();
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let endpoint = format!("https://127.0.0.1:{}", member.port);
    let exports = etcd_page_block("export ETCDCTL_ENDPOINTS=https://")
        .replace(
            "https://10.0.0.1:2379,https://10.0.0.2:2379,https://10.0.0.3:2379",
            &endpoint,
        )
        .replace("/etc/redlock/etcd-ca.pem", &path(&member.ca))
        .replace("/etc/redlock/etcd-client.pem", &path(&member.client_crt))
        .replace(
            "/etc/redlock/etcd-client-key.pem",
            &path(&member.client_key),
        );
    for var in ["ENDPOINTS", "CACERT", "CERT", "KEY"] {
        assert!(
            exports.contains(&format!("export ETCDCTL_{var}=")),
            "{exports}"
        );
    }
    assert!(!exports.contains("/etc/redlock/"), "{exports}");
    paste_the_role_block(&exports);
    std::fs::write(dir.join("pw"), format!("{JOB_PW}\n")).unwrap();
    let url = format!("etcds://redlock@127.0.0.1:{}", member.port);
    member
        .with_client(Redlock::run_at(&url))
        .env("REDLOCK_PASSWORD_FILE", dir.join("pw"))
        .key("tls")
        .sh("true")
        .output();
    std::fs::write(dir.join("monitor-pw"), format!("{MONITOR_PW}\n")).unwrap();
    let monitor = format!("etcds://redlock-monitor@127.0.0.1:{}", member.port);
    member
        .with_client(Redlock::admin_at("status", &monitor))
        .env("REDLOCK_PASSWORD_FILE", dir.join("monitor-pw"))
        .key("tls")
        .any_stdout()
        .output();
}
