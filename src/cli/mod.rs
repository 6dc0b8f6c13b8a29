//! The command line: clap definitions ([`args`]), `--help` text, the man page and completions
//! ([`docs`]), and the entry point that parses, dispatches and maps errors to exit statuses.
//!
//! May use every layer below: `run`, `admin`, `lease` (its `Wait` and limits), `lock`,
//! `backend` (opened from the URLs, in one place: `conn`), `report`, `error`, `exit` and
//! `file`. Nothing else imports from here.

pub mod args;
mod conn;
pub mod docs;
pub mod monitor;
pub mod parse;
pub mod timeline;

pub use args::*;
pub use parse::*;

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::report;
use crate::report::metrics;
use crate::{admin, error, exit, run};

/// The whole program: parse, run, map the outcome to an exit status. Never panics on bad input.
pub fn main() -> i32 {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(err) => {
            report::set_json(json_wanted(
                std::env::args_os()
                    .skip(1)
                    .map(|a| a.to_string_lossy().into_owned()),
            ));
            return usage_error(&err);
        }
    };
    let output = match &cli.command {
        Command::Run(args) => &args.output,
        Command::Status(args) => &args.output,
        Command::List(args) => &args.output,
        Command::History(args) => &args.output,
        Command::Check(args) => &args.output,
        Command::Release(args) => &args.output,
        Command::Init(args) => &args.output,
        Command::Completions { shell } => return print(&docs::completions(*shell)),
        Command::Man => return print(&docs::man_page()),
    };
    report::set_level(output.verbosity());
    report::set_json(output.log_format == LogFormat::Json);
    let result = match &cli.command {
        Command::Run(args) => return run_with_metrics(args),
        Command::Status(args) => args
            .conn
            .backend(Vec::new())
            .and_then(|backend| admin::status(backend.as_ref(), &args.key, args.json)),
        Command::List(args) => args
            .conn
            .backend(Vec::new())
            .and_then(|backend| admin::list(backend.as_ref(), args.json)),
        Command::History(args) => args
            .conn
            .backend(Vec::new())
            .and_then(|backend| admin::history(backend.as_ref(), &args.key, args.json)),
        Command::Check(args) => return check(args),
        Command::Release(args) => release(args),
        Command::Init(args) => init(args),
        Command::Completions { .. } | Command::Man => unreachable!("handled above"),
    };
    match result {
        Ok(code) => code,
        Err(err) => fail(&err),
    }
}

/// `redlock release`: refused without `--force`, before anything else is looked at.
fn release(args: &ReleaseArgs) -> anyhow::Result<i32> {
    report::set_key(&args.key);
    if !args.force {
        return Err(error::classified(
            error::Class::Usage,
            format!(
                "refusing to release lock '{}' without --force: it breaks the holder's lock \
                 (see: redlock status --key {})",
                args.key,
                report::shell_quote(&args.key)
            ),
        ));
    }
    admin::release(
        args.conn.backend(Vec::new())?.as_ref(),
        &args.key,
        args.token.as_deref(),
        args.json,
    )
}

/// `redlock init`: the tables a PostgreSQL database keeps its locks in, made or printed;
/// refused (64) for a backend that needs none.
fn init(args: &InitArgs) -> anyhow::Result<i32> {
    let backend = args.conn.backend(Vec::new())?;
    let (true, Some(tables)) = (backend.capabilities().init, backend.tables()) else {
        return Err(error::classified(
            error::Class::Usage,
            format!(
                "{} keeps its locks without tables: `redlock init` has nothing to make there",
                backend.described()
            ),
        ));
    };
    if args.print {
        return Ok(print(tables.as_bytes()));
    }
    let done = backend
        .init(admin::TIMEOUT)
        .map_err(|failure| error::classified(error::Class::Unavailable, failure.to_string()))?;
    Ok(print(format!("{done}\n").as_bytes()))
}

