//! `redlock completions` and `redlock man`: they print the committed files, need no Redis, and
//! what they print works in bash and fish and renders as a man page without warnings. Every `redlock run`
//! line in the README, docs/, the man page and packaging/ runs as written, so recipes cannot rot.
//! Every relative link and anchor in the Markdown resolves, every long page lists its sections
//! after its title, and the tables of options and of the command's environment in
//! docs/running-jobs.md say what the code does. The picture of a run's timeline is what the
//! defaults draw, and the FAQ quotes the lease numbers the code gives. No sentence of the README
//! or docs/ runs past 60 words, and user pages name no issue.

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
        // Compared below, with the way to fix a difference.
        let out = offline(args).any_stdout().output();
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

/// Every file under `dir` (relative to the repository root), recursively, as relative paths.
fn files_under(dir: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(path) = pending.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

/// The Markdown files a reader follows links through: the README, docs/ and packaging/'s README.
fn markdown_files() -> Vec<String> {
    let mut files = vec!["README.md".to_owned(), "packaging/README.md".to_owned()];
    files.extend(
        files_under("docs")
            .into_iter()
            .filter(|f| f.ends_with(".md")),
    );
    files
}

/// The options of every `redlock run` line in the README, docs/, the man page and packaging/, as
/// words (a YAML `command:` list counts as one line), with the file each came from.
fn documented_run_options() -> Vec<(String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut files = vec!["README.md".to_owned(), "man/redlock.1".to_owned()];
    files.extend(
        files_under("docs")
            .into_iter()
            .filter(|f| f.ends_with(".md")),
    );
    files.extend(files_under("packaging"));
    for file in &files {
        let text = read(&root.join(file)).replace("\\-", "-");
        for line in text.lines() {
            let Some((_, rest)) = line.split_once("redlock run ") else {
                continue;
            };
            // The invocation ends at its ` -- ` or where its `code span` does.
            let options = rest.split(" -- ").next().unwrap_or_default();
            let options = options.split('`').next().unwrap_or_default();
            if options.contains(['<', '[']) {
                continue; // a synopsis, not an invocation
            }
            let words = options.split_whitespace().map(str::to_owned).collect();
            found.push((format!("{file}: {line}"), words));
        }
    }
    let file = "packaging/kubernetes/cronjob.yaml";
    let items = cronjob_command();
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

/// The container's command in packaging/kubernetes/cronjob.yaml, one word per item.
fn cronjob_command() -> Vec<String> {
    committed("packaging/kubernetes/cronjob.yaml")
        .lines()
        .skip_while(|line| line.trim() != "command:")
        .skip(1)
        .map_while(|line| line.trim().strip_prefix("- ").map(str::to_owned))
        .collect()
}

/// The README opens with its two commands: the demo, and the test command, which is what CI
/// runs (`.ci/run` execs scripts/test.sh).
#[test]
fn the_readme_opens_with_the_demo_and_the_test_command() {
    let readme = committed("README.md");
    let commands: Vec<&str> = readme
        .lines()
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| line.strip_prefix("    "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(
        commands,
        ["redlock", "scripts/demo.sh", "scripts/test.sh"],
        "the README's opening"
    );
    let ci = committed(".ci/run");
    assert!(ci.contains("exec bash scripts/test.sh"), "{ci}");
}

/// The two recipes a reader copies from several places are one line each, the same
/// everywhere: the CI deploy step (README, docs/recipes.md, packaging/ci/), and the nightly
/// backup run once a night across a fleet (every `--key backup` line with `--min-interval`:
/// docs/faq.md, docs/running-jobs.md, docs/recipes.md, packaging/cron/), which may differ only
/// in `--metrics-file` (where node_exporter is). Copied from two places, they must not be two
/// locks, or two behaviours.
#[test]
fn the_deploy_step_and_the_nightly_backup_are_the_same_everywhere() {
    let documented = documented_run_options();
    let same = |what: &str, pick: &dyn Fn(&[String]) -> bool, min: usize| {
        let found: Vec<(&String, Vec<&String>)> = documented
            .iter()
            .filter(|(_, words)| pick(words))
            .map(|(place, words)| {
                let mut kept = Vec::new();
                let mut words = words.iter();
                while let Some(word) = words.next() {
                    if word == "--metrics-file" {
                        words.next();
                    } else {
                        kept.push(word);
                    }
                }
                (place, kept)
            })
            .collect();
        assert!(found.len() >= min, "{what}: {found:#?}");
        for (place, words) in &found[1..] {
            assert_eq!(words, &found[0].1, "{what}: {place}\nand {}", found[0].0);
        }
    };
    let key = |words: &[String], prefix: &str| {
        words
            .windows(2)
            .any(|w| w[0] == "--key" && w[1].starts_with(prefix))
    };
    same("the deploy step", &|w| key(w, "deploy"), 5);
    same(
        "the nightly backup",
        &|w| key(w, "backup") && w.iter().any(|w| w == "--min-interval"),
        4,
    );
}

/// The Kubernetes entrypoint is one block, the same in docs/signals.md (redlock as PID 1),
/// docs/recipes.md and the README, with the words of packaging/'s CronJob; and it maps a busy
/// lock to 0, since a Job counts any other exit as a failure (signals.md's lacked it).
#[test]
fn the_kubernetes_entrypoint_is_the_same_everywhere() {
    let mut blocks = Vec::new();
    for page in ["docs/signals.md", "docs/recipes.md", "README.md"] {
        let text = committed(page);
        let code: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("    "))
            .collect();
        let starts: Vec<usize> = (0..code.len())
            .filter(|i| code[*i].starts_with("command: ["))
            .collect();
        assert_eq!(
            starts.len(),
            1,
            "{page}: {} `command: [` blocks",
            starts.len()
        );
        let lines: Vec<&str> = code[starts[0]..]
            .iter()
            .scan(false, |closed, line| {
                (!*closed).then(|| {
                    *closed = line.contains(']');
                    *line
                })
            })
            .collect();
        blocks.push((page, lines.join("\n")));
    }
    for (page, block) in &blocks[1..] {
        assert_eq!(block, &blocks[0].1, "{page} and {}", blocks[0].0);
    }
    let words: Vec<String> = blocks[0]
        .1
        .trim_start_matches("command: [")
        .trim_end_matches(']')
        .split(',')
        .map(|word| word.trim().to_owned())
        .collect();
    assert_eq!(
        words,
        cronjob_command(),
        "packaging/kubernetes/cronjob.yaml"
    );
    assert!(
        words.iter().any(|w| w == "--conflict-exit-code=0"),
        "{words:?}"
    );
}

/// The entrypoint as the CronJob runs it: PID 1 of a new PID namespace (`unshare --pid`), the
/// password from a file as the Secret gives it. A pod's TERM reaches the job, whose status
/// redlock exits with, and nothing stays locked; a busy lock exits 0, so the Job succeeds.
#[test]
fn the_kubernetes_entrypoint_works_as_pid_1() {
    let words = cronjob_command();
    let dashes = words.iter().position(|w| w == "--").expect("a --");
    assert_eq!(words[..2], ["/usr/local/bin/redlock", "run"], "{words:?}");
    assert_eq!(words[dashes + 1..], ["/app/report.sh"], "{words:?}");
    let options = &words[2..dashes];
    let key = options
        .iter()
        .find_map(|w| w.strip_prefix("--key="))
        .expect("a --key=");
    let password = "pid1-s3cret";
    let redis = RedisServer::start_with(ServerOpts {
        password: Some(password.to_owned()),
        ..ServerOpts::default()
    });
    let dir = TempDir::new();
    write_file(&dir.join("password"), password, 0o400);
    let report = dir.join("report.sh");
    write_file(
        &report,
        &format!(
            "#!/bin/sh\ntrap 'exit 3' TERM\ntouch {}\nwhile :; do sleep 0.02; done\n",
            dir.sh("ready")
        ),
        0o755,
    );
    let entrypoint = || {
        Redlock::sub("run")
            .env("REDLOCK_URL", redis.url_without_password())
            .env("REDLOCK_PASSWORD_FILE", dir.join("password"))
            .args(options)
            .command([&report])
            .through(["unshare", "--pid", "--fork", "--mount-proc"])
    };
    let pod = entrypoint().spawn();
    wait_for_file(&dir.join("ready"));
    // redlock's pid outside its namespace: unshare's only child.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", pod.pid())).unwrap();
    let redlock: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(redlock),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = pod.finish();
    out.assert_code(3);
    // The job's shell may say its sleep was "Terminated"; redlock says nothing.
    assert!(!out.stderr.contains("redlock"), "{}", out.stderr);
    assert_eq!(redis.get(&lock_key(key)), None, "the lock was left held");

    // Busy: another host holds the lock; the pod exits 0 without running the job.
    std::fs::remove_file(dir.join("ready")).unwrap();
    let (holder, _) = Redlock::run(&redis).key(key).hold(&dir, "h");
    entrypoint().output();
    assert!(!dir.join("ready").exists(), "the job ran beside the holder");
    touch(&dir.join("h.go"));
    holder.finish().assert_code(0);
}

/// No recipe puts a password in a URL (cron mails the job's environment, `ps` shows a command
/// line, a CI secret holding the URL hides that it holds one): no code line of the README or
/// docs/, and no line of packaging/ or the man page, has a URL with a password or a secret
/// standing for the URL.
#[test]
fn no_recipe_puts_a_password_in_a_url() {
    let mut files: Vec<(String, bool)> = markdown_files()
        .into_iter()
        .map(|file| (file, true))
        .collect();
    files.extend(
        files_under("packaging")
            .into_iter()
            .map(|file| (file, false)),
    );
    files.push(("man/redlock.1".to_owned(), false));
    let mut found = Vec::new();
    for (file, markdown) in &files {
        let text = committed(file);
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if *markdown && !fenced && !line.starts_with("    ") {
                continue; // prose and tables describe URL forms; recipes are code
            }
            let with_password = line.split("://").skip(1).any(|rest| {
                let authority = rest
                    .split(['/', ' ', '"', '\'', '`', ','])
                    .next()
                    .unwrap_or_default();
                // `[user:pass@]host` is a synopsis, not a URL.
                !authority.contains('[')
                    && authority
                        .split_once('@')
                        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
            });
            if with_password || line.contains("pass=") || line.contains("secrets.REDLOCK_URL") {
                found.push(format!("{file}: {line}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a password in a URL:\n{}",
        found.join("\n")
    );
}

#[test]
fn documented_command_lines_are_accepted() {
    let recipes = documented_run_options();
    assert!(recipes.len() >= 10, "found only {recipes:#?}");
    let redis = RedisServer::start();
    // A replica, for the lines with --min-replicas.
    let _replica = super::topology::replica_of(&redis);
    let dir = TempDir::new();
    let metrics = dir.join("job.prom").to_string_lossy().into_owned();
    let mut failures = Vec::new();
    for (source, options) in &recipes {
        // Our server instead of the documented one, a metrics file in a directory that exists
        // here, and a splay of a millisecond (a documented one of minutes would only make the
        // test wait); everything else as written.
        let mut words = Vec::new();
        let mut iter = options.iter();
        while let Some(word) = iter.next() {
            if word == "--url" {
                iter.next();
            } else if word == "--metrics-file" {
                iter.next();
                words.extend(["--metrics-file", metrics.as_str()]);
            } else if word == "--splay" || word.starts_with("--splay=") {
                if word == "--splay" {
                    iter.next();
                }
                words.extend(["--splay", "1ms"]);
            } else if !word.starts_with("--url=") {
                words.push(word.as_str());
            }
        }
        // Each line as on a Redis of its own: a --min-interval success of one line (the same
        // recipe is quoted in the docs and shipped in packaging/) does not skip the next.
        redis::cmd("FLUSHALL").exec(&mut redis.conn()).unwrap();
        // The status is checked below, every refused line gathered in one failure; a recipe
        // may well print (`--help`) or say things (-v, --tls-insecure).
        let out = Redlock::run(&redis)
            .args(&words)
            .command(["true"])
            .any_status()
            .any_stdout()
            .any_stderr()
            .output();
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

/// GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, `-` and `_`
/// kept, non-ASCII letters too), spaces turned into `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap_or(c)),
            _ => None,
        })
        .collect()
}

/// The prose of a Markdown file, without code: indented and fenced blocks and `code spans` are
/// dropped (a link inside them is an example, not a link).
fn prose(markdown: &str) -> String {
    let mut text = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if fenced || indent >= 4 {
            continue;
        }
        text.push_str(line);
        text.push('\n');
    }
    text.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The anchors a Markdown file's headings give, a repeated one with `-1`, `-2`, ... as GitHub does.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in prose(markdown).lines() {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let base = anchor(heading.trim_start_matches('#'));
        let repeats = seen
            .iter()
            .filter(|a| **a == base || a.starts_with(&format!("{base}-")))
            .count();
        seen.push(if repeats == 0 {
            base
        } else {
            format!("{base}-{repeats}")
        });
    }
    seen
}

/// Every `[text](target)` and `![alt](target)` of a Markdown file's prose: the targets.
fn link_targets(markdown: &str) -> Vec<String> {
    prose(markdown)
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target.to_owned()))
        .collect()
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = committed(&file);
        let dir = Path::new(&file).parent().unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            // "#x" is in the file itself; "a.md#x" and "../b/" relative to the file's folder.
            let linked = if path.is_empty() {
                root.join(&file)
            } else {
                root.join(dir).join(path)
            };
            if !linked.exists() {
                broken.push(format!("{file}: {target}: no such file"));
                continue;
            }
            if let Some(fragment) = fragment {
                let headings = anchors(&read(&linked));
                if !headings.iter().any(|a| a == fragment) {
                    broken.push(format!("{file}: {target}: no such heading in {headings:?}"));
                }
            }
        }
    }
    assert!(checked >= 50, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(
        anchor("More than one holder: --limit and --shared"),
        "more-than-one-holder---limit-and---shared"
    );
    assert_eq!(anchor("What redlock says when…"), "what-redlock-says-when");
    assert_eq!(anchor("`status` and `list`"), "status-and-list");
    assert_eq!(
        anchors("# A\n## B\n    # not a heading\n## B\n## B\n"),
        ["a", "b", "b-1", "b-2"]
    );
    assert_eq!(
        link_targets("see [a](x.md#y), `[b](z.md)`, ![c](img/d.svg)\n    [e](f)\n"),
        ["x.md#y", "img/d.svg"]
    );
}

