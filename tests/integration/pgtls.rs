//! PostgreSQL over TLS beside libpq: for each sslmode, root certificate and server certificate,
//! redlock connects exactly when psql (the server's own, /usr/lib/postgresql/N/bin/psql) does
//! with the same URL, and says in words which check failed when it does not. One server, its
//! certificate swapped between cases by a reload; one set of certificates made with openssl.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use crate::integration::snapshots::assert_snapshot;

/// The certificates of the cases, made in `dir` with P-256 keys (fast), each `NAME.crt` with its
/// key `NAME.key`:
/// - `ca` and `other-ca`, two CAs;
/// - `self`, the server's own, self-signed as PostgreSQL's manual makes one (`openssl req
///   -x509`): `CA:TRUE`, and 127.0.0.1 in its Common Name only;
/// - `signed`, signed by `ca` for 127.0.0.1 and localhost (subject alternative names);
/// - `named`, signed by `ca` for db.example only;
/// - `expired`, as `self`, and `expired-signed`, as `signed`: valid for one day in 2020;
/// - `expired-ca`, a CA valid for one day in 2020, and `by-expired-ca`, valid now, signed by it
///   for 127.0.0.1 and localhost.
fn make_certs(dir: &Path) {
    let script = format!(
        r#"set -e
        cd {dir}
        key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        ca="-addext basicConstraints=critical,CA:TRUE"
        openssl req -x509 -days 2 -subj "/CN=redlock test CA" $key $ca -keyout ca.key -out ca.crt
        openssl req -x509 -days 2 -subj "/CN=another CA" $key $ca -keyout other-ca.key -out other-ca.crt
        openssl req -x509 -days 2 -subj /CN=127.0.0.1 $key $ca -keyout self.key -out self.crt
        openssl req -subj /CN=localhost $key -keyout signed.key -out signed.csr
        openssl req -subj /CN=db.example $key -keyout named.key -out named.csr
        openssl req -subj /CN=127.0.0.1 $key -keyout expired.key -out expired.csr
        openssl req -subj /CN=localhost $key -keyout expired-signed.key -out expired-signed.csr
        openssl req -subj "/CN=expired CA" $key -keyout expired-ca.key -out expired-ca.csr
        openssl req -subj /CN=localhost $key -keyout by-expired-ca.key -out by-expired-ca.csr
        echo subjectAltName=IP:127.0.0.1,DNS:localhost > signed.ext
        echo subjectAltName=DNS:db.example > named.ext
        for name in signed named; do
          openssl x509 -req -days 2 -in $name.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -extfile $name.ext -out $name.crt
        done
        # Dates in the past take openssl ca's -startdate and -enddate.
        mkdir db && touch db/index && echo 01 > db/serial
        printf '%s\n' '[ca]' 'default_ca = past' '[past]' 'database = db/index' \
          'new_certs_dir = db' 'serial = db/serial' 'default_md = sha256' 'policy = any' \
          '[any]' 'commonName = supplied' '[self]' 'basicConstraints = critical,CA:TRUE' \
          '[signed]' 'subjectAltName = IP:127.0.0.1,DNS:localhost' > past.cnf
        past="-batch -notext -config past.cnf -startdate 20200101000000Z -enddate 20200102000000Z"
        openssl ca $past -selfsign -keyfile expired.key -extensions self -in expired.csr \
          -out expired.crt 2>/dev/null
        openssl ca $past -cert ca.crt -keyfile ca.key -extensions signed \
          -in expired-signed.csr -out expired-signed.crt 2>/dev/null
        openssl ca $past -selfsign -keyfile expired-ca.key -extensions self -in expired-ca.csr \
          -out expired-ca.crt 2>/dev/null
        openssl x509 -req -days 2 -in by-expired-ca.csr -CA expired-ca.crt -CAkey expired-ca.key \
          -CAcreateserial -extfile signed.ext -out by-expired-ca.crt"#,
        dir = shell_quote(dir),
    );
    super::tls::openssl(&script);
}

