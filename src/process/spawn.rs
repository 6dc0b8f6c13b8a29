//! Starting the command: `std::process::Command` in a new process group (`process_group(0)`),
//! with a small `pre_exec` hook for what std does not do.
//!
//! std forks, puts the child in its group, resets SIGPIPE to its default, runs the hook and
//! execs, reporting an exec failure as the error of `spawn()`. The hook adds the parent-death
//! signal, the terminal's foreground, and an empty signal mask: std hands the parent's mask down
//! unchanged since Rust 1.66 (rust-lang/rust#101077), and redlock's main thread has the signals
//! it takes blocked for the signal thread (see `signals::Intake::block`). Dispositions are left
//! as redlock got them: redlock installs no handler, so a signal reaches the command with its
//! default action, and one ignored when redlock started stays ignored, as a shell leaves it
//! (signal 32, which redlock ignores for itself, is set back to its default in the hook).

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::{Pid, getpid, getppid};

use super::terminal::{self, Terminal};

/// Start `argv` (looked up in PATH) in a new process group with `env` applied (a value sets the
/// variable, None removes it), dying with SIGKILL if redlock dies, and in the terminal's
/// foreground when redlock has it (`terminal`).
///
/// Must be called from a thread that lives as long as the child: the parent-death signal fires
/// when the *thread* that forked exits (redlock spawns from its main thread). The child is left
/// to the caller's reaper (`try_wait_any`): no `Child` waits for it.
/// `watchdog`: the write end of the watchdog's orders, which the child uses to announce its
/// group before it runs anything (see [`super::announce_to_watchdog`]).
pub(crate) fn spawn(
    argv: &[OsString],
    env: &[(&str, Option<String>)],
    terminal: Option<&Terminal>,
    watchdog: Option<std::io::PipeWriter>,
) -> io::Result<Pid> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no command"));
    };
    // The terminal for the child's side, opened here: std's `stdin()` allocates on first use,
    // which a forked child must not do. Close-on-exec, so the command does not inherit it.
    let tty = terminal.map(Terminal::descriptor).transpose()?;
    let redlock = getpid();
    let mut command = Command::new(program);
    command.args(args).process_group(0);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    // SAFETY: the hook runs in the forked child before exec, and `before_exec` makes only
    // async-signal-safe system calls (through nix): no allocation, no lock, no shared state.
    unsafe { command.pre_exec(move || before_exec(redlock, tty.as_ref(), watchdog.as_ref())) };
    // A NUL byte in an argument, a program not found or not executable: an error, no child.
    let child = command.spawn()?;
    let pid = Pid::from_raw(child.id() as i32);
    // Dropping a `Child` neither waits for it nor kills it: redlock's signal thread reaps every
    // child with waitpid(-1), so this one must not be waited for here.
    drop(child);
    if let Some(terminal) = terminal {
        // Also from the parent, as shells do, so the order of the two calls does not matter.
        terminal.hand_to(pid);
    }
    Ok(pid)
}

/// Why `program` could not be started (`err`, from [`spawn`]), as a shell would say it: whether
/// it was found at all (127 if not, 126 if found but not executable), and the message. A script
/// whose interpreter is missing fails with "not found" too; it is named as a bad interpreter.
pub(crate) fn explain_failure(program: &std::ffi::OsStr, err: &io::Error) -> (bool, String) {
    let shown = program.to_string_lossy();
    let Some(path) = resolve(program) else {
        let mut message = format!("cannot run '{shown}': command not found");
        if shown.contains(char::is_whitespace) {
            message
                .push_str("; no shell runs the command, so to run a shell line use: sh -c '...'");
        }
        return (false, message);
    };
    if path.is_dir() {
        return (true, format!("cannot run '{shown}': it is a directory"));
    }
    if err.kind() == io::ErrorKind::NotFound
        && let Some(interpreter) = interpreter(&path)
    {
        let mut message = format!(
            "cannot run '{shown}': bad interpreter '{}': no such file",
            interpreter.escape_default()
        );
        if interpreter.ends_with('\r') {
            message.push_str(" (the #! line ends in a carriage return: DOS line endings?)");
        }
        return (true, message);
    }
    (true, format!("cannot run '{shown}': {err}"))
}

