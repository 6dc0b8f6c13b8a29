//! The crontab recipes of docs/recipes.md, installed as pasted into a real Debian cron (`cron -f`,
//! started here) against a real password-protected redis-server: the job runs once a minute
//! whichever host's cron fires, a busy host and a run that succeeded send no mail, and a failure
//! mails one `redlock:` line without the password. The recipe's `/etc/cron.d` file is the one
//! packaging/ ships, and README's cron lines are the recipe's `crontab -e` lines.
//!
//! The cron runs in a mount namespace of its own (`unshare --mount`, as root), where a temp dir
//! is bind-mounted over /etc/cron.d, /etc/crontab and /var/spool/cron/crontabs, a tmpfs over
//! /run (cron's pid file) and overlays put this build's redlock at /usr/bin/redlock, a stand-in
//! report at /usr/local/bin/report.sh, a sendmail that keeps the mails in the temp dir and a
//! /dev/log for cron's syslog. So nothing is written to the machine's /etc/cron.d, the machine's
//! own cron daemon (if any) and other test runs' crons are not in the way, none of the machine's
//! jobs runs, no mail leaves, and everything goes with the last process of the namespace: cron,
//! killed on drop.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::*;

const PASSWORD: &str = "cron-recipe-s3cret";
/// The recipes' Redis URL and password file, replaced by the test's.
const RECIPE_URL: &str = "rediss://redis.internal:6380/0";
const RECIPE_PASSWORD_FILE: &str = "/etc/redlock/password";

fn committed(path: &str) -> String {
    read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
}

/// The indented code blocks of `markdown`'s section `heading` (up to the next `## `), each with the
/// paragraph before it.
fn blocks_in_section(markdown: &str, heading: &str) -> Vec<(String, String)> {
    let start = markdown
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading:?}"));
    let section = &markdown[start + heading.len() + 2..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut found = Vec::new();
    let (mut last, mut prose, mut code) = (String::new(), String::new(), String::new());
    for line in section.lines().chain([""]) {
        if let Some(code_line) = line.strip_prefix("    ") {
            code.push_str(code_line);
            code.push('\n');
            continue;
        }
        if !code.is_empty() {
            found.push((last.clone(), std::mem::take(&mut code)));
        }
        if line.is_empty() {
            if !prose.is_empty() {
                last = std::mem::take(&mut prose);
            }
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    found
}

/// docs/recipes.md's two crontab forms: (`crontab -e`'s lines, the `/etc/cron.d` file).
fn cron_recipes() -> (String, String) {
    let blocks: Vec<(String, String)> =
        blocks_in_section(&committed("docs/recipes.md"), "## crontab")
            .into_iter()
            .filter(|(_, code)| code.contains("redlock run "))
            .collect();
    assert_eq!(
        blocks.len(),
        2,
        "docs/recipes.md's crontab section: {blocks:#?}"
    );
    let (user_label, user) = &blocks[0];
    let (system_label, system) = &blocks[1];
    assert!(user_label.contains("`crontab -e`"), "{user_label}");
    assert!(
        system_label.contains("`/etc/cron.d/nightly-report`"),
        "{system_label}"
    );
    (user.clone(), system.clone())
}

/// Replaces `from` (which must occur exactly once) in `text`.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} once in:\n{text}");
    text.replacen(from, to, 1)
}

/// A crontab as pasted, with the test's Redis URL and password file, and the job's schedule made
/// every minute (the recipe's is nightly); nothing else changed. Checks first that every line is
/// a variable or a job with redlock's full path, and that no line has a `%` (cron's newline).
fn as_installed(crontab: &str, url: &str, password_file: &Path) -> String {
    let mut out = String::new();
    for line in crontab.lines() {
        assert!(!line.contains('%'), "a % is a newline to cron: {line}");
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() == 1 && line.contains('=') {
            out.push_str(line);
        } else {
            assert!(fields.len() > 6, "neither a variable nor a job: {line}");
            assert!(
                fields[5..7].contains(&"/usr/bin/redlock"),
                "redlock by its full path: {line}"
            );
            // The five schedule fields, then the rest as written.
            let mut rest = line;
            for _ in 0..5 {
                rest = rest.trim_start();
                rest = &rest[rest.find(char::is_whitespace).unwrap()..];
            }
            out.push_str("* * * * *");
            out.push_str(rest);
        }
        out.push('\n');
    }
    let out = replace_once(&out, RECIPE_URL, url);
    replace_once(
        &out,
        RECIPE_PASSWORD_FILE,
        &password_file.display().to_string(),
    )
}

#[test]
fn the_cron_d_file_packaging_ships_and_the_readme_lines_are_the_recipes() {
    let (user, system) = cron_recipes();
    let shipped: String = committed("packaging/cron/nightly-report")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(shipped, system, "packaging/cron/nightly-report");
    let readme: Vec<(String, String)> =
        blocks_in_section(&committed("README.md"), "## Quick start")
            .into_iter()
            .filter(|(_, code)| code.contains("/usr/bin/redlock run "))
            .collect();
    assert_eq!(readme.len(), 1, "README's cron lines: {readme:#?}");
    assert_eq!(readme[0].1, user, "README's cron lines");
    // The two forms differ in the user field alone.
    assert_eq!(user, system.replacen("  root  ", "  ", 1));
}

/// Whether this machine can run the test: Debian's cron is installed and we are root (cron.d
/// files must be root's, and cron runs jobs as their user). Else says so on the terminal and
/// skips, unless `CI` is set (.ci/run sets it), where a skip would hide a broken set-up.
fn cron_available() -> bool {
    let problem = if !Path::new("/usr/sbin/cron").exists() {
        "Debian's cron is not installed (/usr/sbin/cron; scripts/test.sh installs it)"
    } else if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
        "not root: cron runs only root's files in /etc/cron.d and needs root to run jobs"
    } else {
        return true;
    };
    let ci = std::env::var("CI").unwrap_or_default();
    assert!(
        ci.is_empty() || ci == "false" || ci == "0",
        "CI={ci}: the cron test cannot run here: {problem}"
    );
    // Straight to stderr, past the test harness's capture, so that a skip is seen.
    let _ = writeln!(std::io::stderr(), "crond:: skipped: {problem}");
    false
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// cron's syslog messages, read from the datagram socket the namespace's /dev/log points at, by
/// a thread of its own: a socket nobody reads fills up, and then cron blocks in syslog().
struct Syslog {
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Syslog {
    fn bind(path: &Path) -> Syslog {
        let socket = UnixDatagram::bind(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sink, stopped) = (Arc::clone(&lines), Arc::clone(&stop));
        thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while !stopped.load(Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut buf) {
                    let line = String::from_utf8_lossy(&buf[..n]).trim_end().to_owned();
                    sink.lock().unwrap().push(line);
                }
            }
        });
        Syslog { lines, stop }
    }

    /// Every message so far, one a line.
    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }
}