/// The server presents `name`'s certificate from now on: its files copied where the server
/// reads them (owned by the server's user, private, or it refuses the key), the server
/// reloaded, and then waited for until a new connection is handed that certificate.
fn serve(pg: &PgServer, certs: &Path, name: &str) {
    let user = nix::unistd::geteuid()
        .is_root()
        .then(|| nix::unistd::User::from_name("postgres").ok().flatten())
        .flatten();
    let mut files = Vec::new();
    for ext in ["crt", "key"] {
        let to = pg.socket_dir().join(format!("{name}.{ext}"));
        std::fs::copy(certs.join(format!("{name}.{ext}")), &to).unwrap();
        if let Some(user) = &user {
            std::os::unix::fs::chown(&to, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
                .unwrap();
        }
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
        files.push(to.display().to_string());
    }
    pg.psql(&format!("ALTER SYSTEM SET ssl_cert_file = '{}'", files[0]));
    pg.psql(&format!("ALTER SYSTEM SET ssl_key_file = '{}'", files[1]));
    pg.psql("SELECT pg_reload_conf()");
    let wanted = read(&certs.join(format!("{name}.crt")));
    let wanted = first_pem(&wanted);
    wait_until(
        PATIENCE,
        &format!("the server to present {name}.crt"),
        || presented(pg.port()).is_some_and(|cert| cert == wanted),
    );
}

/// The certificate a new connection to the server on `port` is handed, as PEM (openssl's
/// client speaks PostgreSQL's request for TLS).
fn presented(port: u16) -> Option<String> {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-starttls", "postgres", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .env("OPENSSL_CONF", "/dev/null")
        .stdin(Stdio::null());
    let out = Proc::spawn(cmd).finish_within(PATIENCE);
    Some(first_pem(&out.stdout)).filter(|pem| !pem.is_empty())
}

/// The first PEM certificate in `text`, its lines trimmed.
fn first_pem(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .skip_while(|l| *l != "-----BEGIN CERTIFICATE-----")
        .take_while(|l| *l != "-----END CERTIFICATE-----")
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether psql connects with `url`, with `home` as its home directory; and what it said.
fn psql_connects(url: &str, home: &Path) -> (bool, String) {
    let bin = postgres_bin().expect("PostgreSQL under /usr/lib/postgresql");
    let mut cmd = Command::new(bin.join("psql"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PG") {
            cmd.env_remove(name);
        }
    }
    cmd.args(["-X", "-At", "-c", "SELECT 1", url])
        .env("HOME", home)
        .env("PGCONNECT_TIMEOUT", PATIENCE.as_secs().to_string())
        .stdin(Stdio::null());
    let out = Proc::spawn(cmd).finish_within(PATIENCE + Duration::from_secs(5));
    (out.status.success(), out.stderr)
}

/// One connection, made by psql and by redlock.
struct Case {
    /// The certificate the server presents.
    serves: &'static str,
    /// The URL's parameters (`@` for the certificates' directory).
    query: &'static str,
    /// redlock's --tls-ca-cert, in psql's URL as sslrootcert.
    ca_cert: Option<&'static str>,
    /// The certificate in ~/.postgresql/root.crt, if any.
    home_root: Option<&'static str>,
    /// 0: both connect; else both are refused, and this is redlock's exit status.
    status: i32,
    /// What redlock says when refused (`@` for the certificates' directory).
    said: &'static str,
    /// The snapshot of that line, for a message docs/messages.md quotes; empty for none.
    snapshot: &'static str,
}

const fn case(serves: &'static str, query: &'static str, status: i32, said: &'static str) -> Case {
    Case {
        serves,
        query,
        ca_cert: None,
        home_root: None,
        status,
        said,
        snapshot: "",
    }
}

/// Each sslmode against a self-signed server certificate, one a CA signed, one for another host
/// and expired ones: redlock connects exactly when psql does (over TLS, but for `disable`), and
/// says which check failed (exit 69; 64 when there is no root certificate to verify with).
#[test]
fn tls_is_accepted_where_psql_accepts_it_and_refused_in_words() {
    let pg = PgServer::start();
    Redlock::admin_at("init", &pg.url()).any_stdout().output();
    let dir = TempDir::new();
    let certs = dir.path();
    make_certs(certs);
    pg.psql("ALTER SYSTEM SET ssl = on");
    pg.psql("ALTER SYSTEM SET log_connections = on");
    let cases = [
        // The server's own self-signed certificate as its root: trusted, its Common Name the
        // host's address (there is no alternative name).
        case("self", "sslmode=verify-full&sslrootcert=@/self.crt", 0, ""),
        case("self", "sslmode=verify-ca&sslrootcert=@/self.crt", 0, ""),
        case(
            "self",
            "sslmode=verify-full&sslrootcert=@/ca.crt",
            69,
            "not trusted by sslrootcert @/ca.crt (it is self-signed, and not one of them): \
             give the server's own certificate",
        ),
        case("self", "sslmode=require", 0, ""),
        case("self", "sslmode=disable", 0, ""),
        Case {
            snapshot: "pg-tls-no-root.stderr",
            ..case(
                "self",
                "sslmode=verify-ca",
                64,
                "there is no root certificate",
            )
        },
        Case {
            home_root: Some("self"),
            ..case("self", "sslmode=verify-full", 0, "")
        },
        // require with a root certificate is verify-ca.
        Case {
            home_root: Some("other-ca"),
            ..case(
                "self",
                "sslmode=require",
                69,
                "not trusted by ~/.postgresql/root.crt (it is self-signed",
            )
        },
        case("signed", "sslmode=verify-full&sslrootcert=@/ca.crt", 0, ""),
        Case {
            snapshot: "pg-tls-untrusted.stderr",
            ..case(
                "signed",
                "sslmode=verify-full&sslrootcert=@/other-ca.crt",
                69,
                "not trusted by sslrootcert @/other-ca.crt (none of its certificates signed it)",
            )
        },
        Case {
            ca_cert: Some("other-ca"),
            ..case(
                "signed",
                "sslmode=require",
                69,
                "not trusted by --tls-ca-cert (none of its certificates signed it)",
            )
        },
        Case {
            ca_cert: Some("ca"),
            ..case("signed", "sslmode=require", 0, "")
        },
        case("signed", "sslmode=prefer", 0, ""),
        Case {
            snapshot: "pg-tls-wrong-host.stderr",
            ..case(
                "named",
                "sslmode=verify-full&sslrootcert=@/ca.crt",
                69,
                "not valid for host '127.0.0.1' (it names 'db.example'): connect by a name it \
                 names, or use sslmode=verify-ca",
            )
        },
        case("named", "sslmode=verify-ca&sslrootcert=@/ca.crt", 0, ""),
        Case {
            snapshot: "pg-tls-expired.stderr",
            ..case(
                "expired",
                "sslmode=verify-full&sslrootcert=@/expired.crt",
                69,
                "expired at 2020-01-02T00:00:00Z by this host's clock",
            )
        },
        case("expired", "sslmode=require", 0, ""),
        case(
            "expired-signed",
            "sslmode=verify-ca&sslrootcert=@/ca.crt",
            69,
            "expired at 2020-01-02T00:00:00Z by this host's clock",
        ),
        // The CA that signed it expired (OpenSSL checks a trusted certificate's dates; webpki
        // takes a root as an anchor with none).
        case(
            "by-expired-ca",
            "sslmode=verify-full&sslrootcert=@/expired-ca.crt",
            69,
            "expired at 2020-01-02T00:00:00Z by this host's clock",
        ),
    ];
    let dir_shown = certs.display().to_string();
    let port = format!(":{}", pg.port());
    let mut serving = "";
    let mut disagreed = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if case.serves != serving {
            serve(&pg, certs, case.serves);
            serving = case.serves;
        }
        let home = certs.join(format!("home{i}"));
        std::fs::create_dir_all(home.join(".postgresql")).unwrap();
        if let Some(root) = case.home_root {
            let file = home.join(".postgresql/root.crt");
            std::fs::copy(certs.join(format!("{root}.crt")), file).unwrap();
        }
        let query = case.query.replace('@', &dir_shown);
        let url = format!("{}?{query}", pg.url());
        let ca_cert = case.ca_cert.map(|ca| certs.join(format!("{ca}.crt")));
        let psql_url = match &ca_cert {
            Some(ca) => format!("{url}&sslrootcert={}", ca.display()),
            None => url.clone(),
        };
        let (psql, psql_said) = psql_connects(&psql_url, &home);
        let shown = format!(
            "{query} (serving {}.crt; ~/.postgresql/root.crt: {:?}; --tls-ca-cert {:?})",
            case.serves, case.home_root, case.ca_cert
        );
        if psql != (case.status == 0) {
            disagreed.push(format!("{shown}: psql connects: {psql}: {psql_said}"));
        }
        let encrypted_before = encrypted(&pg);
        let mut run = Redlock::run_at(&url).key("k").env("HOME", &home);
        if let Some(ca) = &ca_cert {
            run = run.arg("--tls-ca-cert").arg(ca);
        }
        // Each case's outcome is gathered, so that one failing case shows all of them.
        let out = run.arg("true").any_status().any_stderr().output();
        let said = case.said.replace('@', &dir_shown);
        let as_told = match case.status {
            0 => out.code() == 0 && out.stderr.is_empty(),
            status => {
                out.code() == status
                    && out.stderr.contains(&said)
                    && out.stderr.lines().count() == 1
            }
        };
        if !as_told {
            disagreed.push(format!(
                "{shown}: exit {}: {}",
                out.code(),
                out.stderr.trim()
            ));
            continue;
        }
        let tls = case.status == 0 && !case.query.contains("disable");
        if case.status == 0 && (encrypted(&pg) > encrypted_before) != tls {
            disagreed.push(format!("{shown}: over TLS: {}", !tls));
        }
        if !case.snapshot.is_empty() {
            let home = home.display().to_string();
            assert_snapshot(
                case.snapshot,
                out.stderr.trim(),
                &[
                    (home.as_str(), "/home/ops"),
                    (dir_shown.as_str(), "/etc/ssl"),
                    (port.as_str(), ":5432"),
                ],
            );
        }
    }
    assert!(
        disagreed.is_empty(),
        "{} of {} cases not as psql and the table say:\n{}",
        disagreed.len(),
        cases.len(),
        disagreed.join("\n")
    );
    // sslrootcert=system: the system's store, as SSL_CERT_FILE names it (psql 15 does not know
    // the word; libpq 16 does).
    let url = format!("{}?sslrootcert=system", pg.url());
    serve(&pg, certs, "signed");
    Redlock::run_at(&url)
        .key("k")
        .env("SSL_CERT_FILE", certs.join("ca.crt"))
        .arg("true")
        .output();
    Redlock::run_at(&url)
        .key("k")
        .env("SSL_CERT_FILE", certs.join("other-ca.crt"))
        .arg("true")
        .status(69)
        .stderr_contains("not trusted by the system's store (sslrootcert=system)")
        .output();
}

/// How many of redlock's sessions the server logged as over TLS.
fn encrypted(pg: &PgServer) -> usize {
    pg.log()
        .lines()
        .filter(|l| l.contains("application_name=redlock SSL enabled"))
        .count()
}
