//! redlock: run a command under a Redis lock so only one copy runs at a time, anywhere.

pub mod child;
pub mod cli;
pub mod error;
pub mod exit;
pub mod lease;
pub mod lock;
pub mod run;
pub mod say;
pub mod signals;

use std::ffi::OsString;

use clap::Parser;
use clap::error::ErrorKind;

/// The whole program: parse, run, map the outcome to an exit status. Never panics on bad input.
pub fn main() -> i32 {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    match &cli.command {
        cli::Command::Run(args) => match run::run(args) {
            Ok(code) => code,
            Err(err) => {
                say::error(format!("{err:#}"));
                error::exit_code(&err)
            }
        },
    }
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
            say::error(format!("{culprit} (see 'redlock run --help')"));
            exit::USAGE
        }
        _ => {
            say::error(one_line(&err.render().to_string()));
            exit::USAGE
        }
    }
}

/// Fold clap's multi-line message into one line, without the usage and tip paragraphs.
fn one_line(rendered: &str) -> String {
    let mut parts = Vec::new();
    for line in rendered.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() && !line.starts_with("tip:") {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mut text = parts.join(" ");
    text.push_str(" (see 'redlock run --help')");
    text
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
        let err = cli::Cli::try_parse_from(["redlock", "run", "--", "true"]).unwrap_err();
        let line = one_line(&err.render().to_string());
        assert!(!line.contains('\n'));
        assert!(line.contains("--key"), "{line}");
        let err = cli::Cli::try_parse_from([
            "redlock", "run", "--key", "k", "--ttl", "abc", "--", "true",
        ])
        .unwrap_err();
        let line = one_line(&err.render().to_string());
        assert!(
            line.contains("--ttl") && line.contains("'abc' is not a duration"),
            "{line}"
        );
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
