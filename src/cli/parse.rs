//! Value parsers for the command line: durations, signals, lock names and prefixes. Each takes
//! the text as given and returns the value or a message clap puts after the flag's name.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::cli::{MAX_KEY_LEN, MAX_PREFIX_LEN};
use crate::lease::{MAX_DURATION, MIN_TTL, Wait};

/// A humantime duration ("30s", "1500ms", "2m") no longer than a year.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (examples: 30s, 1500ms, 2m)".into());
    }
    if text.starts_with('-') {
        return Err(format!("'{text}' is negative; a duration is 0 or more"));
    }
    // humantime takes "1h 30m", but also "1 0s" (and "1\n0s") as 10 s: inside a duration,
    // a space may only follow a unit.
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() > 1
        && words
            .iter()
            .any(|word| !word.ends_with(|c: char| c.is_ascii_alphabetic()))
    {
        return Err(format!(
            "'{}' is not a duration (a space may only follow a unit; examples: 30s, 1500ms, 1h 30m)",
            printable(text)
        ));
    }
    let number = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let duration = if number(text) {
        // A bare number is seconds, except that it must not overflow.
        text.parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("'{text}' is too large"))?
    } else if let Some((whole, fraction)) = text.split_once('.')
        && number(whole)
        && number(fraction)
    {
        // Seconds with a fraction, as `sleep 1.5` takes them.
        text.parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| format!("'{text}' is too large"))?
    } else {
        humantime::parse_duration(text)
            .map_err(|e| format!("'{text}' is not a duration ({e}; examples: 30s, 1500ms, 2m)"))?
    };
    if duration > MAX_DURATION {
        return Err(format!("'{text}' is longer than the maximum of 365 days"));
    }
    Ok(duration)
}

/// `text` with its control characters escaped (`\n`, `\u{1b}`), for a one-line message.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A duration greater than zero (a negative one is told so too, not that 0 would do).
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    if text.trim().starts_with('-') {
        return Err(format!(
            "'{}' is negative; it must be greater than zero",
            printable(text.trim())
        ));
    }
    match parse_duration(text)? {
        Duration::ZERO => Err("must be greater than zero".into()),
        d => Ok(d),
    }
}

/// The lease length: at least [`MIN_TTL`].
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = parse_positive(text)?;
    if ttl < MIN_TTL {
        return Err(format!("'{text}' is shorter than the minimum of 100ms"));
    }
    Ok(ttl)
}

/// `forever`, or a duration (0 = try once).
pub fn parse_wait(text: &str) -> Result<Wait, String> {
    if text.trim().eq_ignore_ascii_case("forever") {
        Ok(Wait::Forever)
    } else {
        parse_duration(text).map(Wait::Up)
    }
}

/// A signal by name (`TERM`, `SIGTERM`, any case) or number, that ends a process by default.
pub fn parse_stop_signal(text: &str) -> Result<Signal, String> {
    let signal = parse_signal(text)?;
    use Signal::*;
    if matches!(
        signal,
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU | SIGCONT | SIGCHLD | SIGWINCH | SIGURG
    ) {
        return Err(format!(
            "{} does not end a process; use TERM, INT, HUP, QUIT or KILL",
            signal.as_str()
        ));
    }
    Ok(signal)
}

/// A signal by name (`TERM`, `SIGTERM`, any case) or number.
pub fn parse_signal(text: &str) -> Result<Signal, String> {
    let trimmed = text.trim();
    let parsed = if let Ok(number) = trimmed.parse::<i32>() {
        Signal::try_from(number).ok()
    } else {
        let upper = trimmed.to_ascii_uppercase();
        let name = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        name.parse::<Signal>().ok()
    };
    parsed.ok_or_else(|| format!("'{text}' is not a signal (examples: TERM, SIGINT, 15)"))
}

