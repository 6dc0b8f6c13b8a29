//! Shell completions and the man page, generated from the clap definitions in `args.rs`.
//!
//! The output is committed under `completions/` and `man/` (packages ship those files); a unit
//! test fails when they drift from the code, and [`REGENERATE`] rewrites them. The man page is one
//! page, redlock(1), holding every subcommand: `man redlock` answers everything and `/--wait`
//! finds any option. Exit statuses come from [`exit::RUN`], environment variables from the
//! clap definitions and [`cli::COMMAND_ENV`]: no table is written twice.

use std::io::{self, Write};

use clap_complete::Shell;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, italic, roman};

use crate::{cli, exit};

/// The one command that rewrites the committed files after the CLI changed.
pub const REGENERATE: &str = "scripts/gen-docs.sh";

/// Every shell `redlock completions` knows, in the order files are listed.
pub const SHELLS: [Shell; 5] = [
    Shell::Bash,
    Shell::Zsh,
    Shell::Fish,
    Shell::Elvish,
    Shell::PowerShell,
];

/// `redlock completions --help`: where each script goes.
pub const COMPLETIONS_HELP: &str = "\
Examples (packages install these for bash, zsh and fish already):
  redlock completions bash > ~/.local/share/bash-completion/completions/redlock
  redlock completions zsh > ~/.zfunc/_redlock    # with fpath+=(~/.zfunc) before compinit
  redlock completions fish > ~/.config/fish/completions/redlock.fish";

/// `redlock man --help`: how to read or install the page.
pub const MAN_HELP: &str = "\
Examples:
  redlock man | man -l -
  redlock man > ~/.local/share/man/man1/redlock.1";

/// What the man page says in DESCRIPTION, one paragraph per string.
const DESCRIPTION: &[&str] = &[
    "redlock runs a command while holding a lock on a server every machine reaches, so that \
     across every machine that might start it only one copy runs at a time, and nothing is left \
     locked or running when things go wrong. The lock lives where --url says: on Redis (one \
     server, the master its Sentinels name, a Cluster, or a quorum of independent masters), on \
     an etcd cluster, or in a PostgreSQL database.",
    "It takes the lock in one atomic step with a random owner token, and gives the command a \
     fencing token larger than every one given before for the lock's name \
     (REDLOCK_FENCING_TOKEN), runs the command without a shell in its own process group, \
     renews the lease every ttl/3 from a background thread, forwards signals to the command \
     (see SIGNALS), and releases the lock with a token check when the command ends. If the \
     lease cannot be renewed, redlock stops the command (the stop signal, then SIGKILL) before \
     the lease can run out, and exits 76. A watchdog process that knows the lease deadline \
     kills the command if redlock itself is stopped or frozen past it: the command never runs \
     while another holder could hold the lock.",
    "redlock is silent on success: diagnostics go to stderr prefixed \"redlock: \", stdout \
     belongs to the command, and the exit status says what happened.",
];

