//! The command: spawned without a shell in its own process group, handed the terminal's
//! foreground when redlock has it, signalled as a group, and killed if redlock dies.

mod group;
mod guard;
pub mod signals;
pub mod spawn;
mod terminal;

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;

use nix::unistd::{Pid, tcsetpgrp};

use crate::exit;

pub use group::{
    Waited, adopted, become_subreaper, group_alive, no_children, signal_adopted, signal_group,
    try_wait_any,
};
pub use guard::Guard;
pub use terminal::Terminal;
use terminal::{stdin_fd, with_sigttou_blocked};

/// Start `argv` in a new process group with `env` added, dying with SIGKILL if redlock dies.
/// Must be called from a thread that lives as long as the child: the parent-death signal
/// fires when the *thread* that started it exits.
pub fn spawn(
    argv: &[OsString],
    env: &[(&str, String)],
    terminal: Option<Terminal>,
) -> io::Result<Pid> {
    let mut vars: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(name, _)| {
            !env.iter()
                .any(|(ours, _)| name.as_bytes() == ours.as_bytes())
        })
        .map(|(name, value)| [name.as_bytes(), b"=", value.as_bytes()].concat())
        .collect();
    vars.extend(
        env.iter()
            .map(|(name, value)| format!("{name}={value}").into_bytes()),
    );
    let take_terminal = terminal.is_some();
    let pid = crate::process::spawn::spawn(
        argv,
        &vars,
        &crate::process::signals::RESET_IN_CHILD,
        take_terminal,
    )?;
    if take_terminal {
        // Also from the parent, as shells do, so the order of the two calls does not matter.
        with_sigttou_blocked(|| {
            let _ = tcsetpgrp(stdin_fd(), pid);
        });
    }
    Ok(pid)
}

/// The exit status for a command that could not be started, as shells report it.
pub fn spawn_failure_status(err: &io::Error) -> i32 {
    match err.kind() {
        io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::NOT_EXECUTABLE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::errno::Errno;
    use nix::sys::wait::{WaitStatus, waitpid};

    #[test]
    fn spawn_failures_map_like_shells() {
        assert_eq!(
            spawn_failure_status(&io::Error::from(io::ErrorKind::NotFound)),
            127
        );
        assert_eq!(
            spawn_failure_status(&io::Error::from(io::ErrorKind::PermissionDenied)),
            126
        );
        assert_eq!(
            spawn_failure_status(&io::Error::from_raw_os_error(Errno::ENOEXEC as i32)),
            126
        );
    }

    #[test]
    fn child_gets_its_own_group_and_environment() {
        let script =
            r#"read -r _ _ _ _ pgrp _ < /proc/$$/stat; test "$pgrp" = $$ && test "$X" = y"#;
        let argv = ["sh", "-c", script].map(OsString::from);
        let pid = spawn(&argv, &[("X", "y".into())], None).unwrap();
        assert_eq!(waitpid(pid, None), Ok(WaitStatus::Exited(pid, 0)));
        assert!(!group_alive(pid));
    }

    #[test]
    fn failures_to_exec_are_errors_and_leave_no_child() {
        let missing = spawn(&[OsString::from("/nonexistent/redlock-test")], &[], None).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let plain = std::env::temp_dir().join(format!("redlock-plain-{}", std::process::id()));
        std::fs::write(&plain, "echo not executable\n").unwrap();
        let not_executable = spawn(&[plain.clone().into_os_string()], &[], None).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert_eq!(not_executable.kind(), io::ErrorKind::PermissionDenied);
        let nul = spawn(&[OsString::from("a\0b")], &[], None).unwrap_err();
        assert_eq!(nul.kind(), io::ErrorKind::InvalidInput);
    }
}