/// Where exec finds `program`: itself when it holds a `/`, else the first file of that name in
/// a PATH directory (an empty PATH entry is the current directory).
fn resolve(program: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::Path::new(program);
    if program.as_bytes().contains(&b'/') {
        return path.exists().then(|| path.to_owned());
    }
    if program.is_empty() {
        return None;
    }
    let dirs = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&dirs)
        .map(|dir| dir.join(path))
        .find(|candidate| candidate.is_file())
}

/// The interpreter a `#!` script names, when the file starts with one.
fn interpreter(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = String::from_utf8_lossy(line);
    let text = text.trim_start_matches([' ', '\t']);
    let end = text.find([' ', '\t']).unwrap_or(text.len());
    Some(text[..end].to_owned())
}

/// The child's side, between fork and exec; std has made it a group leader already.
fn before_exec(
    redlock: Pid,
    tty: Option<&OwnedFd>,
    watchdog: Option<&std::io::PipeWriter>,
) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    // The watchdog knows this group before anything of the command runs.
    if let Some(orders) = watchdog {
        super::announce_to_watchdog(orders)?;
    }
    // redlock may have died before the prctl; then nobody would ever kill us.
    if getppid() != redlock {
        return Err(Errno::ESRCH.into());
    }
    if let Some(tty) = tty {
        terminal::take_foreground(tty, getpid());
    }
    // Signal 32 as redlock got it: redlock ignores it for itself alone.
    super::signo::default_cancel_signal()?;
    // Last, so that a signal sent meanwhile waits, pending, until the command runs.
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use nix::sys::wait::{WaitStatus, waitpid};

    use super::*;
    use crate::process::group_alive;

    #[test]
    fn child_gets_its_own_group_and_environment() {
        let script =
            r#"read -r _ _ _ _ pgrp _ < /proc/$$/stat; test "$pgrp" = $$ && test "$X" = y"#;
        let argv = ["sh", "-c", script].map(OsString::from);
        let pid = spawn(&argv, &[("X", Some("y".into()))], None, None).unwrap();
        assert_eq!(waitpid(pid, None), Ok(WaitStatus::Exited(pid, 0)));
        assert!(!group_alive(pid));
    }

    #[test]
    fn child_starts_with_no_signal_blocked() {
        // As redlock's main thread does (for the signal thread), in this test's thread.
        let mut blocked = SigSet::empty();
        blocked.add(Signal::SIGTERM);
        blocked.add(Signal::SIGCHLD);
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&blocked), Some(&mut old)).unwrap();
        let argv = ["grep", "-q", "^SigBlk:[[:space:]]*0*$", "/proc/self/status"];
        let spawned = spawn(&argv.map(OsString::from), &[], None, None);
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None).unwrap();
        let pid = spawned.unwrap();
        assert_eq!(waitpid(pid, None), Ok(WaitStatus::Exited(pid, 0)));
    }

    #[test]
    fn failures_to_exec_are_errors_and_leave_no_child() {
        let missing = spawn(
            &[OsString::from("/nonexistent/redlock-test")],
            &[],
            None,
            None,
        )
        .unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let plain = std::env::temp_dir().join(format!("redlock-plain-{}", std::process::id()));
        std::fs::write(&plain, "echo not executable\n").unwrap();
        let not_executable = spawn(&[plain.clone().into_os_string()], &[], None, None).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert_eq!(not_executable.kind(), io::ErrorKind::PermissionDenied);
        let nul = spawn(&[OsString::from("a\0b")], &[], None, None).unwrap_err();
        assert_eq!(nul.kind(), io::ErrorKind::InvalidInput);
        let empty = spawn(&[], &[], None, None).unwrap_err();
        assert_eq!(empty.kind(), io::ErrorKind::InvalidInput);
    }
}