/// SIGNALS: how redlock passes signals on, stops, suspends and exits, one paragraph each.
const SIGNALS: &[&str] = &[
    "Forwarded: every signal whose default action would end redlock goes to the command's \
     process group, and the command decides what it means (a reload, a thread dump, its end): \
     HUP, INT, QUIT, ILL, TRAP, ABRT, BUS, FPE, USR1, SEGV, USR2, PIPE, ALRM, STKFLT, XCPU, \
     XFSZ, VTALRM, PROF, IO, PWR, SYS and the real-time signals SIGRTMIN to SIGRTMAX, and WINCH \
     as well; redlock never escalates them to SIGKILL. None of them can end redlock with its \
     lock held: a command that dies of one makes redlock release the lock and die of it too. \
     A fault of redlock's own (SEGV, BUS, ABRT...) still ends it, as the kernel delivers those \
     to the faulting thread. While waiting for the lock there is no command yet: the stop \
     request and those signals end the wait, and redlock dies of them (128+N), but USR1, USR2, \
     WINCH and the real-time signals, which the application defines, are ignored (said at -v). \
     Not taken: KILL and STOP (they cannot be), CHLD (redlock reaps), URG (ignored by default), \
     and signals 32 and 33 (the C library's own: redlock ignores 32, whose default would end \
     it with the lock held).",
    concat!(
        "Stop requests: TERM, or the --stop-signal, from outside (systemd, Kubernetes, \
         timeout(1)) sends the stop signal to the group and SIGKILL after --kill-after (the \
         grace), while the lease goes on being renewed, so the grace may be longer than the \
         ttl. The same request again within 500 ms is the same request (timeout(1) sends TERM \
         to redlock, then to its process group); a later second one sends SIGKILL at once. \
         --max-runtime and the loss of the lease stop the command the same way. ",
        crate::lease_grace_rule!(),
        " Every SIGKILL redlock sends is reported (-v; the JSON event killed)."
    ),
    "Ignored signals: a signal ignored when redlock starts (nohup, a shell's cmd &) stays \
     ignored, for redlock and for the command, and is not forwarded, as POSIX shells do: under \
     nohup a logout's SIGHUP ends neither. Every other signal reaches the command with its \
     default disposition. PIPE is the exception: Rust programs start with it ignored, so \
     redlock cannot tell whether its parent ignored it; it is forwarded like the others (and \
     the command gets its default disposition back).",
    "Job control: on TSTP, TTIN or TTOU (Ctrl-Z, sent to redlock or stopping the command, in a \
     terminal or not) redlock stops the command's group, takes the terminal back, and stops \
     itself with the same signal, as a shell job stops. Continued (fg, bg, SIGCONT): if the \
     lease ran out meanwhile, the command is killed without running again and redlock exits \
     76; otherwise the lease is renewed at once and the command continued. After fg the \
     command gets the terminal back; after bg the terminal stays with the shell and the command \
     runs in the background, stopped by SIGTTIN if it reads the terminal, as a bare command.",
    "The watchdog: a small process of redlock's, in its own process group, is told the lease \
     deadline at every renewal and SIGKILLs the command's group if it passes without a \
     renewal, so a redlock that is stopped (SIGSTOP, a debugger, Ctrl-Z) or frozen cannot leave \
     its command running unlocked; it also kills the group if redlock dies. A watchdog that is \
     killed is replaced at once and given the deadline again (if none can be started, the \
     command is stopped as for a lost lease); one that is stopped is continued. A whole \
     machine frozen past the ttl stays out of reach: only a fencing token protects the \
     resource then.",
    "Exit by signal: when the command died of a signal, or a signal interrupted the wait for \
     the lock, redlock releases the lock, restores the signal's default disposition and kills \
     itself with it (without a core dump), as timeout(1) does, so its parent sees a signal death \
     (a shell shows 128+N) and a calling script stops at Ctrl-C. When the command had the \
     terminal and died of INT or QUIT, redlock also sends that signal to its own process group, \
     where the terminal would have sent it without redlock. As PID 1, which the kernel does not \
     let kill itself so, redlock exits 128+N. When redlock handed the terminal to the command \
     and the command was killed, redlock restores the terminal modes it saved.",
];

/// EXAMPLES: what each does, then the command line.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "Run a backup, one copy at a time across every machine:",
        "redlock run --key backup --ttl 30s -- ./backup.sh",
    ),
    (
        "From cron, where another host holding the lock is not a failure (exit 0 instead of 75):",
        "redlock run --key nightly --conflict-exit-code 0 -- /usr/local/bin/nightly.sh",
    ),
    (
        "A deploy from CI: wait up to 30 minutes for the lock, and stop the job if it runs longer than 45 minutes (exit 124):",
        "redlock run --key deploy-production --ttl 60s --wait 30m --max-runtime 45m -- ./deploy.sh",
    ),
    (
        "Pass the fencing token to the resource, so that it can refuse writes from an older holder:",
        "redlock run --key export -- sh -c 'exec ./export --fence \"$REDLOCK_FENCING_TOKEN\"'",
    ),
    (
        "At most three database dumps at once across the fleet (a semaphore; every client gives the same --limit):",
        "redlock run --key pg-dump --limit 3 --wait 2h -- ./dump.sh",
    ),
    (
        "Readers share a dataset; the rebuild, without --shared, runs alone, and readers that come while it waits queue behind it:",
        "redlock run --key dataset --shared --wait 10m -- ./report.sh\n\
         redlock run --key dataset --wait 1h -- ./rebuild.sh",
    ),
    (
        "Lock on a TLS Redis with the password in a file, out of the command line and the environment:",
        "REDLOCK_URL=rediss://redis.internal:6380/0 REDLOCK_PASSWORD_FILE=/etc/redlock/password redlock run --key report -- ./report.sh",
    ),
    (
        "Install completions and this page for the current user:",
        "redlock completions bash > ~/.local/share/bash-completion/completions/redlock\n\
         redlock man > ~/.local/share/man/man1/redlock.1",
    ),
];

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut cmd = cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "redlock", &mut out);
    if shell == Shell::Fish {
        out.extend(fish_positional_values(&cmd).into_bytes());
    }
    out
}

