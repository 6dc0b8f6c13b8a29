//! Running the redlock binary the way a test specifies it: [`Redlock`] carries the command line,
//! the environment (cleared of the developer's `REDLOCK_*` variables) and the expected status and
//! output, in the spirit of just's `Test` (casey/just, tests/test.rs). Also the key names redlock
//! writes.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Command, Stdio};

use super::{
    Output, Proc, RedisServer, TempDir, hold_script, shell_quote, wait_for_file, wait_for_line,
};

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
    "REDLOCK_SPLAY",
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

/// Removes every `REDLOCK_*` variable from `cmd`'s environment: the ones the developer's shell
/// has and every one redlock reads (even if unset here, for clarity of intent).
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

/// The lock key for `name` under the default prefix.
pub fn lock_key(name: &str) -> String {
    format!("redlock:{{{name}}}")
}

/// The fencing counter key for `name` under the default prefix.
pub fn fence_key(name: &str) -> String {
    format!("redlock:{{{name}}}:fence")
}

/// One invocation of redlock, written as its specification: the arguments, the command it runs,
/// its environment, and what it must do. [`output`](Self::output) runs it to its end and checks
/// every expectation; [`spawn`](Self::spawn) starts it in the background; [`hold`](Self::hold)
/// starts it holding a lock until the test lets go.
///
/// ```ignore
/// let out = Redlock::run(&redis)
///     .key("nightly")
///     .ttl("2s")
///     .sh("echo $REDLOCK_FENCING_TOKEN")
///     .status(0)
///     .stderr("")
///     .output();
/// ```
///
/// Every `REDLOCK_*` variable of the test's own environment is removed and stdin is /dev/null
/// unless set. Only what is asked is checked: without [`status`](Self::status) any exit passes.
#[must_use = "a Redlock runs nothing until output(), spawn() or hold()"]
pub struct Redlock {
    /// A program that runs redlock (`unshare ...`, `sh -c '... exec "$0" "$@"'`).
    through: Vec<OsString>,
    args: Vec<OsString>,
    /// The command after `--`, if any.
    command: Option<Vec<OsString>>,
    /// Variables to set (`Some`) or remove (`None`), after the `REDLOCK_*` ones are cleared.
    env: Vec<(OsString, Option<OsString>)>,
    stdin: Option<Stdio>,
    expect: Expect,
}

/// What [`Redlock::output`] checks.
#[derive(Default)]
struct Expect {
    status: Option<i32>,
    signal: Option<i32>,
    stdout: Option<String>,
    stderr: Option<String>,
    stdout_contains: Vec<String>,
    stderr_contains: Vec<String>,
    stderr_lines: Option<usize>,
    stderr_prefixed: bool,
}

impl Expect {
    fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.signal.is_none()
            && self.stdout.is_none()
            && self.stderr.is_none()
            && self.stdout_contains.is_empty()
            && self.stderr_contains.is_empty()
            && self.stderr_lines.is_none()
            && !self.stderr_prefixed
    }

    #[track_caller]
    fn check(&self, shown: &str, out: &Output) {
        let context = || {
            format!(
                "\ncommand: {shown}\nstatus: {:?}\nstdout:\n{}\nstderr:\n{}",
                out.status, out.stdout, out.stderr
            )
        };
        if let Some(want) = self.status {
            let got = out.code();
            assert_eq!(
                got,
                want,
                "redlock exited {got}, expected {want}{}",
                context()
            );
        }
        if let Some(want) = self.signal {
            let got = out.signal();
            assert_eq!(
                got,
                Some(want),
                "redlock ended with {got:?}, expected death by signal {want}{}",
                context()
            );
        }
        if let Some(want) = &self.stdout {
            assert_eq!(&out.stdout, want, "stdout differs{}", context());
        }
        if let Some(want) = &self.stderr {
            assert_eq!(&out.stderr, want, "stderr differs{}", context());
        }
        for want in &self.stdout_contains {
            assert!(
                out.stdout.contains(want),
                "stdout lacks {want:?}{}",
                context()
            );
        }
        for want in &self.stderr_contains {
            assert!(
                out.stderr.contains(want),
                "stderr lacks {want:?}{}",
                context()
            );
        }
        if let Some(want) = self.stderr_lines {
            let got = out.stderr.lines().count();
            assert_eq!(
                got,
                want,
                "{got} stderr lines, expected {want}{}",
                context()
            );
        }
        if self.stderr_prefixed {
            out.assert_stderr_prefixed();
        }
    }
}

