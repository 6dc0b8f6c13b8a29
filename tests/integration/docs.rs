//! `redlock completions` and `redlock man`: they print the committed files, need no Redis, and
//! what they print works in bash and fish and renders as a man page without warnings. Every `redlock run`
//! line in the README, the man page and packaging/ runs as written, so recipes cannot rot.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// The committed file at `path`, relative to the repository root.
fn committed(path: &str) -> String {
    read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
}

/// `redlock ARGS` with REDLOCK_URL pointing at a port nobody listens on: nothing may need Redis.
fn offline(args: &[&str]) -> Redlock {
    Redlock::new()
        .env("REDLOCK_URL", format!("redis://127.0.0.1:{}", free_port()))
        .args(args)
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
        let out = offline(args).status(0).stderr("").output();
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
    let out = Proc::spawn(cmd).finish();
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
fn fish_completes_subcommands_options_and_shells() {
    let script = format!(
        r#"source {}
complete -C 'redlock '
echo ---
complete -C 'redlock run --st'
echo ---
complete -C 'redlock completions '"#,
        shell_quote(&Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/redlock.fish"))
    );
    let mut cmd = Command::new("fish");
    cmd.args(["--no-config", "-c", &script]);
    let out = Proc::spawn(cmd).finish();
    out.assert_code(0);
    let parts: Vec<Vec<&str>> = out
        .stdout
        .split("---\n")
        .map(|part| {
            part.lines()
                .map(|line| line.split('\t').next().unwrap_or_default())
                .collect()
        })
        .collect();
    assert_eq!(parts.len(), 3, "{}\n{}", out.stdout, out.stderr);
    for sub in ["run", "completions", "man"] {
        assert!(parts[0].contains(&sub), "{sub}: {:?}", parts[0]);
    }
    assert_eq!(parts[1], ["--stop-signal"]);
    // Only the shells: clap_complete alone would offer files here (docs.rs adds the values).
    assert_eq!(
        parts[2],
        ["bash", "elvish", "fish", "powershell", "zsh"],
        "{:?}",
        parts[2]
    );
}

#[test]
fn man_page_renders_without_warnings() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("man/redlock.1");
    let mut cmd = Command::new("groff");
    cmd.args(["-man", "-Tascii", "-P-cbou", "-ww", "-rLL=100n"])
        .arg(&page);
    let out = Proc::spawn(cmd).finish();
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

/// The options of every `redlock run` line in the README, the man page and packaging/, as words
/// (a YAML `command:` list counts as one line), with the file each came from.
fn documented_run_options() -> Vec<(String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for file in [
        "README.md",
        "man/redlock.1",
        "packaging/systemd/redlock-backup.service",
        "packaging/homebrew/redlock.rb",
    ] {
        let text = read(&root.join(file)).replace("\\-", "-");
        for line in text.lines() {
            let Some((_, rest)) = line.split_once("redlock run ") else {
                continue;
            };
            let options = rest.split(" -- ").next().unwrap_or_default();
            if options.contains(['<', '[']) {
                continue; // a synopsis, not an invocation
            }
            let words = options.split_whitespace().map(str::to_owned).collect();
            found.push((format!("{file}: {line}"), words));
        }
    }
    let file = "packaging/kubernetes/cronjob.yaml";
    let yaml = read(&root.join(file));
    let items: Vec<&str> = yaml
        .lines()
        .skip_while(|line| line.trim() != "command:")
        .skip(1)
        .map_while(|line| line.trim().strip_prefix("- "))
        .collect();
    let options = items
        .iter()
        .skip_while(|word| **word != "run")
        .skip(1)
        .take_while(|word| **word != "--")
        .map(|word| word.to_string())
        .collect();
    found.push((format!("{file}: {items:?}"), options));
    found
}

#[test]
fn documented_command_lines_are_accepted() {
    let recipes = documented_run_options();
    assert!(recipes.len() >= 10, "found only {recipes:#?}");
    let redis = RedisServer::start();
    let mut failures = Vec::new();
    for (source, options) in &recipes {
        // Our server instead of the documented one; everything else as written.
        let mut words = Vec::new();
        let mut iter = options.iter();
        while let Some(word) = iter.next() {
            if word == "--url" {
                iter.next();
            } else if !word.starts_with("--url=") {
                words.push(word.as_str());
            }
        }
        let out = Redlock::run(&redis).args(&words).command(["true"]).output();
        if out.code() != 0 {
            failures.push(format!("{source}\n  exit {}: {}", out.code(), out.stderr));
        }
    }
    assert!(
        failures.is_empty(),
        "documented command lines redlock refuses:\n{}",
        failures.join("\n")
    );
}