pub fn parse_key(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("the lock name must not be empty".into());
    }
    if text.len() > MAX_KEY_LEN {
        return Err(format!(
            "the lock name is {} bytes long; the maximum is {MAX_KEY_LEN}",
            text.len()
        ));
    }
    if text.starts_with('}') {
        // PREFIX{}...} would have an empty hash tag, and the lock's keys could land in different slots.
        return Err("the lock name must not start with '}'".into());
    }
    Ok(text.to_owned())
}

pub fn parse_prefix(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err(
            "the prefix must not be empty: it would move every lock away from clients using the default 'redlock:'"
                .into(),
        );
    }
    if text.contains(['{', '}']) {
        // The hash tag is the lock name in braces; a brace in the prefix would change it.
        return Err("the prefix must not contain '{' or '}'".into());
    }
    if text.len() > MAX_PREFIX_LEN {
        return Err(format!(
            "the prefix is {} bytes long; the maximum is {MAX_PREFIX_LEN}",
            text.len()
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        // Seconds with a fraction, as sleep(1) takes them.
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("-5s").unwrap_err().contains("negative"));
        assert_eq!(
            parse_positive("-5s").unwrap_err(),
            "'-5s' is negative; it must be greater than zero"
        );
        assert!(parse_ttl("-1s").unwrap_err().contains("greater than zero"));
        assert!(parse_ttl("1.5").is_ok());
        for bad in [
            ".5",
            "1.",
            "1.5.2",
            "31536000.5",
            "",
            " ",
            "abc",
            "-5s",
            "5 parsecs",
            "99999999999h",
            "99999999999999999999999",
            "1.5.2s",
            "1 0s",
            "1\n0s",
            "1\t0s",
            "1 30s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(parse_duration("1h  30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("1\n0s").unwrap_err().starts_with("'1\\n0s'"));
        assert!(parse_duration("366days").is_err());
    }

    #[test]
    fn ttl_bounds() {
        assert!(parse_ttl("0").is_err());
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("99ms").is_err());
        assert_eq!(parse_ttl("100ms"), Ok(MIN_TTL));
        assert_eq!(parse_ttl("365d"), Ok(MAX_DURATION));
    }

    #[test]
    fn wait_values() {
        assert_eq!(parse_wait("forever"), Ok(Wait::Forever));
        assert_eq!(parse_wait("FOREVER"), Ok(Wait::Forever));
        assert_eq!(parse_wait("0"), Ok(Wait::Up(Duration::ZERO)));
        assert_eq!(parse_wait("10s"), Ok(Wait::Up(Duration::from_secs(10))));
        assert!(parse_wait("soon").is_err());
    }

    #[test]
    fn signals() {
        for text in ["TERM", "SIGTERM", "term", "15", " sigterm "] {
            assert_eq!(parse_stop_signal(text), Ok(Signal::SIGTERM), "{text}");
        }
        assert_eq!(parse_stop_signal("KILL"), Ok(Signal::SIGKILL));
        assert_eq!(parse_stop_signal("2"), Ok(Signal::SIGINT));
        for bad in ["", "NOPE", "0", "65", "-1", "SIGSTOP", "CONT", "WINCH"] {
            assert!(
                parse_stop_signal(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn keys_and_prefixes() {
        assert!(parse_key("").is_err());
        assert!(parse_key("}x").is_err());
        assert!(parse_key(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
        assert!(parse_key("backup nightly {a}\nß").is_ok());
        assert!(parse_prefix("a{b").is_err());
        // An empty prefix would silently move every lock away from the default's clients.
        assert!(parse_prefix("").unwrap_err().contains("must not be empty"));
        assert_eq!(parse_prefix("jobs:"), Ok("jobs:".to_owned()));
        assert!(parse_prefix(&"p".repeat(MAX_PREFIX_LEN)).is_ok());
        // Three bytes each: 300.
        assert!(
            parse_prefix(&"\u{6f22}".repeat(100))
                .unwrap_err()
                .contains("300 bytes long; the maximum is 256")
        );
    }
}