impl Default for Redlock {
    fn default() -> Self {
        Redlock::new()
    }
}

impl Redlock {
    /// `redlock` with no arguments yet.
    pub fn new() -> Redlock {
        Redlock {
            through: Vec::new(),
            args: Vec::new(),
            command: None,
            env: Vec::new(),
            stdin: None,
            expect: Expect::default(),
        }
    }

    /// `redlock <sub>` with no `--url`: it comes from the environment, or does not matter.
    pub fn sub(sub: &str) -> Redlock {
        Redlock::new().arg(sub)
    }

    /// `redlock run --url <server>`.
    pub fn run(server: &RedisServer) -> Redlock {
        Redlock::run_at(&server.url())
    }

    /// `redlock run --url <url>`: a URL made by the test (Sentinel, Cluster, nobody listening).
    pub fn run_at(url: &str) -> Redlock {
        Redlock::sub("run").url(url)
    }

    /// `redlock run --url <each server>`: a quorum of independent masters.
    pub fn run_quorum(servers: &[RedisServer]) -> Redlock {
        servers
            .iter()
            .fold(Redlock::sub("run"), |r, s| r.url(&s.url()))
    }

    /// `redlock <sub> --url <server>`: an admin subcommand (status, list, release).
    pub fn admin(sub: &str, server: &RedisServer) -> Redlock {
        Redlock::admin_at(sub, &server.url())
    }

    /// `redlock <sub> --url <url>`.
    pub fn admin_at(sub: &str, url: &str) -> Redlock {
        Redlock::sub(sub).url(url)
    }

    /// `redlock <sub> --url <each server>`.
    pub fn admin_quorum(sub: &str, servers: &[RedisServer]) -> Redlock {
        servers
            .iter()
            .fold(Redlock::sub(sub), |r, s| r.url(&s.url()))
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `--url <url>`.
    pub fn url(self, url: &str) -> Self {
        self.args(["--url", url])
    }

    /// `--key <name>`.
    pub fn key(self, name: impl AsRef<OsStr>) -> Self {
        self.arg("--key").arg(name)
    }

    /// `--ttl <ttl>`.
    pub fn ttl(self, ttl: &str) -> Self {
        self.args(["--ttl", ttl])
    }

    /// `--wait <wait>`.
    pub fn wait(self, wait: &str) -> Self {
        self.args(["--wait", wait])
    }

    /// `-- <command...>`: what redlock runs under the lock, after every option.
    pub fn command<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, command: I) -> Self {
        self.command = Some(command.into_iter().map(|a| a.as_ref().to_owned()).collect());
        self
    }

