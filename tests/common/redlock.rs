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
    "REDLOCK_FSYNC",
    "REDLOCK_MIN_REPLICAS",
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

/// `redlock <sub> --url <server> <args>` (an admin subcommand), which must exit 0 and say nothing
/// on stderr; its stdout, for the test to read.
#[track_caller]
pub fn stdout_of(sub: &str, server: &RedisServer, args: &[&str]) -> String {
    Redlock::admin(sub, server)
        .args(args)
        .any_stdout()
        .output()
        .stdout
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
///     .stdout("1\n")
///     .output();
/// ```
///
/// Every `REDLOCK_*` variable of the test's own environment is removed and stdin is /dev/null
/// unless set. Unless the test says otherwise, `output()` expects exit 0 and nothing on stdout
/// or stderr; each setter replaces the default of what it speaks of (the status, or one
/// stream), and `any_status`, `any_stdout` and `any_stderr` say in words that the test does not
/// leave it to the builder.
#[must_use = "a Redlock runs nothing until output(), spawn() or hold()"]
pub struct Redlock {
    /// The redlock binary: [`BIN`] unless [`binary`](Self::binary) names another build.
    bin: OsString,
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

/// What [`Redlock::output`] checks: by default exit 0 and nothing on stdout or stderr, as
/// just's `Test` does (casey/just, tests/test.rs), so that a test that forgets to say what it
/// expects fails instead of passing whatever redlock did.
///
/// Stdout is expected empty too. It belongs to the command (STYLE.md, Output): redlock writes
/// nothing there during a run, and a test whose command prints nothing checks that for free. The
/// admin subcommands answer on stdout, and a command that prints is the test's own doing: those
/// tests say what stdout holds, or that they read it themselves ([`Redlock::any_stdout`]).
#[derive(Default)]
struct Expect {
    status: Status,
    stdout: Stream,
    stderr: Stream,
}

/// How redlock must end.
#[derive(Default, PartialEq)]
enum Status {
    /// Exit with this code.
    Code(i32),
    /// Die of this signal, as its command did.
    Signal(i32),
    /// Any way: the test looks at the status itself.
    Any,
    /// Not said: exit 0.
    #[default]
    Unsaid,
}

/// What one stream must hold. Until a test says anything about it, nothing at all.
#[derive(Default)]
struct Stream {
    /// The test said something about this stream (any setter, `any_*` included).
    said: bool,
    exactly: Option<String>,
    contains: Vec<String>,
    lines: Option<usize>,
    /// Every non-empty line starts with `redlock: ` (stderr only).
    prefixed: bool,
}

impl Stream {
    /// Records that the test spoke of this stream, and returns it for the setter.
    fn said(&mut self) -> &mut Stream {
        self.said = true;
        self
    }

    #[track_caller]
    fn check(&self, name: &str, got: &str, context: &dyn Fn() -> String) {
        if !self.said {
            assert_eq!(
                got,
                "",
                "{name} not empty (say what it holds, or any_{name}()){}",
                context()
            );
        }
        if let Some(want) = &self.exactly {
            assert_eq!(got, want, "{name} differs{}", context());
        }
        for want in &self.contains {
            assert!(got.contains(want), "{name} lacks {want:?}{}", context());
        }
        if let Some(want) = self.lines {
            let lines = got.lines().count();
            assert_eq!(
                lines,
                want,
                "{lines} {name} lines, expected {want}{}",
                context()
            );
        }
        if self.prefixed {
            for line in got.lines().filter(|l| !l.trim().is_empty()) {
                assert!(
                    line.starts_with("redlock: "),
                    "{name} line without `redlock: ` prefix: {line:?}{}",
                    context()
                );
            }
        }
    }
}

impl Expect {
    /// Whether the test set any expectation.
    fn is_empty(&self) -> bool {
        self.status == Status::Unsaid && !self.stdout.said && !self.stderr.said
    }

    #[track_caller]
    fn check(&self, shown: &str, out: &Output) {
        let context = || {
            format!(
                "\ncommand: {shown}\nstatus: {:?}\nstdout:\n{}\nstderr:\n{}",
                out.status, out.stdout, out.stderr
            )
        };
        let code = match self.status {
            Status::Unsaid => Some(0),
            Status::Code(code) => Some(code),
            Status::Signal(_) | Status::Any => None,
        };
        if let Some(want) = code {
            let got = out.status.code();
            assert_eq!(
                got,
                Some(want),
                "redlock ended with {:?}, expected exit {want}{}",
                out.status,
                context()
            );
        }
        if let Status::Signal(want) = self.status {
            let got = out.signal();
            assert_eq!(
                got,
                Some(want),
                "redlock ended with {:?}, expected death by signal {want}{}",
                out.status,
                context()
            );
        }
        self.stdout.check("stdout", &out.stdout, &context);
        self.stderr.check("stderr", &out.stderr, &context);
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
            bin: BIN.into(),
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

    /// Runs this redlock binary instead of the one under test (another build of it: the
    /// rolling-upgrade tests run the round's starting commit beside it).
    pub fn binary(mut self, bin: impl AsRef<OsStr>) -> Self {
        self.bin = bin.as_ref().to_owned();
        self
    }

    /// Expect this exit status (instead of 0).
    pub fn status(mut self, code: i32) -> Self {
        self.expect.status = Status::Code(code);
        self
    }

    /// Expect redlock to die of signal `n`, as its command did (a shell shows 128+N).
    pub fn signal(mut self, n: i32) -> Self {
        self.expect.status = Status::Signal(n);
        self
    }

    /// Check no status: the test looks at it itself (several are right, or which one depends on
    /// something else the test sees). Say why beside it.
    pub fn any_status(mut self) -> Self {
        self.expect.status = Status::Any;
        self
    }

    /// Expect exactly this on stdout.
    pub fn stdout(mut self, stdout: &str) -> Self {
        self.expect.stdout.said().exactly = Some(stdout.to_owned());
        self
    }

    /// Expect stdout to contain `text` (and anything else).
    pub fn stdout_contains(mut self, text: &str) -> Self {
        self.expect.stdout.said().contains.push(text.to_owned());
        self
    }

    /// Check nothing of stdout: the test reads it itself afterwards (a token, an admin
    /// command's answer), or it is the command's and does not matter.
    pub fn any_stdout(mut self) -> Self {
        self.expect.stdout.said();
        self
    }

    /// Expect exactly this on stderr (`""`, the default, is silence).
    pub fn stderr(mut self, stderr: &str) -> Self {
        self.expect.stderr.said().exactly = Some(stderr.to_owned());
        self
    }

    /// Expect stderr to contain `text` (and anything else, unless other setters say more).
    pub fn stderr_contains(mut self, text: &str) -> Self {
        self.expect.stderr.said().contains.push(text.to_owned());
        self
    }

    /// Expect this many lines on stderr.
    pub fn stderr_lines(mut self, lines: usize) -> Self {
        self.expect.stderr.said().lines = Some(lines);
        self
    }

    /// Expect every non-empty stderr line to start with `redlock: ` (and allow such lines).
    pub fn stderr_prefixed(mut self) -> Self {
        self.expect.stderr.said().prefixed = true;
        self
    }

    /// Check nothing of stderr: the test reads it itself afterwards (`-v` lines it greps, JSON
    /// lines, a snapshot), or it is the command's and does not matter.
    pub fn any_stderr(mut self) -> Self {
        self.expect.stderr.said();
        self
    }

    /// Runs redlock to its end (killing it and failing after `PATIENCE`), checks every
    /// expectation (exit 0 and silence where the test said nothing), and returns what it left
    /// behind for further checks.
    #[track_caller]
    pub fn output(mut self) -> Output {
        // The variables the test set, in front, so that a failure names its case.
        let shown = self
            .env
            .iter()
            .map(|(name, value)| match value {
                Some(value) => format!(
                    "{}={} ",
                    name.to_string_lossy(),
                    shell_quote(Path::new(value))
                ),
                None => format!("(no {}) ", name.to_string_lossy()),
            })
            .chain([self.shown()])
            .collect::<String>();
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
        words.push(self.bin.clone());
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

/// A fencing token as redlock hands it out: one past the lock's counter, or the server's clock
/// in microseconds when that is larger (so, on any server whose clock is set, a number of about
/// 1.8e15 this decade, and always below 2^53 for JSON's sake). Panics on anything else.
#[track_caller]
pub fn fencing_token(text: &str) -> i64 {
    let token: i64 = text
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a fencing token: {text:?}"));
    assert!(
        (1_600_000_000_000_000..1 << 53).contains(&token),
        "not a clock-carried fencing token: {token}"
    );
    token
}

/// The fencing counter of the lock `name` on `redis` (which must have one).
#[track_caller]
pub fn fence_of(redis: &RedisServer, name: &str) -> i64 {
    let counter = redis
        .get(&fence_key(name))
        .unwrap_or_else(|| panic!("lock {name:?} has no fencing counter"));
    fencing_token(&counter)
}

/// `tokens` strictly increase.
#[track_caller]
pub fn assert_increasing(tokens: &[i64]) {
    for pair in tokens.windows(2) {
        assert!(
            pair[0] < pair[1],
            "fencing tokens do not increase: {tokens:?}"
        );
    }
}
