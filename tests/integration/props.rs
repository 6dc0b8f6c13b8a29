//! Property tests (proptest) for parsing: durations, signals, URLs and whole command lines never
//! panic, stay within their bounds, round-trip where meaningful, and never show a password.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::Duration;

use nix::sys::signal::Signal;
use proptest::prelude::*;
use redlock::cli::{parse_duration, parse_signal, parse_stop_signal, parse_ttl, parse_wait};
use redlock::lease::{MAX_DURATION, MIN_TTL, Wait};
use redlock::transport::endpoint::{Endpoint, redact};

use crate::common::*;

const MAX_MS: u64 = 365 * 24 * 3600 * 1000;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn any_text_as_a_duration_is_parsed_or_refused_without_panicking(text in any::<String>()) {
        match parse_duration(&text) {
            Ok(d) => prop_assert!(d <= MAX_DURATION),
            Err(e) => prop_assert!(!e.is_empty()),
        }
        if let Ok(ttl) = parse_ttl(&text) {
            prop_assert!(ttl >= MIN_TTL && ttl <= MAX_DURATION);
        }
        let _ = parse_wait(&text);
        let _ = parse_signal(&text);
        let _ = parse_stop_signal(&text);
    }

    #[test]
    fn duration_like_text_never_panics(text in "[ +-]?[0-9]{0,30}(\\.[0-9]{0,5})?[ ]?(ns|us|ms|s|m|h|d|w|y|x|e)?") {
        if let Ok(d) = parse_duration(&text) {
            prop_assert!(d <= MAX_DURATION);
        }
    }

    #[test]
    fn milliseconds_and_seconds_round_trip(ms in 0..=MAX_MS) {
        prop_assert_eq!(parse_duration(&format!("{ms}ms")), Ok(Duration::from_millis(ms)));
        prop_assert_eq!(parse_duration(&(ms / 1000).to_string()), Ok(Duration::from_secs(ms / 1000)));
        // humantime's own rendering ("1h 2m 3s 4ms") parses back to the same duration.
        let d = Duration::from_millis(ms);
        let shown = humantime::format_duration(d).to_string();
        prop_assert_eq!(parse_duration(&shown), Ok(d), "{}", shown);
    }

    #[test]
    fn durations_past_a_year_are_refused(secs in MAX_DURATION.as_secs() + 1..=u64::MAX) {
        let with_unit = format!("{secs}s");
        prop_assert!(parse_duration(&secs.to_string()).is_err());
        prop_assert!(parse_duration(&with_unit).is_err());
    }

    #[test]
    fn forever_in_any_case(text in "[fF][oO][rR][eE][vV][eE][rR]") {
        prop_assert_eq!(parse_wait(&text), Ok(Wait::Forever));
    }

    #[test]
    fn signal_numbers_are_accepted_exactly_when_they_exist(n in any::<i32>()) {
        prop_assert_eq!(parse_signal(&n.to_string()).is_ok(), Signal::try_from(n).is_ok());
    }

    #[test]
    fn any_text_as_a_url_never_panics_nor_shows_a_password(
        text in any::<String>(),
        pw in "[A-Za-z0-9]{12,20}",
    ) {
        if let Ok(e) = Endpoint::parse(&text) {
            prop_assert!(!e.to_string().is_empty());
        }
        let url = format!("redis://user:{pw}@{text}");
        match Endpoint::parse(&url) {
            Ok(e) => prop_assert!(!e.to_string().contains(&pw)),
            Err(msg) => prop_assert!(!msg.contains(&pw), "{}", msg),
        }
    }

    #[test]
    fn tcp_urls_round_trip_to_host_and_port(
        port in any::<u16>(),
        db in 0u32..16,
        pw in "[A-Za-z0-9]{12,20}",
    ) {
        let url = format!("redis://alice:{pw}@127.0.0.1:{port}/{db}");
        let e = Endpoint::parse(&url).map_err(TestCaseError::fail)?;
        prop_assert_eq!(e.to_string(), format!("127.0.0.1:{port}"));
        prop_assert!(!redact(&url).contains(&pw));
        let too_big = format!("redis://alice:{pw}@127.0.0.1:{}", u32::from(port) + 65536);
        let err = Endpoint::parse(&too_big).err().unwrap_or_default();
        prop_assert!(!err.is_empty() && !err.contains(&pw), "{}", err);
    }

    #[test]
    fn passwords_in_query_strings_are_redacted(pw in "[A-Za-z0-9]{12,20}", path in "(/[a-z]{1,8}){1,3}") {
        for url in [
            format!("redis+unix://{path}.sock?pass={pw}"),
            format!("redis+unix://{path}.sock?db=2&password={pw}"),
            format!("unix://{path}.sock?pass={pw}"),
        ] {
            prop_assert!(!redact(&url).contains(&pw), "{}", url);
            if let Err(msg) = Endpoint::parse(&url) {
                prop_assert!(!msg.contains(&pw), "{}", msg);
            }
        }
    }
}