/// clap_complete's fish script offers no values for positional arguments (clap-rs/clap#6295,
/// open), so `redlock completions <TAB>` would list files. These lines offer the possible values,
/// taken from the same clap definitions.
fn fish_positional_values(cmd: &clap::Command) -> String {
    let mut lines = String::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let possible = arg.get_possible_values();
            let values: Vec<&str> = possible
                .iter()
                .filter(|value| !value.is_hide_set())
                .map(|value| value.get_name())
                .collect();
            if values.is_empty() {
                continue;
            }
            let values = values.join(" ");
            lines.push_str(&format!(
                "complete -c redlock -n \"__fish_redlock_using_subcommand {}; and not __fish_seen_subcommand_from {values}\" -f -a \"{values}\"\n",
                sub.get_name()
            ));
        }
    }
    lines
}

/// Where the committed completion script for `shell` lives, relative to the repository root
/// (clap_complete's names: `redlock.bash`, `_redlock`, `redlock.fish`, ...).
pub fn completions_path(shell: Shell) -> String {
    use clap_complete::Generator;
    format!("completions/{}", shell.file_name("redlock"))
}

/// Where the committed man page lives, relative to the repository root.
pub const MAN_PATH: &str = "man/redlock.1";

/// Every generated file: its path relative to the repository root, and its contents.
pub fn generated_files() -> Vec<(String, Vec<u8>)> {
    let mut files = vec![(MAN_PATH.to_owned(), man_page())];
    files.extend(SHELLS.map(|shell| (completions_path(shell), completions(shell))));
    files
}

/// The man page redlock(1), as roff.
pub fn man_page() -> Vec<u8> {
    let root = man_command();
    let subcommands: Vec<&clap::Command> = root
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .collect();
    let man = Man::new(root.clone()).title("REDLOCK");

    let mut page = Vec::new();
    render(&mut page, |w| man.render_title(w));
    page.extend(body(|w| man.render_name_section(w), false));
    page.extend(synopsis(&subcommands));
    page.extend(commands(&subcommands));

    let mut roff = Roff::new();
    paragraphs(&mut roff, "SIGNALS", SIGNALS);
    exit_status_section(&mut roff);
    environment_section(&mut roff, &subcommands);
    examples_section(&mut roff);
    see_also_section(&mut roff);
    page.extend(body(|w| roff.to_writer(w), false));
    page.extend(body(|w| man.render_version_section(w), false));
    page
}

/// SYNOPSIS: each subcommand's usage, one after the other.
fn synopsis(subcommands: &[&clap::Command]) -> Vec<u8> {
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]);
    let mut page = body(|w| roff.to_writer(w), false);
    for (i, sub) in subcommands.iter().enumerate() {
        if i > 0 {
            page.extend(b".br\n");
        }
        page.extend(body(
            |w| Man::new((*sub).clone()).render_synopsis_section(w),
            true,
        ));
    }
    page
}

/// DESCRIPTION, then COMMANDS: each subcommand's long help and its options.
fn commands(subcommands: &[&clap::Command]) -> Vec<u8> {
    let mut roff = Roff::new();
    paragraphs(&mut roff, "DESCRIPTION", DESCRIPTION);
    roff.control("SH", ["COMMANDS"]);
    roff.text([
        roman("Every command takes "),
        bold("-h"),
        roman(" ("),
        bold("--help"),
        roman(") and "),
        bold("-V"),
        roman(" ("),
        bold("--version"),
        roman(")."),
    ]);
    let mut page = body(|w| roff.to_writer(w), false);
    for sub in subcommands {
        let name = sub.get_bin_name().unwrap_or_else(|| sub.get_name());
        let mut roff = Roff::new();
        roff.control("SS", [name]);
        if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
            roff.text([roman(about.to_string())]);
        }
        page.extend(body(|w| roff.to_writer(w), false));
        if sub.get_arguments().any(|arg| !arg.is_hide_set()) {
            page.extend(body(
                |w| Man::new((*sub).clone()).render_options_section(w),
                true,
            ));
        }
    }
    page
}

