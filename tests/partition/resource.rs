//! The resource every holder writes to, and the check made at it. The resource is one file on
//! the filesystem every namespace shares; each holder's command appends a line per action:
//! `HOST TOKEN NS KIND`, with its hostname, its fencing token (`REDLOCK_FENCING_TOKEN`), the
//! CLOCK_REALTIME in nanoseconds (`date +%s%N`, one clock for every process on the machine) and
//! `start`, `tick` (every ~50 ms while it runs) or `end`. An append of one short line is one
//! write(2) with O_APPEND: the file's order is the order the resource saw the writes in.
//!
//! The check, over the file: a holder's lines are contiguous (none after the next holder's
//! first), its last stamp is before the next holder's first, and tokens rise from holder to
//! holder.

use std::fmt;
use std::path::Path;

use crate::common::shell_quote;

/// What a holder's command does at the resource: `start`, a `tick` every ~50 ms until `done`
/// exists, then `end`. Killed, it simply writes no more.
pub fn stamp_script(resource: &Path, done: &Path) -> String {
    format!(
        "f={f}; h=$(hostname); t=$REDLOCK_FENCING_TOKEN; \
         st() {{ echo \"$h $t $(date +%s%N) $1\" >> \"$f\"; }}; \
         st start; while [ ! -e {done} ]; do st tick; sleep 0.05; done; st end",
        f = shell_quote(resource),
        done = shell_quote(done),
    )
}

/// One line of the resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub host: String,
    pub token: u64,
    pub ns: i128,
    pub kind: String,
}

/// One holder as the resource saw it: its first and last stamps, and how many lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub token: u64,
    pub first: i128,
    pub last: i128,
    pub lines: usize,
    /// It wrote `end`: its command ran to its end.
    pub ended: bool,
}

/// What the check found wrong: the resource's evidence, in words and numbers.
#[derive(Debug)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses the resource's lines; panics on a line no holder could have written.
#[track_caller]
pub fn parse(text: &str) -> Vec<Stamp> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let bad = || panic!("a resource line no holder writes: {line:?}");
            let f: Vec<&str> = line.split_whitespace().collect();
            let [host, token, ns, kind] = f[..] else {
                bad()
            };
            Stamp {
                host: host.to_owned(),
                token: token.parse().unwrap_or_else(|_| bad()),
                ns: ns.parse().unwrap_or_else(|_| bad()),
                kind: kind.to_owned(),
            }
        })
        .collect()
}

/// The holders in the order they first wrote, after checking that none wrote between another
/// holder's lines, that each one's last stamp is before the next one's first, and that tokens
/// rise.
pub fn check(stamps: &[Stamp]) -> Result<Vec<Holder>, Violation> {
    let mut holders: Vec<Holder> = Vec::new();
    for (line, s) in stamps.iter().enumerate() {
        let same = |h: &Holder| h.host == s.host && h.token == s.token;
        match holders.iter().position(same) {
            Some(i) if i + 1 == holders.len() => {
                let h = &mut holders[i];
                h.last = h.last.max(s.ns);
                h.lines += 1;
                h.ended |= s.kind == "end";
            }
            Some(i) => {
                let next = &holders[i + 1];
                return Err(Violation(format!(
                    "{} (token {}) wrote {:?} at line {} of the resource, after {} (token {}) \
                     had begun: two holders at once",
                    s.host,
                    s.token,
                    s.kind,
                    line + 1,
                    next.host,
                    next.token
                )));
            }
            None => {
                if s.kind != "start" {
                    return Err(Violation(format!(
                        "{} (token {}) began with {:?}, not start, at line {}",
                        s.host,
                        s.token,
                        s.kind,
                        line + 1
                    )));
                }
                holders.push(Holder {
                    host: s.host.clone(),
                    token: s.token,
                    first: s.ns,
                    last: s.ns,
                    lines: 1,
                    ended: false,
                });
            }
        }
    }
    for pair in holders.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        if old.last >= new.first {
            return Err(Violation(format!(
                "{} (token {}) stamped its last write {} ms after {} (token {}) stamped its \
                 first: two holders at once",
                old.host,
                old.token,
                ms(old.last - new.first),
                new.host,
                new.token
            )));
        }
        if new.token <= old.token {
            return Err(Violation(format!(
                "{} took token {} after {} had {}: tokens must rise",
                new.host, new.token, old.host, old.token
            )));
        }
    }
    Ok(holders)
}

/// Nanoseconds as milliseconds with one decimal.
pub fn ms(ns: i128) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(host: &str, token: u64, ms: i128, kind: &str) -> String {
        format!("{host} {token} {} {kind}\n", ms * 1_000_000)
    }

    /// Two holders one after the other, tokens rising: the history the suite expects.
    fn good() -> String {
        [
            line("c0", 7, 0, "start"),
            line("c0", 7, 50, "tick"),
            line("c0", 7, 100, "tick"),
            line("c1", 9, 3000, "start"),
            line("c1", 9, 3050, "tick"),
            line("c1", 9, 3100, "end"),
        ]
        .concat()
    }

    #[test]
    fn one_holder_after_another_passes() {
        let holders = check(&parse(&good())).unwrap();
        assert_eq!(holders.len(), 2);
        assert_eq!(
            (holders[0].token, holders[0].lines, holders[0].ended),
            (7, 3, false)
        );
        assert_eq!((holders[1].first, holders[1].ended), (3_000_000_000, true));
    }

    /// The old holder writes once more after the new one began: refused by the file's order,
    /// whatever its stamp says.
    #[test]
    fn a_write_after_the_next_holder_began_fails() {
        let text = good() + &line("c0", 7, 120, "tick");
        let err = check(&parse(&text)).unwrap_err();
        assert!(err.0.contains("two holders at once"), "{err}");
        assert!(err.0.contains("line 7"), "{err}");
    }

    /// Lines in order, but the old holder's last stamp after the new one's first: the two
    /// commands ran at once, and only the stamps show it.
    #[test]
    fn overlapping_stamps_fail() {
        let text = [
            line("c0", 7, 0, "start"),
            line("c0", 7, 3010, "tick"),
            line("c1", 9, 3000, "start"),
        ]
        .concat();
        let err = check(&parse(&text)).unwrap_err();
        assert!(err.0.contains("10.0 ms after c1"), "{err}");
    }

    #[test]
    fn a_token_that_does_not_rise_fails() {
        let text = [line("c0", 9, 0, "start"), line("c1", 9, 100, "start")].concat();
        let err = check(&parse(&text)).unwrap_err();
        assert!(err.0.contains("tokens must rise"), "{err}");
        let text = [line("c0", 9, 0, "start"), line("c1", 8, 100, "start")].concat();
        assert!(check(&parse(&text)).is_err());
    }

    #[test]
    fn a_holder_that_did_not_start_fails() {
        let text = line("c0", 7, 0, "tick");
        assert!(check(&parse(&text)).unwrap_err().0.contains("not start"));
    }

    /// The script writes what the parser reads, a `start`, ticks and an `end`.
    #[test]
    fn the_stamp_script_writes_what_the_check_reads() {
        let dir = crate::common::TempDir::new();
        let (resource, done) = (dir.join("resource"), dir.join("done"));
        std::fs::write(&done, "").unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &stamp_script(&resource, &done)])
            .env("REDLOCK_FENCING_TOKEN", "42")
            .output()
            .unwrap();
        assert!(out.status.success());
        let holders = check(&parse(&crate::common::read(&resource))).unwrap();
        assert_eq!(holders.len(), 1);
        assert_eq!((holders[0].token, holders[0].lines), (42, 2));
        assert!(holders[0].ended);
    }
}