/// `redlock check`: whatever goes wrong is UNKNOWN (3), said on stdout as the plugin convention
/// wants, and as a `redlock: ` line on stderr as everywhere else.
fn check(args: &CheckArgs) -> i32 {
    report::set_key(&args.key);
    match args
        .conn
        .backend(Vec::new())
        .and_then(|backend| admin::check(backend.as_ref(), &args.key, args.max_age, args.json))
    {
        Ok(code) => code,
        Err(err) => {
            let message = format!("{err:#}");
            admin::unknown(Some(&args.key), Some(args.max_age), &message, args.json);
            report::error(message);
            exit::check::UNKNOWN
        }
    }
}

/// Parse the command line, noting where the URLs came from.
fn parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let matches = command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    let conn = match &mut cli.command {
        Command::Run(args) => &mut args.conn,
        Command::Status(args) => &mut args.conn,
        Command::List(args) => &mut args.conn,
        Command::History(args) => &mut args.conn,
        Command::Check(args) => &mut args.conn,
        Command::Release(args) => &mut args.conn,
        Command::Init(args) => &mut args.conn,
        Command::Completions { .. } | Command::Man => return Ok(cli),
    };
    if let Some((_, sub)) = matches.subcommand() {
        conn.url_from_env = sub.value_source("url") == Some(clap::parser::ValueSource::EnvVariable);
    }
    Ok(cli)
}

/// Writes generated text to stdout: exit 0, or the failure's status.
fn print(bytes: &[u8]) -> i32 {
    match report::stdout(bytes) {
        Ok(()) => 0,
        Err(err) => fail(&err),
    }
}

/// Prints `err` once as a `redlock: ` line and picks its exit status.
fn fail(err: &anyhow::Error) -> i32 {
    report::error(format!("{err:#}"));
    error::exit_code(err)
}

/// `redlock run`, then the metrics file (if asked for) on every path that gets this far.
fn run_with_metrics(args: &RunArgs) -> i32 {
    report::set_key(&args.key);
    let mut stats = metrics::Stats::default();
    let outcome = match args
        .options()
        .and_then(|options| run::run(&options, &mut stats))
    {
        Ok(outcome) => outcome,
        Err(err) => {
            report::error(format!("{err:#}"));
            error::outcome(&err)
        }
    };
    let code = outcome.status(args.conflict_exit_code);
    if let Some(path) = &args.metrics_file {
        let written = match metrics::check_path(path) {
            // Refused at start: said then, as the usage error.
            Err(_) if outcome == exit::Outcome::Usage => Ok(()),
            // Changed during the run (a FIFO put there, say): not opened at all.
            Err(why) => Err(format!("{why}; the metrics were not written")),
            Ok(()) => metrics::write(path, &args.key, code, outcome, &stats)
                .map_err(|err| format!("cannot write --metrics-file {}: {err}", path.display())),
        };
        if let Err(why) = written {
            report!(0, "warning: {why}");
        }
    }
    run::die_like(outcome);
    code
}

/// Whether errors should come out as JSON although the command line did not parse: the last
/// `--log-format` before `--` says so, else REDLOCK_LOG_FORMAT.
fn json_wanted(args: impl Iterator<Item = String>) -> bool {
    let mut format = std::env::var("REDLOCK_LOG_FORMAT").ok();
    let mut args = args.take_while(|a| a != "--");
    while let Some(arg) = args.next() {
        if arg == "--log-format" {
            format = args.next();
        } else if let Some(value) = arg.strip_prefix("--log-format=") {
            format = Some(value.to_owned());
        }
    }
    format.is_some_and(|f| f.eq_ignore_ascii_case("json"))
}

