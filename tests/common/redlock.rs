//! Running the redlock binary: its environment cleared of the developer's `REDLOCK_*`
//! variables, the command lines the tests build, and the key names it uses.

use std::process::{Command, Stdio};

use super::{Proc, RedisServer, TempDir, hold_script, wait_for_file, wait_for_line};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// Every environment variable redlock reads; cleared so the developer's shell cannot leak into a test.
const REDLOCK_ENV: &[&str] = &[
    "REDLOCK_URL",
    "REDLOCK_TTL",
    "REDLOCK_WAIT",
    "REDLOCK_FAIR",
    "REDLOCK_PREFIX",
    "REDLOCK_KILL_AFTER",
    "REDLOCK_STOP_SIGNAL",
    "REDLOCK_CONFLICT_EXIT_CODE",
    "REDLOCK_MAX_RUNTIME",
    "REDLOCK_MIN_INTERVAL",
    "REDLOCK_METRICS_FILE",
    "REDLOCK_LOG_FORMAT",
    "REDLOCK_PASSWORD",
    "REDLOCK_PASSWORD_FILE",
    "REDLOCK_TLS_CA_CERT",
    "REDLOCK_TLS_CERT",
    "REDLOCK_TLS_KEY",
    "REDLOCK_TLS_INSECURE",
    "REDLOCK_KEY",
    "REDLOCK_TOKEN",
    "REDLOCK_FENCING_TOKEN",
];

/// The redlock binary with every `REDLOCK_*` variable cleared and stdin closed.
pub fn redlock() -> Command {
    let mut cmd = Command::new(BIN);
    clear_redlock_env(&mut cmd);
    cmd.stdin(Stdio::null());
    cmd
}

/// Removes every `REDLOCK_*` variable from `cmd`'s environment.
pub fn clear_redlock_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("REDLOCK_") {
            cmd.env_remove(&name);
        }
    }
    for name in REDLOCK_ENV {
        cmd.env_remove(name);
    }
}

/// `redlock run --url <server> --key <key> <opts...> -- sh -c <script>`.
pub fn run_sh(server: &RedisServer, key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.args(["run", "--url", &server.url(), "--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

/// `redlock run --url <url> --key <key> <opts...> -- sh -c <script>`, for URLs that name more
/// than one server (Sentinel, Cluster).
pub fn run_url(url: &str, key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.args(["run", "--url", url, "--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

/// `redlock <sub> --url <server> <args...>`: an admin subcommand against `server`.
pub fn admin(server: &RedisServer, sub: &str, args: &[&str]) -> Command {
    let mut cmd = redlock();
    cmd.args([sub, "--url", &server.url()]).args(args);
    cmd
}

/// `redlock <sub> --url <each server> <args...>`: an admin subcommand against a quorum.
pub fn admin_quorum(servers: &[RedisServer], sub: &str, args: &[&str]) -> Command {
    let mut cmd = redlock();
    cmd.arg(sub);
    for server in servers {
        cmd.args(["--url", &server.url()]);
    }
    cmd.args(args);
    cmd
}

/// `redlock run --url <each server> --key <key> <opts...> -- sh -c <script>`: a quorum run.
pub fn run_quorum(servers: &[RedisServer], key: &str, opts: &[&str], script: &str) -> Command {
    let mut cmd = redlock();
    cmd.arg("run");
    for server in servers {
        cmd.args(["--url", &server.url()]);
    }
    cmd.args(["--key", key])
        .args(opts)
        .args(["--", "sh", "-c", script]);
    cmd
}

/// The lock key for `name` under the default prefix.
pub fn lock_key(name: &str) -> String {
    format!("redlock:{{{name}}}")
}

/// The fencing counter key for `name` under the default prefix.
pub fn fence_key(name: &str) -> String {
    format!("redlock:{{{name}}}:fence")
}

/// Starts redlock running [`hold_script`] on lock `key` and waits until it holds the lock;
/// returns the process and the owner token the command saw.
pub fn spawn_holder(
    redis: &RedisServer,
    key: &str,
    opts: &[&str],
    dir: &TempDir,
    tag: &str,
) -> (Proc, String) {
    let proc = Proc::spawn(run_sh(redis, key, opts, &hold_script(dir, tag)));
    wait_for_file(&dir.join(&format!("{tag}.ready")));
    let token = wait_for_line(&dir.join(&format!("{tag}.token")));
    (proc, token)
}

/// [`spawn_holder`] on a URL that names several servers (Sentinel, Cluster).
pub fn spawn_holder_at(
    url: &str,
    key: &str,
    opts: &[&str],
    dir: &TempDir,
    tag: &str,
) -> (Proc, String) {
    let proc = Proc::spawn(run_url(url, key, opts, &hold_script(dir, tag)));
    wait_for_file(&dir.join(&format!("{tag}.ready")));
    let token = wait_for_line(&dir.join(&format!("{tag}.token")));
    (proc, token)
}