/// The rows of the first Markdown table after `heading` in `file`: each row's cells, trimmed.
fn table_after(file: &str, heading: &str) -> Vec<Vec<String>> {
    let text = committed(file);
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("{file} has no {heading:?}"));
    text[start..]
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2) // the header and the |---| line
        .map(|line| {
            // `\|` inside a cell is a literal bar, not a column.
            let line = line.replace("\\|", "\u{0}");
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.replace('\u{0}', "|").trim().to_owned())
                .collect()
        })
        .collect()
}

/// The `code spans` of a table cell: "`--tls-cert <FILE>`, `--tls-key <FILE>`" gives both.
fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_options_table_lists_every_option_of_run_with_its_variable() {
    let rows = table_after("docs/running-jobs.md", "## The command line");
    // flag (its long name) -> variables in the same row
    let mut documented: Vec<(String, Vec<String>)> = Vec::new();
    for row in &rows {
        let flags: Vec<String> = spans(&row[0])
            .iter()
            .flat_map(|span| span.split(", ").map(str::to_owned).collect::<Vec<_>>())
            .filter_map(|span| {
                let flag = span.split([' ', '<']).next().unwrap_or_default();
                flag.strip_prefix("--").map(str::to_owned)
            })
            .collect();
        let vars = spans(&row[1]);
        documented.push((flags.join(" "), vars));
    }
    let command = redlock::cli::command();
    let run = command.find_subcommand("run").expect("a run subcommand");
    let mut problems = Vec::new();
    let mut in_code = Vec::new();
    for arg in run.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if ["help", "version"].contains(&long) || arg.is_hide_set() {
            continue;
        }
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        in_code.extend(env.clone());
        let Some((_, vars)) = documented
            .iter()
            .find(|(flags, _)| flags.split(' ').any(|f| f == long))
        else {
            problems.push(format!("--{long} is not in the table"));
            continue;
        };
        if let Some(env) = env
            && !vars.contains(&env)
        {
            problems.push(format!("--{long}: the table lacks {env}, has {vars:?}"));
        }
    }
    // Every variable the table names is one the code reads (REDLOCK_PASSWORD has no flag).
    for (flags, vars) in &documented {
        for var in vars {
            if !in_code.contains(var) && var != "REDLOCK_PASSWORD" {
                problems.push(format!("{flags}: {var} is read by no option"));
            }
        }
    }
    assert!(documented.len() >= 20, "{documented:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_environment_table_lists_what_the_command_is_given() {
    let rows = table_after(
        "docs/running-jobs.md",
        "## Environment given to the command",
    );
    let mut documented: Vec<String> = rows.iter().flat_map(|row| spans(&row[0])).collect();
    documented.sort();
    let redis = RedisServer::start();
    let out = Redlock::run(&redis)
        .key("env")
        .command(["env"])
        .any_stdout()
        .output();
    // The builder clears the developer's REDLOCK_* variables and passes the URL as a flag, so
    // every REDLOCK_* variable the command sees is one redlock set.
    let mut given: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_owned()))
        .filter(|name| name.starts_with("REDLOCK_"))
        .collect();
    given.sort();
    assert_eq!(given, documented);
}

