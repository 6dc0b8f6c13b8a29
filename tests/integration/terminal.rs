//! A real terminal (tmux): the command reads the tty; Ctrl-C ends it and redlock with it, also
//! stopping a calling script; Ctrl-Z, `fg` and `bg` behave as with the bare command; and the
//! terminal's modes come back when the command is killed.

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

    /// Waits until the shell shows its prompt (`$ `) on the last line of the screen.
    fn wait_for_prompt(&self) {
        self.wait_until("the shell's prompt", || {
            self.capture().lines().rev().find(|l| !l.trim().is_empty()) == Some("$")
        });
    }

    /// Waits for a complete line in `path`, showing the screen if none comes.
    fn wait_for_line(&self, path: &std::path::Path) -> String {
        self.wait_until(&format!("a line in {}", path.display()), || {
            read(path).contains('\n')
        });
        read(path).trim().to_string()
    }

    /// [`wait_until`] that shows the screen if `cond` never holds.
    #[track_caller]
    fn wait_until(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while !cond() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after {PATIENCE:?} waiting for {what}; screen:\n{}",
                self.capture()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
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
    let status = tmux.wait_for_line(&dir.join("status"));
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
    // Killed by SIGINT, the job ends the line, as `cat; echo $?` would: ask for $? after it,
    // at the shell's prompt.
    tmux.wait_for_prompt();
    let line = format!("echo $? > {}", dir.sh("status"));
    tmux.send_keys(&[&line, "Enter"]);
    let status = tmux.wait_for_line(&dir.join("status"));
    assert_eq!(status, "130", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("cat")), None, "lock not released");
    // The shell got its terminal back and still works.
    tmux.send_keys(&[&format!("echo back > {}", dir.sh("back")), "Enter"]);
    assert_eq!(tmux.wait_for_line(&dir.join("back")), "back");
}

#[test]
fn ctrl_c_ends_cat_with_130_under_a_non_interactive_shell() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    // The shell handles SIGINT (`trap :`), or Ctrl-C would end it with cat, as it does around
    // the bare command.
    let pane = format!(
        "trap : INT; {redlock}; echo $? > {status}; sleep 30",
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
    let status = tmux.wait_for_line(&dir.join("status"));
    assert_eq!(status, "130", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("cat2")), None, "lock not released");
}

/// Field `n` (counted from the state, 0) of /proc/<pid>/stat.
fn stat_field(pid: i32, n: usize) -> i32 {
    let stat = read(std::path::Path::new(&format!("/proc/{pid}/stat")));
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(n).unwrap().parse().unwrap()
}

/// The parent of `pid`, from /proc.
fn parent_of(pid: i32) -> i32 {
    stat_field(pid, 1)
}

/// Waits until the group of `leader` runs and is its terminal's foreground group (tpgid), so
/// that what is typed next is echoed with the command's modes, not the shell's.
fn wait_for_foreground(leader: i32) {
    wait_until(PATIENCE, "the command to run in the foreground", || {
        proc_state(leader).is_some_and(|s| s != 'T') && stat_field(leader, 5) == leader
    });
}

/// Ctrl-C in a bash script that calls redlock stops the script, as with the bare command: the
/// command dies of SIGINT, and so does redlock, after releasing the lock.
#[test]
fn ctrl_c_stops_a_calling_script() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let script = dir.join("job.sh");
    write_file(
        &script,
        &format!(
            "{redlock}\ntouch {after}\n",
            redlock = Redlock::run(&redis)
                .key("script")
                .sh(&format!("touch {}; sleep 30", dir.sh("ready")))
                .shell_line(),
            after = dir.sh("after"),
        ),
        0o755,
    );
    let pane = format!(
        "bash -c 'trap : INT; bash {script}; echo $? > {status}'; sleep 30",
        script = dir.sh("job.sh"),
        status = dir.sh("status"),
    );
    let tmux = Tmux::start(&dir, &pane);
    wait_for_file(&dir.join("ready"));
    tmux.send_keys(&["C-c"]);
    let status = tmux.wait_for_line(&dir.join("status"));
    assert_eq!(status, "130", "screen:\n{}", tmux.capture());
    assert!(
        !dir.join("after").exists(),
        "the script went on after Ctrl-C"
    );
    assert_eq!(redis.get(&lock_key("script")), None, "lock not released");
}