/// Print a clap error as one `redlock: ` line (help and version as they are) and pick the status.
fn usage_error(err: &clap::Error) -> i32 {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            exit::USAGE
        }
        ErrorKind::InvalidUtf8 => {
            // clap does not say which one; a flag's name is more help than "one or more".
            let culprit = non_utf8_culprit(std::env::args_os(), std::env::vars_os());
            bad_usage(format!("{culprit} (see 'redlock run --help')"))
        }
        _ => {
            let argv: Vec<OsString> = std::env::args_os().collect();
            let mut rendered = err.render().to_string();
            // A value of 10 KB, or one with a newline in it, is not echoed as it is into a
            // one-line error.
            for kind in [ContextKind::InvalidValue, ContextKind::InvalidArg] {
                if let Some(ContextValue::String(value)) = err.get(kind) {
                    rendered = rendered.replace(value.as_str(), &shown_value(value));
                }
            }
            if let Some(key) = key_on_the_line(&argv) {
                report::set_key(&key);
            }
            let mut line = one_line(&rendered, &argv);
            if let Some((shown, variable)) = from_variable(err, &argv) {
                line = line.replacen(
                    &format!("for '{shown}'"),
                    &format!("in {variable} (which sets {})", flag_of(&shown)),
                    1,
                );
            }
            bad_usage(line)
        }
    }
}

/// Say a usage error, and pick its status: 64, or for `check` UNKNOWN (3), the line on stdout
/// too, as the plugin convention wants.
fn bad_usage(line: String) -> i32 {
    let checking = std::env::args_os().nth(1).is_some_and(|a| a == "check");
    if checking {
        admin::unknown(None, None, &line, false);
    }
    report::error(line);
    if checking {
        exit::check::UNKNOWN
    } else {
        exit::USAGE
    }
}

/// The longest value a usage error repeats whole.
const SHOWN_VALUE: usize = 64;

/// `value` as a usage error shows it: control characters escaped (`\n`), and cut to its first
/// [`SHOWN_VALUE`] characters and its length when it is longer.
fn shown_value(value: &str) -> String {
    let escaped = parse::printable(value);
    match escaped.char_indices().nth(SHOWN_VALUE) {
        Some((cut, _)) => format!("{}... ({} bytes)", &escaped[..cut], value.len()),
        None => escaped,
    }
}

/// For a bad value that came from an environment variable rather than the command line: the
/// argument as clap shows it (`--ttl <DURATION>`) and the variable's name.
fn from_variable(err: &clap::Error, argv: &[OsString]) -> Option<(String, String)> {
    if !matches!(
        err.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(shown)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = flag_of(shown);
    let on_the_line = argv
        .iter()
        .skip(1)
        .take_while(|arg| *arg != "--")
        .filter_map(|arg| arg.to_str())
        .any(|arg| arg == flag || arg.starts_with(&format!("{flag}=")));
    if on_the_line {
        return None;
    }
    let long = flag.strip_prefix("--")?;
    let root = command();
    let variable = root
        .get_subcommands()
        .flat_map(|sub| sub.get_arguments())
        .find(|arg| arg.get_long() == Some(long))?
        .get_env()?
        .to_str()?
        .to_owned();
    std::env::var_os(&variable).map(|_| (shown.clone(), variable))
}

/// The lock's name as the command line gives it (`--key NAME`, `--key=NAME`, before any `--`),
/// if it is a valid one: a usage error elsewhere on the line still names its lock in the JSON
/// log, as every later event does.
fn key_on_the_line(argv: &[OsString]) -> Option<String> {
    let args: Vec<&str> = argv
        .iter()
        .skip(1)
        .take_while(|arg| *arg != "--")
        .map(|arg| arg.to_str())
        .collect::<Option<_>>()?;
    let given = args.iter().enumerate().find_map(|(i, arg)| match *arg {
        "--key" => args.get(i + 1).copied(),
        _ => arg.strip_prefix("--key="),
    })?;
    parse::parse_key(given).ok()
}

/// The flag of an argument as clap shows it: `--ttl` of `--ttl <DURATION>`.
fn flag_of(shown: &str) -> &str {
    shown.split_whitespace().next().unwrap_or(shown)
}

/// Fold clap's multi-line message into one line, without the usage paragraph (a tip stays, after
/// a semicolon), and point at the help of the subcommand named by `argv` (or of redlock itself).
fn one_line(rendered: &str, argv: &[OsString]) -> String {
    let mut parts = Vec::new();
    for line in rendered.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if let Some(tip) = line.strip_prefix("tip:") {
            parts.push(format!(";{tip}"));
        } else if !line.is_empty() {
            parts.push(format!(" {}", line.strip_prefix("error: ").unwrap_or(line)));
        }
    }
    let subcommand = argv.get(1).and_then(|arg| arg.to_str()).filter(|name| {
        command()
            .get_subcommands()
            .any(|sub| sub.get_name() == *name)
    });
    let command = match subcommand {
        Some(name) => format!("redlock {name}"),
        None => "redlock".to_owned(),
    };
    format!("{} (see '{command} --help')", parts.concat().trim_start())
}