impl Drop for Syslog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The mails the namespace's sendmail kept, in the order sent.
fn mails(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.iter().map(|path| read(path)).collect()
}

/// Both recipes on two "hosts" that share one Redis and one key: host A has the `/etc/cron.d`
/// file, host B the `crontab -e` lines in root's crontab; host C has the cron.d file pointed at a
/// port where nothing listens. They are one cron here (two crons would need two machines), which
/// starts all three in the same second, as NTP-synced hosts do: the lock alone keeps the second
/// one out, because the stand-in report takes 2 s, longer than the hosts' starts are apart (a
/// job shorter than that wants `--min-interval`, as the recipe says). Two consecutive minutes
/// must each have exactly one run. 80 to 140 s, most of it waiting for cron's minutes.
#[test]
fn the_cron_recipes_run_once_a_minute_in_a_real_cron() {
    if !cron_available() {
        return;
    }
    let (user, system) = cron_recipes();
    let redis = RedisServer::start_with(ServerOpts {
        password: Some(PASSWORD.to_owned()),
        ..ServerOpts::default()
    });
    let dir = TempDir::new();
    for sub in [
        "cron.d",
        "crontabs",
        "usr-bin",
        "usr-local-bin",
        "usr-sbin",
        "dev",
        "mail",
    ] {
        std::fs::create_dir(dir.join(sub)).unwrap();
    }
    let password = dir.join("password");
    write_file(&password, &format!("{PASSWORD}\n"), 0o400);
    let url = redis.url_without_password() + "/0";
    let dead = format!("redis://127.0.0.1:{}/0", free_port());
    // Host A and C: /etc/cron.d files, root's, not group- or other-writable, names without dots.
    write_file(
        &dir.join("cron.d/nightly-report"),
        &as_installed(&system, &url, &password),
        0o644,
    );
    write_file(
        &dir.join("cron.d/nightly-report-unreachable"),
        &as_installed(&system, &dead, &password),
        0o644,
    );
    // Host B: root's crontab as `crontab -e` leaves it (mode 0600, named after its user).
    write_file(
        &dir.join("crontabs/root"),
        &as_installed(&user, &url, &password),
        0o600,
    );
    // No /etc/crontab jobs (the machine's hourly run-parts) in this cron.
    write_file(&dir.join("crontab"), "SHELL=/bin/sh\n", 0o644);
    std::os::unix::fs::symlink(BIN, dir.join("usr-bin/redlock")).unwrap();
    write_file(
        &dir.join("usr-local-bin/report.sh"),
        &format!(
            "#!/bin/sh\necho \"$(date +%s) $REDLOCK_FENCING_TOKEN\" >> {}\nsleep 2\n",
            dir.sh("runs")
        ),
        0o755,
    );
    write_file(
        &dir.join("usr-sbin/sendmail"),
        &format!("#!/bin/sh\ncat > {}/$(date +%s%N).$$\n", dir.sh("mail")),
        0o755,
    );
    // cron's syslog: /dev/log in the namespace is a link to this socket.
    std::os::unix::fs::symlink(dir.join("log.sock"), dir.join("dev/log")).unwrap();
    let syslog = Syslog::bind(&dir.join("log.sock"));
    let d = dir.path().display();
    let script = format!(
        "set -e
mount --bind {d}/cron.d /etc/cron.d
mount --bind {d}/crontab /etc/crontab
mount --bind {d}/crontabs /var/spool/cron/crontabs
mount -t tmpfs -o mode=755 tmpfs /run
mount -t overlay overlay -o lowerdir={d}/usr-bin:/usr/bin /usr/bin
mount -t overlay overlay -o lowerdir={d}/usr-local-bin:/usr/local/bin /usr/local/bin
mount -t overlay overlay -o lowerdir={d}/usr-sbin:/usr/sbin /usr/sbin
mount -t overlay overlay -o lowerdir={d}/dev:/dev /dev
exec /usr/sbin/cron -f"
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
    let mut cron = Proc::spawn(cmd);
    let started = Instant::now();
    thread::sleep(Duration::from_secs(1));
    assert!(
        cron.running(),
        "cron did not start in its namespace: {}",
        cron.stderr_so_far()
    );
    // cron reads the files at its start: a file it ignores says so at once.
    let refused = |log: &str| log.contains("ERROR") || log.contains("Error");
    assert!(
        !refused(&syslog.text()),
        "cron refused a file:\n{}",
        syslog.text()
    );

    let runs = || -> Vec<u64> {
        read(&dir.join("runs"))
            .lines()
            .map(|line| line.split(' ').next().unwrap().parse().unwrap())
            .collect()
    };
    // cron runs a minute's jobs when the minute starts: the first within 61 s of its start.
    while runs().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(75),
            "no run within 75 s of cron's start; cron's syslog:\n{}",
            syslog.text()
        );
        assert!(cron.running(), "cron exited: {}", cron.stderr_so_far());
        thread::sleep(Duration::from_millis(200));
    }
    let first = runs()[0] / 60;
    // The next minute's runs, the busy host's exit and the mails are over 15 s into it.
    let deadline = (first + 1) * 60 + 15;
    while unix_now() < deadline {
        assert!(started.elapsed() < Duration::from_secs(150), "out of time");
        assert!(cron.running(), "cron exited: {}", cron.stderr_so_far());
        thread::sleep(Duration::from_millis(500));
    }
    drop(cron);
    let log = syslog.text();
    assert!(!refused(&log), "cron refused something:\n{log}");
    let per_minute = |minute: u64| runs().iter().filter(|stamp| **stamp / 60 == minute).count();
    assert_eq!(
        (per_minute(first), per_minute(first + 1)),
        (1, 1),
        "runs per minute: {:?}; cron's syslog:\n{log}",
        runs()
    );

    // Host C's failures: one mail a minute, one `redlock:` line each, the password file's name
    // in the X-Cron-Env: headers and no password anywhere. Hosts A and B: no mail.
    let mails = mails(&dir.join("mail"));
    let mut failures = 0;
    for mail in &mails {
        assert!(
            !mail.contains(PASSWORD),
            "a mail carries the password:\n{mail}"
        );
        let (headers, body) = mail.split_once("\n\n").expect("headers and a body");
        assert!(
            headers.contains(&format!("X-Cron-Env: <REDLOCK_URL={dead}>")),
            "a mail from a host that reaches Redis:\n{mail}"
        );
        assert!(
            headers.contains(&format!(
                "X-Cron-Env: <REDLOCK_PASSWORD_FILE={}>",
                password.display()
            )),
            "{mail}"
        );
        assert_eq!(body.lines().count(), 1, "{mail}");
        assert!(
            body.starts_with("redlock: cannot take lock 'nightly-report'"),
            "{mail}"
        );
        failures += 1;
    }
    // Host C's file is the recipe's /etc/cron.d file: no mail from it means cron ignored it.
    assert_eq!(
        failures, 2,
        "host C's /etc/cron.d file sent {failures} failure mails in two minutes: {mails:#?}\n{log}"
    );
}
