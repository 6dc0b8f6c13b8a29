//! A spawned process with its stdout and stderr captured as they come, and what it left behind
//! when it exited ([`Output`]).

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::PATIENCE;

/// What a finished redlock left behind.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From spawn to the moment the exit was observed.
    pub elapsed: Duration,
}

impl Output {
    /// The exit code; panics (showing stderr) if redlock itself died of a signal.
    pub fn code(&self) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        match self.status.code() {
            Some(c) => c,
            None => panic!(
                "redlock was killed by signal {:?} instead of exiting\nstderr:\n{}",
                self.status.signal(),
                self.stderr
            ),
        }
    }

    #[track_caller]
    pub fn assert_code(&self, want: i32) {
        let got = self.code();
        assert_eq!(
            got, want,
            "redlock exited {got}, expected {want}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
    }

    /// The signal redlock died of, if it did (it dies of the signal its command died of).
    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.status.signal()
    }

    /// redlock died of signal `want` (as its command did): a shell shows 128+N.
    #[track_caller]
    pub fn assert_signal(&self, want: i32) {
        assert_eq!(
            self.signal(),
            Some(want),
            "redlock ended with {:?}, expected death by signal {want}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
    }

    /// No piece of a secret (a password, or each word of one) shows on stdout or stderr.
    #[track_caller]
    pub fn assert_no_secret(&self, pieces: &[&str]) {
        for piece in pieces {
            assert!(
                !self.stderr.contains(piece) && !self.stdout.contains(piece),
                "{piece:?} of a secret was printed\nstdout:\n{}\nstderr:\n{}",
                self.stdout,
                self.stderr
            );
        }
    }

    /// Every diagnostic line carries the `redlock: ` prefix.
    #[track_caller]
    pub fn assert_stderr_prefixed(&self) {
        for line in self.stderr.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                line.starts_with("redlock: "),
                "stderr line without `redlock: ` prefix: {line:?}\nfull stderr:\n{}",
                self.stderr
            );
        }
    }
}

/// A spawned redlock with captured stdout/stderr; SIGKILLed on drop if still running.
pub struct Proc {
    child: Child,
    started: Instant,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    eof: mpsc::Receiver<()>,
    status: Option<(ExitStatus, Instant)>,
}

fn pump(mut from: impl Read + Send + 'static, done: mpsc::Sender<()>) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
        let _ = done.send(());
    });
    buf
}

impl Proc {
    /// Spawns with stdout and stderr piped (stdin as configured on `cmd`).
    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let (tx, eof) = mpsc::channel();
        let stdout = pump(child.stdout.take().unwrap(), tx.clone());
        let stderr = pump(child.stderr.take().unwrap(), tx);
        Proc {
            child,
            started,
            stdout,
            stderr,
            eof,
            status: None,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.pid()), sig).unwrap();
    }

    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Polls for exit for up to `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some((s, _)) = self.status {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                self.status = Some((s, Instant::now()));
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Still running right now?
    pub fn running(&mut self) -> bool {
        self.wait_timeout(Duration::ZERO).is_none()
    }

    /// Waits for exit (SIGKILL and panic after [`PATIENCE`]) and collects the output, whose
    /// status the test then checks ([`Output::assert_code`], [`Output::assert_signal`]).
    #[must_use = "check how it ended: assert_code or assert_signal"]
    #[track_caller]
    pub fn finish(self) -> Output {
        self.finish_within(PATIENCE)
    }

    /// Waits for exit (SIGKILL and panic after `timeout`) and collects the output.
    #[must_use = "check how it ended: assert_code or assert_signal"]
    #[track_caller]
    pub fn finish_within(mut self, timeout: Duration) -> Output {
        if self.wait_timeout(timeout).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "redlock still running after {timeout:?}; killed it\nstderr:\n{}",
                self.stderr_so_far()
            );
        }
        // A leftover grandchild may hold the pipes open; don't wait for it forever.
        for _ in 0..2 {
            let _ = self.eof.recv_timeout(Duration::from_secs(3));
        }
        let (status, at) = self.status.unwrap();
        Output {
            status,
            stdout: String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned(),
            stderr: String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned(),
            elapsed: at - self.started,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
