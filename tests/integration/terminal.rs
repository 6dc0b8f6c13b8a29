//! A real terminal (tmux): the command reads the tty, and one Ctrl-C ends it with 130.

use std::process::{Command, Stdio};

use crate::common::*;

/// A tmux server on its own socket inside the test's temp dir; killed on drop.
struct Tmux {
    socket: String,
    tmpdir: std::path::PathBuf,
}

impl Tmux {
    /// Starts a detached 120x30 session running `shell_command`.
    fn start(dir: &TempDir, shell_command: &str) -> Tmux {
        let tmux = Tmux {
            socket: format!("rl-{}", dir.path().file_name().unwrap().to_string_lossy()),
            tmpdir: dir.path().to_path_buf(),
        };
        let status = tmux
            .cmd()
            .args(["new-session", "-d", "-x", "120", "-y", "30", "-s", "main"])
            .arg(shell_command)
            .status()
            .expect("running tmux");
        assert!(status.success(), "tmux new-session failed: {status}");
        tmux
    }

    /// Starts an interactive bash (job control on) with a clean environment.
    fn interactive_bash(dir: &TempDir) -> Tmux {
        let path = std::env::var("PATH").unwrap_or_default();
        Tmux::start(
            dir,
            &format!(
                "env -i PATH={} HOME={} TERM=xterm PS1='$ ' bash --norc --noprofile -i",
                shell_quote(path.as_ref()),
                shell_quote(dir.path())
            ),
        )
    }

    /// Waits until `line`, typed into `cat`, shows twice: the tty's echo, then cat's copy.
    fn wait_for_echo(&self, line: &str) {
        wait_until(PATIENCE, &format!("cat to echo {line:?}"), || {
            self.capture().lines().filter(|l| l.trim() == line).count() >= 2
        });
    }

    fn cmd(&self) -> Command {
        let mut cmd = Command::new("tmux");
        clear_redlock_env(&mut cmd);
        cmd.env("TMUX_TMPDIR", &self.tmpdir)
            .env_remove("TMUX")
            .env("TERM", "xterm")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn send_keys(&self, keys: &[&str]) {
        let out = self
            .cmd()
            .args(["send-keys", "-t", "main"])
            .args(keys)
            .output()
            .unwrap();
        assert!(out.status.success(), "send-keys: {out:?}");
    }

    fn capture(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "main"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

#[test]
fn command_reads_the_terminal() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "touch {ready}; read line; echo \"got:$line\" > {file}",
        ready = dir.sh("ready"),
        file = dir.sh("file")
    );
    // The pane's shell runs redlock in the foreground and records its exit status.
    let pane = format!(
        "{redlock}; echo $? > {status}; sleep 30",
        redlock = Redlock::run(&redis).key("tty").sh(&script).shell_line(),
        status = dir.sh("status"),
    );
    let tmux = Tmux::start(&dir, &pane);
    wait_for_file(&dir.join("ready"));
    tmux.send_keys(&["hello world", "Enter"]);
    let status = wait_for_line(&dir.join("status"));
    assert_eq!(
        read(&dir.join("file")),
        "got:hello world\n",
        "screen:\n{}",
        tmux.capture()
    );
    assert_eq!(status, "0", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("tty")), None);
}

#[test]
fn ctrl_c_ends_cat_with_130_in_an_interactive_shell() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let tmux = Tmux::interactive_bash(&dir);
    let line = format!(
        "{redlock}; echo $? > {status}",
        redlock = Redlock::run(&redis)
            .key("cat")
            .command(["cat"])
            .shell_line(),
        status = dir.sh("status"),
    );
    tmux.send_keys(&[&line, "Enter"]);
    wait_until(PATIENCE, "redlock to take the lock", || {
        redis.get(&lock_key("cat")).is_some()
    });

    // cat echoes what it reads: the line shows twice (the tty's echo, then cat's output).
    tmux.send_keys(&["ping-from-tty", "Enter"]);
    tmux.wait_for_echo("ping-from-tty");

    tmux.send_keys(&["C-c"]);
    let status = wait_for_line(&dir.join("status"));
    assert_eq!(status, "130", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("cat")), None, "lock not released");
    // The shell got its terminal back and still works.
    tmux.send_keys(&[&format!("echo back > {}", dir.sh("back")), "Enter"]);
    assert_eq!(wait_for_line(&dir.join("back")), "back");
}

#[test]
fn ctrl_c_ends_cat_with_130_under_a_non_interactive_shell() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let pane = format!(
        "{redlock}; echo $? > {status}; sleep 30",
        redlock = Redlock::run(&redis)
            .key("cat2")
            .command(["cat"])
            .shell_line(),
        status = dir.sh("status"),
    );
    let tmux = Tmux::start(&dir, &pane);
    wait_until(PATIENCE, "redlock to take the lock", || {
        redis.get(&lock_key("cat2")).is_some()
    });
    tmux.send_keys(&["typed-line", "Enter"]);
    tmux.wait_for_echo("typed-line");
    tmux.send_keys(&["C-c"]);
    let status = wait_for_line(&dir.join("status"));
    assert_eq!(status, "130", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("cat2")), None, "lock not released");
}

#[test]
fn ctrl_z_does_not_hang_the_terminal_and_the_command_keeps_reading() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let tmux = Tmux::interactive_bash(&dir);
    let line = format!(
        "{redlock} 2> {stderr}; echo $? > {status}",
        redlock = Redlock::run(&redis)
            .key("tstp")
            .command(["cat"])
            .shell_line(),
        stderr = dir.sh("stderr"),
        status = dir.sh("status"),
    );
    tmux.send_keys(&[&line, "Enter"]);
    wait_until(PATIENCE, "redlock to take the lock", || {
        redis.get(&lock_key("tstp")).is_some()
    });
    // cat runs and owns the terminal (the lock is taken a moment before it is spawned).
    tmux.send_keys(&["before-ctrl-z", "Enter"]);
    tmux.wait_for_echo("before-ctrl-z");
    // Ctrl-Z stops cat; redlock says job control is not supported and continues it.
    tmux.send_keys(&["C-z"]);
    wait_until(PATIENCE, "redlock to report the stop", || {
        read(&dir.join("stderr")).contains("job control is not supported")
    });
    tmux.send_keys(&["after-ctrl-z", "Enter"]);
    // The tty echoes "^Z" and the typed line on one screen line; cat's copy stands alone.
    wait_until(PATIENCE, "cat to echo a line typed after Ctrl-Z", || {
        let screen = tmux.capture();
        let echoed = screen
            .lines()
            .filter(|l| l.trim().ends_with("after-ctrl-z"))
            .count();
        let copied = screen
            .lines()
            .filter(|l| l.trim() == "after-ctrl-z")
            .count();
        echoed >= 2 && copied >= 1
    });
    tmux.send_keys(&["C-c"]);
    let status = wait_for_line(&dir.join("status"));
    assert_eq!(status, "130", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("tstp")), None, "lock not released");
}