/// Which argument (before `--`) or `REDLOCK_*` variable is not UTF-8, for clap's InvalidUtf8.
fn non_utf8_culprit(
    args: impl IntoIterator<Item = OsString>,
    env: impl IntoIterator<Item = (OsString, OsString)>,
) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut previous = String::new();
    for arg in args.into_iter().skip(1) {
        if arg == "--" {
            break;
        }
        let Some(text) = arg.to_str() else {
            let bytes = arg.as_bytes();
            let flag = match bytes.iter().position(|&b| b == b'=') {
                Some(eq) if bytes.starts_with(b"--") => {
                    String::from_utf8_lossy(&bytes[..eq]).into_owned()
                }
                _ => previous,
            };
            return if flag.starts_with('-') {
                format!("the value of {flag} is not valid UTF-8")
            } else {
                format!(
                    "argument '{}' is not valid UTF-8",
                    String::from_utf8_lossy(bytes)
                )
            };
        };
        previous = text.to_owned();
    }
    for (name, value) in env {
        if let Some(name) = name.to_str()
            && name.starts_with("REDLOCK_")
            && value.to_str().is_none()
        {
            return format!("{name} is not valid UTF-8");
        }
    }
    "an argument is not valid UTF-8".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let parse = |argv: &[&str]| {
            let err = command().try_get_matches_from(argv).unwrap_err();
            let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
            one_line(&err.render().to_string(), &argv)
        };
        let line = parse(&["redlock", "run", "--", "true"]);
        assert!(!line.contains('\n'));
        assert!(line.contains("--key"), "{line}");
        assert!(line.ends_with("(see 'redlock run --help')"), "{line}");
        let line = parse(&["redlock", "run", "--key", "k", "--ttl", "abc", "--", "true"]);
        assert!(
            line.contains("--ttl") && line.contains("'abc' is not a duration"),
            "{line}"
        );
        let line = parse(&["redlock", "completions", "nosh"]);
        assert!(
            line.contains("'nosh'") && line.ends_with("(see 'redlock completions --help')"),
            "{line}"
        );
        let line = parse(&["redlock", "--bogus"]);
        assert!(line.ends_with("(see 'redlock --help')"), "{line}");
    }

    #[test]
    fn names_the_argument_that_is_not_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let bad = || OsString::from_vec(vec![b'k', 0xff]);
        let args = |a: Vec<OsString>| {
            let mut v = vec![OsString::from("redlock"), OsString::from("run")];
            v.extend(a);
            v
        };
        let none = Vec::<(OsString, OsString)>::new;
        assert_eq!(
            non_utf8_culprit(args(vec!["--key".into(), bad()]), none()),
            "the value of --key is not valid UTF-8"
        );
        let mut eq = b"--ttl=".to_vec();
        eq.push(0xfe);
        assert_eq!(
            non_utf8_culprit(args(vec![OsString::from_vec(eq)]), none()),
            "the value of --ttl is not valid UTF-8"
        );
        assert_eq!(
            non_utf8_culprit(args(vec![bad()]), none()),
            "argument 'k\u{fffd}' is not valid UTF-8"
        );
        let env = vec![("REDLOCK_TTL".into(), bad())];
        assert_eq!(
            non_utf8_culprit(args(vec!["--".into(), bad()]), env),
            "REDLOCK_TTL is not valid UTF-8"
        );
    }
}
