//! `redlock completions` and `redlock man`: they print the committed files, need no Redis, and
//! what they print works in bash and renders as a man page without warnings.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::*;

const T: Duration = Duration::from_secs(20);

/// The committed file at `path`, relative to the repository root.
fn committed(path: &str) -> String {
    read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
}

/// `redlock ARGS` with REDLOCK_URL pointing at a port nobody listens on: nothing may need Redis.
fn offline(args: &[&str]) -> Output {
    let mut cmd = redlock();
    cmd.env("REDLOCK_URL", format!("redis://127.0.0.1:{}", free_port()))
        .args(args);
    run_timeout(cmd, T)
}

#[test]
fn subcommands_print_the_committed_files_without_redis() {
    for (args, path) in [
        (&["man"][..], "man/redlock.1"),
        (&["completions", "bash"][..], "completions/redlock.bash"),
        (&["completions", "zsh"][..], "completions/_redlock"),
        (&["completions", "fish"][..], "completions/redlock.fish"),
        (&["completions", "elvish"][..], "completions/redlock.elv"),
        (
            &["completions", "powershell"][..],
            "completions/_redlock.ps1",
        ),
    ] {
        let out = offline(args);
        out.assert_code(0);
        assert_eq!(out.stderr, "", "{args:?} wrote to stderr");
        assert!(
            out.stdout == committed(path),
            "`redlock {}` differs from {path}; run scripts/gen-docs.sh",
            args.join(" ")
        );
    }
}

#[test]
fn bash_completes_subcommands_options_and_shells() {
    let script = format!(
        r#"source {}
complete -p redlock
words() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _redlock redlock "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"; echo "${{COMPREPLY[*]}}"; }}
words redlock ''
words redlock run --st
words redlock completions ''
"#,
        shell_quote(&Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/redlock.bash"))
    );
    let mut cmd = Command::new("bash");
    cmd.args(["--norc", "--noprofile", "-c", &script]);
    let out = run_timeout(cmd, T);
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}\n{}", out.stdout, out.stderr);
    assert!(
        lines[0].ends_with(" redlock"),
        "not registered: {}",
        lines[0]
    );
    for sub in ["run", "completions", "man"] {
        assert!(lines[1].split(' ').any(|w| w == sub), "{sub}: {}", lines[1]);
    }
    assert_eq!(lines[2], "--stop-signal");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(
            lines[3].split(' ').any(|w| w == shell),
            "{shell}: {}",
            lines[3]
        );
    }
}

#[test]
fn man_page_renders_without_warnings() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("man/redlock.1");
    let mut cmd = Command::new("groff");
    cmd.args(["-man", "-Tascii", "-P-cbou", "-ww", "-rLL=100n"])
        .arg(&page);
    let out = run_timeout(cmd, T);
    out.assert_code(0);
    assert_eq!(out.stderr, "", "groff warned");
    let text = out.stdout;
    for heading in ["EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "redlock run"] {
        assert!(text.contains(heading), "{heading} missing:\n{text}");
    }
    assert!(
        text.contains("--conflict-exit-code"),
        "options missing:\n{text}"
    );
}