/// Text as a reader sees it, for comparing sentences: `code spans` and `[links](target)` as
/// their text, emphasis dropped, whitespace collapsed.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("](") {
        let Some(end) = rest[start..].find(')') else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out.replace(['`', '[', ']'], "")
        .replace("**", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The man page as `man` shows it, on one line.
fn man_text() -> String {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("man/redlock.1");
    let mut cmd = Command::new("groff");
    cmd.args(["-man", "-Tutf8", "-P-cbou", "-rLL=400n", "-rHY=0"])
        .arg(&page);
    let text = Proc::spawn(cmd).finish().stdout;
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The grace after a lost lease is one rule, written once in the code (`--kill-after`'s help
/// and the man page render it) and said in the same words wherever the docs give it.
#[test]
fn the_grace_after_a_lost_lease_is_one_rule_everywhere() {
    let rule = redlock::lease_grace_rule!();
    for page in [
        "docs/running-jobs.md",
        "docs/signals.md",
        "docs/guarantees.md",
    ] {
        let text = plain(&committed(page));
        assert!(text.contains(rule), "{page} does not say: {rule}");
    }
    let help = offline(&["run", "--help"]).any_stdout().output().stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains(rule), "{help}");
    let man = man_text();
    assert!(man.contains(rule), "the man page does not say: {rule}");
}

/// What a fencing token promises is one sentence, written once in the code: the man page gives
/// it with REDLOCK_FENCING_TOKEN, and the docs that state the promise say it in the same words
/// (the environment table says everything the man page says of each variable).
#[test]
fn the_fencing_tokens_promise_is_one_sentence_everywhere() {
    let promise = redlock::fencing_guarantee!();
    for page in ["docs/guarantees.md", "docs/running-jobs.md"] {
        let text = plain(&committed(page));
        assert!(text.contains(promise), "{page} does not say: {promise}");
    }
    let rows = table_after(
        "docs/running-jobs.md",
        "## Environment given to the command",
    );
    for (var, meaning) in redlock::cli::COMMAND_ENV {
        let row = rows
            .iter()
            .find(|row| plain(&row[0]) == var)
            .unwrap_or_else(|| panic!("{var} is not in the environment table"));
        assert!(
            plain(&row[1]).starts_with(meaning),
            "running-jobs.md's {var}: {}\nshould begin: {meaning}",
            plain(&row[1])
        );
    }
    let man = man_text();
    assert!(
        man.contains(promise),
        "the man page does not say: {promise}"
    );
}

/// Each layer's header says which of redlock's modules it may use: every module it imports is
/// among them (a review found headers that omitted some).
#[test]
fn every_layer_imports_only_what_its_header_allows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for layer in [
        "cli", "run", "process", "lease", "lock", "backend", "admin", "report",
    ] {
        let header: String = std::fs::read_to_string(root.join(layer).join("mod.rs"))
            .unwrap()
            .lines()
            .take_while(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join(" ");
        // The backquoted names of the "May use ..." (or "uses only ...") sentence.
        let lower = header.to_lowercase();
        let start = lower
            .find("may use")
            .or_else(|| lower.find("uses only"))
            .unwrap_or_else(|| panic!("src/{layer}/mod.rs says nothing of what it may use"));
        let sentence = &header[start..];
        let end = [sentence.find("; "), sentence.find(". ")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(sentence.len());
        let allowed: Vec<String> = sentence[..end]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        for file in files_under(&format!("src/{layer}")) {
            let text =
                std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&file)).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            for used in text.split("crate::").skip(1) {
                let module: String = used
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                let top_level = root.join(format!("{module}.rs")).exists()
                    || root.join(&module).join("mod.rs").exists();
                if top_level && module != layer && !allowed.contains(&module) {
                    problems.push(format!("{file} uses `{module}`, not in its layer's header"));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// docs/img/timeline.svg is what scripts/timeline.py draws from the run's own timing functions
/// at the default `--ttl` and `--kill-after`: a change of a default or of the lease arithmetic
/// changes the numbers, and the committed picture must follow.
#[test]
fn the_timeline_picture_is_drawn_from_the_defaults() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = TempDir::new();
    let numbers = dir.join("numbers.tsv");
    std::fs::write(&numbers, redlock::cli::timeline::numbers()).unwrap();
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("scripts/timeline.py")).arg(&numbers);
    let out = Proc::spawn(cmd).finish();
    out.assert_code(0);
    let committed = committed("docs/img/timeline.svg");
    assert!(
        out.stdout == committed,
        "docs/img/timeline.svg is not what the defaults draw; run: {}",
        redlock::cli::timeline::REGENERATE
    );
    // The picture says the defaults `redlock run --help` shows.
    let help = offline(&["run", "--help"]).any_stdout().output().stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let ttl = help
        .split("--ttl <DURATION>")
        .nth(1)
        .and_then(|rest| rest.split("[default: ").nth(1))
        .and_then(|rest| rest.split(']').next())
        .expect("--ttl's default in --help");
    let kill_after = help
        .split("--kill-after <DURATION>")
        .nth(1)
        .and_then(|rest| rest.split("[default: ").nth(1))
        .and_then(|rest| rest.split(']').next())
        .expect("--kill-after's default in --help");
    let title = format!("--ttl {ttl}, --kill-after {kill_after}");
    assert!(
        committed.contains(&title),
        "the picture's title lacks {title:?}"
    );
}

/// The FAQ's answer on choosing `--ttl` quotes the stop line and the outage a run rides out:
/// the numbers the run's own timing gives, at the defaults and at `--ttl 90s`.
#[test]
fn the_faq_quotes_the_lease_numbers_the_code_gives() {
    use redlock::cli::timeline::{default_ttl, outage_ridden_out, stop_line};
    let text = committed("docs/faq.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let kill_after = redlock::cli::DEFAULT_KILL_AFTER;
    let ttl = default_ttl();
    let secs = |d: std::time::Duration| d.as_secs_f64();
    let quoted = [
        format!("({:.1} s at the defaults", secs(stop_line(ttl, kill_after))),
        format!(
            "an outage shorter than about {:.0} s never stops the job",
            secs(outage_ridden_out(ttl, kill_after)).floor()
        ),
        format!(
            "one longer than about {:.0} s always does",
            secs(stop_line(ttl, kill_after)).round()
        ),
        format!(
            "`--ttl 90s` rides out about {:.0} s",
            secs(outage_ridden_out(
                std::time::Duration::from_secs(90),
                kill_after
            ))
            .floor()
        ),
    ];
    for quote in quoted {
        assert!(text.contains(&quote), "docs/faq.md does not say: {quote}");
    }
}

/// The longest a page of docs/ may be without a table of contents.
const TOC_FROM_LINES: usize = 150;

/// Every page of docs/ longer than [`TOC_FROM_LINES`] opens with a table of contents: between
/// its title and its first section, a list of links to each of its `##` sections, in order. A
/// section added, renamed or moved without its line in the list fails here (a page without any
/// `##` section has nothing to list).
#[test]
fn every_long_page_lists_its_sections_after_its_title() {
    let mut problems = Vec::new();
    let mut long = 0;
    for file in files_under("docs")
        .into_iter()
        .filter(|f| f.ends_with(".md"))
    {
        let text = committed(&file);
        if text.lines().count() <= TOC_FROM_LINES {
            continue;
        }
        let prose = prose(&text);
        let headings = prose.lines().filter(|line| line.starts_with('#'));
        let sections: Vec<String> = headings
            .zip(anchors(&text))
            .filter(|(heading, _)| heading.starts_with("## "))
            .map(|(_, anchor)| format!("#{anchor}"))
            .collect();
        if sections.is_empty() {
            continue;
        }
        long += 1;
        let head: Vec<&str> = prose
            .lines()
            .skip(1)
            .take_while(|line| !line.starts_with("## "))
            .filter(|line| line.starts_with("- ["))
            .collect();
        let listed: Vec<String> = link_targets(&head.join("\n"))
            .into_iter()
            .filter(|target| target.starts_with('#'))
            .collect();
        if listed != sections {
            problems.push(format!(
                "{file}: its list after the title links {listed:?}, its sections are {sections:?}"
            ));
        }
    }
    assert!(long >= 4, "only {long} long pages found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A table's rows as (status, meaning), `code spans` shown as plain text.
fn exit_rows(file: &str, heading: &str) -> Vec<(String, String)> {
    table_after(file, heading)
        .into_iter()
        .map(|row| (row[0].replace('`', ""), row[1].replace('`', "")))
        .collect()
}

/// The exit statuses are one set of tables, in `src/exit.rs`: each subcommand's `--help` and
/// the man page render them (a unit test in `src/cli/docs.rs` holds the page), and the README's
/// tables say the same, row for row and word for word.
#[test]
fn exit_statuses_are_the_codes_tables_everywhere() {
    let rows = |table: &[redlock::exit::Row]| -> Vec<(String, String)> {
        table
            .iter()
            .map(|row| (row.status.to_owned(), row.meaning.to_owned()))
            .collect()
    };
    assert_eq!(
        exit_rows("README.md", "## Exit status"),
        rows(redlock::exit::RUN),
        "README.md's exit table differs from src/exit.rs's RUN"
    );
    assert_eq!(
        exit_rows("README.md", "| check | meaning |"),
        rows(redlock::exit::CHECK),
        "README.md's check table differs from src/exit.rs's CHECK"
    );
    for (name, table) in redlock::exit::TABLES {
        let help = offline(&[name, "--help"]).any_stdout().output().stdout;
        let wanted = redlock::exit::help_table(table);
        assert!(help.contains(&wanted), "redlock {name} --help:\n{help}");
    }
    // The man page as a reader sees it: every subcommand's table under its own heading.
    let text = man_text();
    let section = &text[text.find("EXIT STATUS redlock run").expect("EXIT STATUS")..];
    for (name, table) in redlock::exit::TABLES {
        let start = section
            .find(&format!("redlock {name} "))
            .unwrap_or_else(|| panic!("no redlock {name} in EXIT STATUS"));
        for row in *table {
            let shown = format!("{} {}", row.status, row.meaning);
            assert!(
                section[start..].contains(&shown),
                "man page, redlock {name}: {shown}"
            );
        }
    }
}

/// The list marker a Markdown line starts with (`- `, `* `, `+ ` or `12. `), with its space.
fn list_marker(line: &str) -> Option<&str> {
    if line.starts_with(['-', '*', '+']) && line[1..].starts_with(' ') {
        return Some(&line[..2]);
    }
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (digits > 0 && line[digits..].starts_with(". ")).then(|| &line[..digits + 2])
}

/// The pieces of a Markdown file a reader reads as one run of text: each paragraph, list item
/// (without its marker), heading (without its `#`) and table cell, its lines joined. Fenced
/// code blocks are left out, and so are indented ones: lines four columns right of the text
/// they would belong to (the page's margin, or the text of the list item they are in), even
/// where the first looks like a list item (a YAML `- name:`).
fn prose_units(markdown: &str) -> Vec<String> {
    let mut units = Vec::new();
    let mut unit = String::new();
    let flush = |units: &mut Vec<String>, unit: &mut String| {
        if !unit.trim().is_empty() {
            units.push(std::mem::take(unit));
        }
        unit.clear();
    };
    let mut fenced = false;
    let mut code = false; // in an indented code block
    let mut after_blank = true;
    // The columns where the text of the list items we are in starts, innermost last.
    let mut items: Vec<usize> = Vec::new();
    for line in markdown.lines() {
        let text = line.trim_start();
        let indent = line.len() - text.len();
        let starts_block = std::mem::replace(&mut after_blank, text.is_empty());
        if text.starts_with("```") {
            fenced = !fenced;
            flush(&mut units, &mut unit);
            continue;
        }
        if fenced {
            continue;
        }
        if text.is_empty() {
            flush(&mut units, &mut unit);
            continue;
        }
        if starts_block || list_marker(text).is_some() {
            // A block or an item that starts left of an item's text closes that item.
            while items.last().is_some_and(|column| *column > indent) {
                items.pop();
            }
        }
        if starts_block || code {
            code = indent >= items.last().copied().unwrap_or(0) + 4;
        }
        if code {
            continue;
        }
        if let Some(marker) = list_marker(text) {
            flush(&mut units, &mut unit);
            items.push(indent + marker.len());
            unit.push_str(&text[marker.len()..]);
        } else if text.trim_start_matches('#').starts_with(' ') {
            flush(&mut units, &mut unit);
            units.push(text.trim_start_matches('#').to_owned());
        } else if text.starts_with('|') {
            flush(&mut units, &mut unit);
            // A cell ends at a bar, but not at an escaped one (`\|`); the |---| row has no words.
            let row = text.replace("\\|", "\u{0}");
            units.extend(
                row.split('|')
                    .map(|cell| cell.replace('\u{0}', "|"))
                    .filter(|cell| cell.contains(|c: char| !"-: ".contains(c))),
            );
        } else {
            unit.push(' ');
            unit.push_str(text);
        }
    }
    flush(&mut units, &mut unit);
    units
}

/// Joins the words of a `code span`, which count as one.
const CODE_SPACE: char = '\u{e000}';

/// The sentences of one unit of prose (see [`prose_units`]), each as its words joined by one
/// space: a `code span` is one word and ends nothing, a link is its text, emphasis is dropped.
/// A sentence ends at a word that ends in `.`, `!` or `?` (perhaps before a closing bracket
/// or quote); a semicolon or a colon does not end one.
fn unit_sentences(unit: &str) -> Vec<String> {
    let mut text = String::new();
    for (i, part) in unit.split('`').enumerate() {
        if i % 2 == 1 {
            let words: Vec<&str> = part.split_whitespace().collect();
            text.push('`');
            text.push_str(&words.join(&CODE_SPACE.to_string()));
            text.push('`');
            continue;
        }
        // `[text](target)` as its text, `**bold**` and `*emphasis*` as plain words.
        let mut prose = String::new();
        let mut rest = part;
        while let Some(start) = rest.find("](") {
            let Some(end) = rest[start..].find(')') else {
                break;
            };
            prose.push_str(&rest[..start]);
            rest = &rest[start + end + 1..];
        }
        prose.push_str(rest);
        text.push_str(&prose.replace(['[', ']', '*'], ""));
    }
    let mut sentences = Vec::new();
    let mut sentence: Vec<&str> = Vec::new();
    for word in text.split_whitespace() {
        sentence.push(word);
        if word
            .trim_end_matches([')', '"', '\''])
            .ends_with(['.', '!', '?'])
        {
            sentences.push(sentence.join(" "));
            sentence.clear();
        }
    }
    if !sentence.is_empty() {
        sentences.push(sentence.join(" "));
    }
    sentences
}

/// The sentences of a Markdown file's prose, as [`unit_sentences`] gives them, in order.
fn sentences(markdown: &str) -> Vec<String> {
    prose_units(markdown)
        .iter()
        .flat_map(|unit| unit_sentences(unit))
        .collect()
}

/// The longest sentence the README and docs/ may have, in words.
const LONGEST_SENTENCE: usize = 60;

/// No sentence of the README or of a page of docs/ runs past [`LONGEST_SENTENCE`] words: not in
/// a paragraph, a list item, a heading or a table cell (code blocks aside, a `code span` one
/// word). Short sentences, one idea each.
#[test]
fn no_sentence_in_the_readme_or_docs_runs_over_60_words() {
    let mut long = Vec::new();
    let mut counted = 0;
    let mut files = vec!["README.md".to_owned()];
    files.extend(
        files_under("docs")
            .into_iter()
            .filter(|f| f.ends_with(".md")),
    );
    for file in files {
        for sentence in sentences(&committed(&file)) {
            counted += 1;
            let words: Vec<&str> = sentence.split(' ').collect();
            if words.len() > LONGEST_SENTENCE {
                // Its first words, enough to find it by, and a long `code span` cut.
                let start: String = words[..12].join(" ").replace(CODE_SPACE, " ");
                let start: String = start.chars().take(100).collect();
                long.push(format!("{file}: {} words: {start} ...", words.len()));
            }
        }
    }
    assert!(counted > 500, "only {counted} sentences found");
    assert!(
        long.is_empty(),
        "{} sentences over {LONGEST_SENTENCE} words (split each into short ones):\n{}",
        long.len(),
        long.join("\n")
    );
}

#[test]
fn sentences_are_split_as_a_reader_splits_them() {
    let text = "\
# A title

One two. Three `a. b [c]` four; five, see
#12 here.
- **A lead.** An item
  goes on (see [the page](x.md).) Next? Yes!
  - A nested item

        code. in an item
- name: a list item, not code

A paragraph

    - name: code
      env: x. y

```sh
fenced. code
```
| cell one. cell | `a \\| b` two |
|---|:-:|
1. Last
";
    assert_eq!(
        sentences(text),
        [
            "A title",
            "One two.",
            "Three `a.\u{e000}b\u{e000}[c]` four; five, see #12 here.",
            "A lead.",
            "An item goes on (see the page.)",
            "Next?",
            "Yes!",
            "A nested item",
            "name: a list item, not code",
            "A paragraph",
            "cell one.",
            "cell",
            "`a\u{e000}|\u{e000}b` two",
            "Last",
        ]
    );
}

/// The places where "issue 36" or "issues 19 to 22" stand in `text`, with the word after.
fn issue_numbers(text: &str) -> Vec<String> {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|pair| {
            let word = pair[0].trim_start_matches(['(', '[', '*']).to_lowercase();
            let number = pair[1].trim_start_matches('#');
            (word == "issue" || word == "issues")
                && number.starts_with(|c: char| c.is_ascii_digit())
        })
        .map(|pair| pair.join(" "))
        .collect()
}

/// User pages speak of the product, not of how the project got there: no issue number in the
/// README or docs/, except in contributing.md and testing.md, which tell that history.
#[test]
fn user_pages_name_no_issue() {
    let mut found = Vec::new();
    let mut files = vec!["README.md".to_owned()];
    files.extend(files_under("docs").into_iter().filter(|f| {
        f.ends_with(".md") && !["docs/contributing.md", "docs/testing.md"].contains(&f.as_str())
    }));
    for file in files {
        for place in issue_numbers(&committed(&file)) {
            found.push(format!("{file}: {place}"));
        }
    }
    assert!(
        found.is_empty(),
        "user pages name issues (say what the product does instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn issue_numbers_are_found_as_written() {
    assert_eq!(
        issue_numbers(
            "as (issue 36's budgets), Issues\n19 to 22, issue #7; an issue tracker, issued 3"
        ),
        ["(issue 36's", "Issues 19", "issue #7;"]
    );
}

/// operating.md's Logs section names the subcommands that take `--log-format`: exactly those
/// whose clap definitions have it.
#[test]
fn the_log_format_is_documented_for_every_subcommand_that_takes_it() {
    let text = committed("docs/operating.md");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = "Every subcommand that talks to Redis takes it:";
    let start = text
        .find(said)
        .expect("operating.md names who takes --log-format")
        + said.len();
    let sentence = &text[start..start + text[start..].find('.').unwrap()];
    let mut documented = spans(sentence);
    documented.sort();
    let mut taking: Vec<String> = redlock::cli::command()
        .get_subcommands()
        .filter(|sub| {
            sub.get_arguments()
                .any(|a| a.get_long() == Some("log-format"))
        })
        .map(|sub| sub.get_name().to_owned())
        .collect();
    taking.sort();
    assert_eq!(documented, taking);
}
