//! Nothing above the boundary names a backend: a test that reads the source of the layers above
//! `lock`'s traits, and `lock` itself, and fails naming each file:line that does.
//!
//! The rule, as simple as it can be kept honest:
//! - In `src/run`, `src/lease`, `src/admin` and `src/lock`, no word of [`NAMES`] anywhere: code,
//!   types, comments, messages and tests alike. What only one backend explains belongs in that
//!   backend's folder.
//! - In `src/cli`, the words may appear only where a user reads them: inside string literals
//!   (the messages, the man page) and in `///` doc comments, which clap turns into `--help`. A
//!   `///` on a function is let through by this rule too; nothing else is (`//` and `//!`
//!   comments, names of types, functions and modules).
//!
//! A word is a run of letters and digits, split again where camel case changes (`SingleRedis`
//! is `Single` and `Redis`), so that `evaluate` is not `lua` and `pgid` is not `pg`.
//!
//! It lives here, below the boundary, because it must spell the words it looks for.

use std::path::{Path, PathBuf};

/// Words that name a backend, its servers' parts or its language, compared without case.
const NAMES: &[&str] = &[
    "redis",
    "valkey",
    "sentinel",
    "sentinels",
    "etcd",
    "postgres",
    "postgresql",
    "pg",
    "libpq",
    "blpop",
    "waitaof",
    "lua",
    "sql",
    "plpgsql",
    "zookeeper",
    "zk",
    "zxid",
    "czxid",
];

/// Words that name a backend's part only as written so: a Redis Cluster, Redis's commands and
/// PostgreSQL's.
const NAMES_AS_WRITTEN: &[&str] = &["Cluster", "SCAN", "KEYS", "LISTEN", "NOTIFY", "DEL"];

/// The folders above the boundary, and whether only what a user reads may name a backend.
const ABOVE: &[(&str, bool)] = &[
    ("src/run", false),
    ("src/lease", false),
    ("src/admin", false),
    ("src/lock", false),
    ("src/cli", true),
];

#[test]
fn nothing_above_the_boundary_names_a_backend() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for (dir, user_text_only) in ABOVE {
        for file in rust_files(&root.join(dir)) {
            let source = std::fs::read_to_string(&file).unwrap();
            let shown = file.strip_prefix(root).unwrap().display().to_string();
            let checked = if *user_text_only {
                without_user_text(&source)
            } else {
                source
            };
            for (n, line) in checked.lines().enumerate() {
                for word in words(line) {
                    if is_a_name(word) {
                        found.push(format!("{shown}:{}: {word}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "above the boundary, a backend is named:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rule_sees_names_in_code_and_comments_but_not_in_what_a_user_reads() {
    let source = "/// Redis's help\nfn f() { let _ = \"a Redis URL\"; } // on Redis\nlet c = '\"'; struct SingleRedis<'a>;\n//! etcd\nr#\"PostgreSQL \"quoted\"\"#; evaluate(pgid)\n";
    let kept = without_user_text(source);
    let named: Vec<(usize, &str)> = kept
        .lines()
        .enumerate()
        .flat_map(|(n, line)| {
            words(line)
                .filter(|w| is_a_name(w))
                .map(move |w| (n + 1, w))
        })
        .collect();
    assert_eq!(named, [(2, "Redis"), (3, "Redis"), (4, "etcd")]);
    assert_eq!(kept.lines().count(), source.lines().count());
}

fn is_a_name(word: &str) -> bool {
    NAMES.iter().any(|name| word.eq_ignore_ascii_case(name)) || NAMES_AS_WRITTEN.contains(&word)
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The words of `line`: runs of letters and digits, split where camel case changes.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(camel_parts)
        .filter(|w| !w.is_empty())
}

/// `SingleRedis` as `Single`, `Redis`; `HTTPServer` as `HTTP`, `Server`; `BLPOP` whole.
fn camel_parts(word: &str) -> Vec<&str> {
    let bytes = word.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..bytes.len() {
        let (before, at) = (bytes[i - 1], bytes[i]);
        let next_lower = bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase);
        let lower_to_upper = before.is_ascii_lowercase() && at.is_ascii_uppercase();
        let acronym_ends = before.is_ascii_uppercase() && at.is_ascii_uppercase() && next_lower;
        if lower_to_upper || acronym_ends {
            parts.push(&word[start..i]);
            start = i;
        }
    }
    parts.push(&word[start..]);
    parts
}

/// `source` with what a user reads blanked out, line breaks kept: the contents of string
/// literals (plain, byte and raw), and `///` doc comments. Char literals and lifetimes are
/// told apart so that `'"'` opens no string.
fn without_user_text(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            // A comment runs to the end of the line; a `///` one is blanked (but not `////`).
            let end = rest.iter().position(|&c| c == '\n').unwrap_or(rest.len());
            let doc = rest.starts_with(&['/', '/', '/']) && rest.get(3) != Some(&'/');
            out.extend(rest[..end].iter().map(|&c| if doc { ' ' } else { c }));
            i += end;
        } else if rest[0] == '\'' {
            // A char literal: 'x' or '\x..'; else a lifetime's quote.
            let len = match rest {
                ['\'', '\\', ..] => rest[2..].iter().position(|&c| c == '\'').map(|p| p + 3),
                ['\'', _, '\'', ..] => Some(3),
                _ => None,
            };
            let len = len.unwrap_or(1);
            out.extend(rest[..len].iter());
            i += len;
        } else if let Some((open, hashes)) = raw_string_opening(rest) {
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body = &rest[open..];
            let end = (0..body.len())
                .find(|&k| body[k..].starts_with(&close))
                .map_or(body.len(), |k| k + close.len());
            out.extend(rest[..open].iter());
            out.extend(body[..end].iter().map(|&c| blank(c)));
            i += open + end;
        } else if rest[0] == '"' {
            let mut k = 1;
            while k < rest.len() && rest[k] != '"' {
                k += if rest[k] == '\\' { 2 } else { 1 };
            }
            let end = (k + 1).min(rest.len());
            out.push('"');
            out.extend(rest[1..end].iter().map(|&c| blank(c)));
            i += end;
        } else {
            // An identifier whole, so that a `r` or `b` inside one opens no string.
            let len = if rest[0].is_alphanumeric() || rest[0] == '_' {
                rest.iter()
                    .position(|&c| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len())
            } else {
                1
            };
            out.extend(rest[..len].iter());
            i += len;
        }
    }
    out
}

/// Where a raw string's body starts (`r"`, `r#"`, `br##"`...) and how many `#` close it.
fn raw_string_opening(rest: &[char]) -> Option<(usize, usize)> {
    let after_b = usize::from(rest.first() == Some(&'b'));
    if rest.get(after_b) != Some(&'r') {
        return None;
    }
    let hashes = rest[after_b + 1..]
        .iter()
        .take_while(|&&c| c == '#')
        .count();
    (rest.get(after_b + 1 + hashes) == Some(&'"')).then_some((after_b + 2 + hashes, hashes))
}