/// A section of plain paragraphs.
fn paragraphs(roff: &mut Roff, section: &str, text: &[&str]) {
    roff.control("SH", [section]);
    for (i, paragraph) in text.iter().enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(*paragraph)]);
    }
}

/// EXAMPLES: what each does, then the command line as typed.
fn examples_section(roff: &mut Roff) {
    roff.control("SH", ["EXAMPLES"]);
    for (what, command) in EXAMPLES {
        roff.control("PP", []);
        roff.text([roman(*what)]);
        roff.control("PP", []);
        roff.control("RS", ["4"]);
        roff.control("EX", []);
        for line in command.lines() {
            roff.text([roman(line)]);
            roff.control("br", []);
        }
        roff.control("EE", []);
        roff.control("RE", []);
    }
}

fn see_also_section(roff: &mut Roff) {
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("flock"),
        roman("(1), "),
        bold("timeout"),
        roman("(1), "),
        bold("redis-cli"),
        roman("(1), "),
        bold("psql"),
        roman("(1), "),
        bold("crontab"),
        roman("(5), "),
        bold("systemd.timer"),
        roman("(5)"),
    ]);
}

/// The command as the man page shows it: no help subcommand, and -h/-V said once, not per command.
fn man_command() -> clap::Command {
    let mut root = cli::command()
        .disable_help_subcommand(true)
        .disable_help_flag(true)
        .disable_version_flag(true);
    let names: Vec<String> = root
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        root = root.mut_subcommand(name, |sub| {
            sub.disable_help_flag(true).disable_version_flag(true)
        });
    }
    root.build();
    root
}

/// EXIT STATUS, from the tables in `exit.rs`: one subsection per subcommand, `run`'s first.
/// `check` speaks the monitoring plugins' convention instead, which its own subsection says.
fn exit_status_section(roff: &mut Roff) {
    roff.control("SH", ["EXIT STATUS"]);
    for (name, rows) in exit::TABLES {
        roff.control("SS", [format!("redlock {name}").as_str()]);
        for row in *rows {
            roff.control("TP", []);
            roff.text([bold(row.status)]);
            roff.text([roman(row.meaning)]);
        }
    }
}

/// ENVIRONMENT: each option's variable (from clap), then what the command is given.
fn environment_section(roff: &mut Roff, subcommands: &[&clap::Command]) {
    roff.control("SH", ["ENVIRONMENT"]);
    roff.text([roman(
        "These variables give defaults for options; a flag wins over its variable.",
    )]);
    let mut seen = Vec::new();
    for sub in subcommands {
        for arg in sub.get_arguments() {
            let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
                continue;
            };
            let var = var.to_string_lossy().into_owned();
            if seen.contains(&var) {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            roff.control("TP", []);
            roff.text([bold(var.as_str())]);
            roff.text([
                roman("The default for "),
                bold(format!("--{long}")),
                roman(format!(": {help}")),
            ]);
            seen.push(var);
        }
    }
    for (var, meaning) in cli::OTHER_ENV {
        roff.control("TP", []);
        roff.text([bold(var)]);
        roff.text([roman(meaning)]);
    }
    roff.control("PP", []);
    roff.text([
        roman("redlock gives the command these variables ("),
        bold("--key"),
        roman(" itself is never read from the environment, so that a nested redlock cannot take its parent's lock by accident):"),
    ]);
    for (var, meaning) in cli::COMMAND_ENV {
        roff.control("TP", []);
        roff.text([bold(var)]);
        roff.text([roman(meaning)]);
    }
    roff.control("PP", []);
    roff.text([
        roman("redlock never prints the password in a URL. Give it in "),
        italic("REDLOCK_URL"),
        roman(" (or an environment file) rather than "),
        bold("--url"),
        roman(" to keep it out of process listings. The command gets no credentials: "),
        italic("REDLOCK_PASSWORD"),
        roman(" is removed from its environment, and its "),
        italic("REDLOCK_URL"),
        roman(" keeps the servers and any user name but not the password."),
    ]);
}