/// Ctrl-Z stops the command and redlock, as a shell job; `fg` gives the command the terminal
/// back; `bg` leaves the terminal with the shell, so the command, reading it, is stopped by
/// SIGTTIN (and redlock with it), as the bare command would be; `fg` again and it reads on.
#[test]
fn ctrl_z_fg_and_bg_behave_as_with_the_bare_command() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let tmux = Tmux::interactive_bash(&dir);
    // No `; echo $?` on the line: bash runs the rest of a list when its job stops.
    let line = format!(
        "{redlock} 2> {stderr}",
        redlock = Redlock::run(&redis)
            .key("tstp")
            .ttl("2s")
            .sh(&format!("echo $$ > {}; exec cat", dir.sh("pid")))
            .shell_line(),
        stderr = dir.sh("stderr"),
    );
    tmux.send_keys(&[&line, "Enter"]);
    let cat = wait_for_pid(&dir.join("pid"));
    let redlock = parent_of(cat);
    tmux.send_keys(&["before-ctrl-z", "Enter"]);
    tmux.wait_for_echo("before-ctrl-z");

    // Ctrl-Z: both stop, the shell has its prompt back.
    tmux.send_keys(&["C-z"]);
    wait_until(PATIENCE, "cat and redlock to stop", || {
        proc_state(cat) == Some('T') && proc_state(redlock) == Some('T')
    });
    wait_until(PATIENCE, "the shell to report the stop", || {
        tmux.capture().contains("Stopped")
    });
    tmux.send_keys(&["fg", "Enter"]);
    wait_for_foreground(cat);
    tmux.send_keys(&["after-fg", "Enter"]);
    tmux.wait_for_echo("after-fg");

    // Ctrl-Z, then bg: cat reads the terminal from the background and is stopped by SIGTTIN.
    tmux.send_keys(&["C-z"]);
    wait_until(PATIENCE, "redlock to stop again", || {
        proc_state(redlock) == Some('T')
    });
    tmux.send_keys(&["bg", "Enter"]);
    wait_until(PATIENCE, "redlock to stop on cat's SIGTTIN", || {
        read(&dir.join("stderr")).is_empty()
            && proc_state(cat) == Some('T')
            && proc_state(redlock) == Some('T')
            && tmux.capture().contains("bg")
    });
    // The shell's prompt works meanwhile.
    tmux.send_keys(&[&format!("echo shell > {}", dir.sh("shell")), "Enter"]);
    assert_eq!(tmux.wait_for_line(&dir.join("shell")), "shell");

    tmux.send_keys(&["fg", "Enter"]);
    wait_for_foreground(cat);
    tmux.send_keys(&["after-bg", "Enter"]);
    tmux.wait_for_echo("after-bg");
    tmux.send_keys(&["C-d"]);
    // Typed only once redlock is gone, or cat would read it.
    wait_until(PATIENCE, "redlock to end", || {
        proc_state(redlock).is_none_or(|s| s == 'Z')
    });
    // `fg` returns the job's status.
    let line = format!("echo $? > {}", dir.sh("status"));
    tmux.send_keys(&[&line, "Enter"]);
    let status = tmux.wait_for_line(&dir.join("status"));
    assert_eq!(status, "0", "screen:\n{}", tmux.capture());
    assert_eq!(redis.get(&lock_key("tstp")), None, "lock not released");
}

/// A command that set the terminal raw and was killed (--max-runtime) leaves the shell a sane
/// terminal: redlock restores the modes it saved when it handed the terminal over.
#[test]
fn terminal_modes_are_restored_when_the_command_is_killed() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let pane = format!(
        "{redlock}; echo $? > {status}; stty -a > {modes}; sleep 30",
        redlock = Redlock::run(&redis)
            .key("raw")
            .args(["--max-runtime", "500ms"])
            .sh(&format!(
                "stty raw -echo; touch {}; sleep 30",
                dir.sh("raw")
            ))
            .shell_line(),
        status = dir.sh("status"),
        modes = dir.sh("modes"),
    );
    let tmux = Tmux::start(&dir, &pane);
    wait_for_file(&dir.join("raw"));
    assert_eq!(tmux.wait_for_line(&dir.join("status")), "124");
    wait_until(PATIENCE, "stty -a to write the modes", || {
        read(&dir.join("modes")).contains("icanon")
    });
    let modes = read(&dir.join("modes"));
    let flags: Vec<&str> = modes.split([' ', ';', '\n']).collect();
    for flag in ["icanon", "echo", "isig"] {
        assert!(flags.contains(&flag), "{flag} not restored:\n{modes}");
    }
}

/// Ctrl-Z with stdin not a terminal: the command has no terminal to be stopped through, so the
/// TSTP reaches redlock, which stops the command's group, then itself; `fg` continues both.
#[test]
fn ctrl_z_with_stdin_not_a_terminal_stops_the_command_too() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    let tmux = Tmux::interactive_bash(&dir);
    let line = format!(
        "{redlock} < /dev/null",
        redlock = Redlock::run(&redis)
            .key("notty")
            .sh(&hold_script(&dir, "n"))
            .shell_line(),
    );
    tmux.send_keys(&[&line, "Enter"]);
    wait_for_file(&dir.join("n.ready"));
    let pid = wait_for_pid(&dir.join("n.pid"));
    let redlock = parent_of(pid);
    tmux.send_keys(&["C-z"]);
    wait_until(PATIENCE, "the command and redlock to stop", || {
        job_stopped(pid) && proc_state(redlock) == Some('T')
    });
    tmux.send_keys(&["fg", "Enter"]);
    wait_until(PATIENCE, "the command to run again", || {
        proc_state(pid).is_some_and(|s| s != 'T')
    });
    touch(&dir.join("n.go"));
    wait_until(PATIENCE, "redlock to end", || {
        proc_state(redlock).is_none_or(|s| s == 'Z')
    });
    tmux.send_keys(&[&format!("echo $? > {}", dir.sh("status")), "Enter"]);
    assert_eq!(
        tmux.wait_for_line(&dir.join("status")),
        "0",
        "screen:\n{}",
        tmux.capture()
    );
    assert_eq!(redis.get(&lock_key("notty")), None, "lock not released");
}