/// A value for a flag: free text, duration-like text, a URL-like string, or bytes not UTF-8.
fn value() -> impl Strategy<Value = OsString> {
    prop_oneof![
        any::<String>()
            .prop_filter("not a flag", |s| !s.starts_with('-'))
            .prop_map(OsString::from),
        "-?[0-9]{0,22}(ms|s|h|d|x)?".prop_map(OsString::from),
        "(redis|rediss|unix|redis\\+unix|valkey|http)://(127\\.0\\.0\\.1:1[0-9]{0,6}|/nonexistent/[a-z]{1,5})(/[0-9a-z]{0,3})?"
            .prop_map(OsString::from),
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(OsString::from_vec),
    ]
    // An argument cannot hold a NUL byte: exec takes C strings.
    .prop_filter("no NUL", |v| !v.as_bytes().contains(&0))
}

/// A few flags, each with a value (or none for -v / -q).
fn command_line() -> impl Strategy<Value = Vec<OsString>> {
    let flag = prop_oneof![
        Just("--key"),
        Just("--url"),
        Just("--ttl"),
        Just("--wait"),
        Just("--kill-after"),
        Just("--max-runtime"),
        Just("--stop-signal"),
        Just("--conflict-exit-code"),
        Just("--prefix"),
        Just("-v"),
        Just("-q"),
    ];
    proptest::collection::vec((flag, value()), 0..6)
        // A --wait that parses retries the unreachable Redis for that long (3514 is 58 min):
        // a run, not a command line to refuse. Only its last value counts.
        .prop_filter("no --wait that waits", |pairs| {
            pairs
                .iter()
                .rev()
                .find(|(flag, _)| *flag == "--wait")
                .is_none_or(|(_, value)| {
                    !value
                        .to_str()
                        .and_then(|text| parse_wait(text).ok())
                        .is_some_and(|wait| wait != Wait::Up(Duration::ZERO))
                })
        })
        .prop_map(|pairs| {
            let mut args = Vec::new();
            for (flag, value) in pairs {
                args.push(OsString::from(flag));
                if flag.starts_with("--") {
                    args.push(value);
                }
            }
            args
        })
}

proptest! {
    #![proptest_config(config(64))]

    /// The real binary on random command lines: a usage error (64) or, when everything parsed,
    /// an unreachable Redis (69); always one `redlock: ` line, never a panic.
    #[test]
    fn random_command_lines_get_one_line_and_64_or_69(args in command_line()) {
        let dir = TempDir::new();
                // Nothing listens on port 1: a command line that parses ends at the connection.
        let out = Redlock::sub("run")
            .env("REDLOCK_URL", "redis://127.0.0.1:1")
            .args(&args)
            .sh(&marker_script(&dir))
            .any_status()
            .any_stderr()
            .output();
        let lines: Vec<&str> = out.stderr.lines().collect();
        prop_assert!(matches!(out.status.code(), Some(64 | 69)), "exit {:?}: {}", out.status, out.stderr);
        prop_assert!(lines.len() == 1 && lines[0].starts_with("redlock: "), "stderr {:?}", out.stderr);
        prop_assert!(!dir.join("marker").exists(), "ran the command");
    }
}