    /// `-- sh -c <script>`.
    pub fn sh(self, script: &str) -> Self {
        self.command(["sh", "-c", script])
    }

    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((name.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    pub fn env_remove(mut self, name: impl AsRef<OsStr>) -> Self {
        self.env.push((name.as_ref().to_owned(), None));
        self
    }

    /// redlock's stdin (default /dev/null).
    pub fn stdin(mut self, stdin: impl Into<Stdio>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    /// Runs redlock through `program`: `<program...> <redlock> <args>`, e.g.
    /// `["sh", "-c", r#"trap '' HUP; exec "$0" "$@""#]` to start it with HUP ignored.
    pub fn through<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, program: I) -> Self {
        self.through = program.into_iter().map(|a| a.as_ref().to_owned()).collect();
        self
    }

    /// Expect this exit status.
    pub fn status(mut self, code: i32) -> Self {
        self.expect.status = Some(code);
        self
    }

    /// Expect redlock to die of signal `n`, as its command did (a shell shows 128+N).
    pub fn signal(mut self, n: i32) -> Self {
        self.expect.signal = Some(n);
        self
    }

    /// Expect exactly this on stdout.
    pub fn stdout(mut self, stdout: &str) -> Self {
        self.expect.stdout = Some(stdout.to_owned());
        self
    }

    /// Expect exactly this on stderr (`""`: silent).
    pub fn stderr(mut self, stderr: &str) -> Self {
        self.expect.stderr = Some(stderr.to_owned());
        self
    }

    pub fn stdout_contains(mut self, text: &str) -> Self {
        self.expect.stdout_contains.push(text.to_owned());
        self
    }

    pub fn stderr_contains(mut self, text: &str) -> Self {
        self.expect.stderr_contains.push(text.to_owned());
        self
    }

    /// Expect this many lines on stderr.
    pub fn stderr_lines(mut self, lines: usize) -> Self {
        self.expect.stderr_lines = Some(lines);
        self
    }

    /// Expect every non-empty stderr line to start with `redlock: `.
    pub fn stderr_prefixed(mut self) -> Self {
        self.expect.stderr_prefixed = true;
        self
    }

    /// Runs redlock to its end (killing it and failing after `PATIENCE`), checks every
    /// expectation, and returns what it left behind for further checks.
    #[track_caller]
    pub fn output(mut self) -> Output {
        let shown = self.shown();
        let expect = std::mem::take(&mut self.expect);
        let out = Proc::spawn(self.into_command()).finish();
        expect.check(&shown, &out);
        out
    }

    /// Starts redlock in the background with stdout and stderr captured; the test checks the
    /// [`Output`] of [`Proc::finish`].
    #[track_caller]
    pub fn spawn(self) -> Proc {
        assert!(
            self.expect.is_empty(),
            "expectations are checked by output(); check a spawned redlock's finish()"
        );
        Proc::spawn(self.into_command())
    }

    /// Starts redlock running [`hold_script`] and waits until its command runs, i.e. it holds
    /// the lock; returns the process and the owner token the command saw. The command ends when
    /// the test creates `<tag>.go` in `dir`.
    #[track_caller]
    pub fn hold(self, dir: &TempDir, tag: &str) -> (Proc, String) {
        let proc = self.sh(&hold_script(dir, tag)).spawn();
        wait_for_file(&dir.join(&format!("{tag}.ready")));
        let token = wait_for_line(&dir.join(&format!("{tag}.token")));
        (proc, token)
    }

    /// The whole command line as one line for a shell to run (in a tmux pane). Arguments only:
    /// there the environment and the expectations are the shell's business.
    #[track_caller]
    pub fn shell_line(self) -> String {
        assert!(
            self.env.is_empty() && self.stdin.is_none() && self.expect.is_empty(),
            "a shell line carries only the arguments"
        );
        self.shown()
    }

    /// The command line, each word quoted for a shell.
    fn shown(&self) -> String {
        self.words()
            .iter()
            .map(|w| shell_quote(Path::new(w)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every word of the command line, the program first.
    fn words(&self) -> Vec<OsString> {
        let mut words = self.through.clone();
        words.push(BIN.into());
        words.extend(self.args.iter().cloned());
        if let Some(command) = &self.command {
            words.push("--".into());
            words.extend(command.iter().cloned());
        }
        words
    }

    /// The std `Command` this describes, for a test that must spawn it its own way.
    pub fn into_command(self) -> Command {
        let words = self.words();
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]);
        clear_redlock_env(&mut cmd);
        for (name, value) in &self.env {
            match value {
                Some(value) => cmd.env(name, value),
                None => cmd.env_remove(name),
            };
        }
        cmd.stdin(self.stdin.unwrap_or_else(Stdio::null));
        cmd
    }
}