/// Renders one piece of clap_mangen's output and appends it.
fn render(page: &mut Vec<u8>, piece: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
    piece(page).expect("writing to a Vec cannot fail");
}

/// A piece of roff without the preamble every render repeats (already in the title piece) and,
/// when `drop_heading`, without its `.SH` line, to nest it under a heading of ours.
fn body(piece: impl FnOnce(&mut dyn Write) -> io::Result<()>, drop_heading: bool) -> Vec<u8> {
    let mut out = Vec::new();
    render(&mut out, piece);
    let text = String::from_utf8(out).expect("roff is UTF-8");
    let mut kept = String::new();
    let mut heading_dropped = !drop_heading;
    for line in text.lines() {
        if line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq") {
            continue;
        }
        if !heading_dropped && line.starts_with(".SH ") {
            heading_dropped = true;
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    kept.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn committed_files_match() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let files = generated_files();
        let stale: Vec<&str> = files
            .iter()
            .filter(|(path, bytes)| std::fs::read(root.join(path)).ok().as_ref() != Some(bytes))
            .map(|(path, _)| path.as_str())
            .collect();
        assert!(
            stale.is_empty(),
            "{} out of date with the CLI definitions; run {REGENERATE} and commit the result",
            stale.join(", ")
        );
        let listed: Vec<String> = std::fs::read_dir(root.join("completions"))
            .unwrap()
            .map(|entry| {
                format!(
                    "completions/{}",
                    entry.unwrap().file_name().to_string_lossy()
                )
            })
            .filter(|path| !files.iter().any(|(generated, _)| generated == path))
            .collect();
        assert!(
            listed.is_empty(),
            "{listed:?} are no longer generated; delete them and run {REGENERATE}"
        );
    }

    #[test]
    fn the_man_page_lists_every_exit_status_of_every_subcommand() {
        let page = String::from_utf8(man_page()).unwrap();
        let section = &page[page.find(".SH \"EXIT STATUS\"").unwrap()..];
        let section = &section[..section.find(".SH ENVIRONMENT").unwrap()];
        for (name, rows) in exit::TABLES {
            let heading = format!(".SS \"redlock {name}\"\n");
            let start = section.find(&heading).expect(&heading) + heading.len();
            let table = &section[start..];
            let table = &table[..table.find(".SS ").unwrap_or(table.len())];
            let shown: Vec<&str> = table.lines().filter(|l| !l.starts_with(".TP")).collect();
            let wanted: Vec<String> = rows
                .iter()
                .flat_map(|row| {
                    [
                        format!("\\fB{}\\fR", row.status.replace('-', "\\-")),
                        row.meaning.replace('-', "\\-").replace('\'', "\\*(Aq"),
                    ]
                })
                .collect();
            assert_eq!(shown, wanted, "redlock {name}");
        }
    }

    #[test]
    fn man_page_has_the_sections_and_every_variable() {
        let page = String::from_utf8(man_page()).unwrap();
        for heading in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH COMMANDS",
            ".SS \"redlock run\"",
            ".SH SIGNALS",
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH EXAMPLES",
        ] {
            assert!(page.contains(heading), "{heading} missing");
        }
        for var in ["REDLOCK_URL", "REDLOCK_TTL", "REDLOCK_KEY", "SSL_CERT_FILE"] {
            assert!(page.contains(&format!("\\fB{var}\\fR")), "{var} missing");
        }
        assert_eq!(page.matches(".TH ").count(), 1);
        assert!(
            !page.contains("\\fB\\-h\\fR, \\fB\\-\\-help\\fR"),
            "per-command -h listed"
        );
    }

    #[test]
    fn every_shell_has_its_own_file() {
        let mut paths: Vec<String> = SHELLS.iter().map(|s| completions_path(*s)).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), SHELLS.len());
        for shell in SHELLS {
            let script = String::from_utf8(completions(shell)).unwrap();
            assert!(script.contains("completions"), "{shell}: no subcommands");
        }
    }
}
