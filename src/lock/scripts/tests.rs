//! The scripts as Redis gets them, checked without Redis: every name a script or one of its
//! helpers uses is bound (a name missing from the Rust definition would otherwise fail only
//! when that line runs, as "Script attempted to access nonexistent global variable"), and
//! every name the definition binds is used (an argument the client sends and the Lua ignores).

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use super::calls;

const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in", "local",
    "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// What the scripts may use without declaring it: Redis's and Lua's own globals.
const GLOBALS: &[&str] = &[
    "redis", "cjson", "math", "string", "table", "tonumber", "tostring", "type", "pcall", "ipairs",
    "pairs", "unpack", "KEYS", "ARGV",
];

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Punct(char),
    Other,
}

/// Lua source as tokens, comments dropped and each string literal one `Other`.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' || c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(Token::Other);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Name(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            out.push(Token::Other);
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// The names `tokens` uses before (or without) declaring them, skipping `bound` and the
/// globals; and every name it uses at all. Scopes are not followed: a name counts as declared
/// from its first `local`, `for` or parameter on.
fn undeclared(tokens: &[Token], bound: &HashSet<&str>) -> (BTreeSet<String>, HashSet<String>) {
    let mut declared: HashSet<String> = HashSet::new();
    let (mut missing, mut used) = (BTreeSet::new(), HashSet::new());
    let mut braces = 0i32;
    // After `local` or `for`, names are declared until something else than a comma comes;
    // after `function`, so are the names in its parentheses.
    let (mut declaring, mut function, mut params) = (false, false, false);
    for (i, token) in tokens.iter().enumerate() {
        let name = match token {
            Token::Punct('(') if function => {
                (declaring, function, params) = (false, false, true);
                continue;
            }
            Token::Punct(')') => {
                params = false;
                continue;
            }
            Token::Punct(',') => continue,
            Token::Punct(c) => {
                braces += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                declaring = false;
                continue;
            }
            Token::Other => {
                declaring = false;
                continue;
            }
            Token::Name(name) => name.as_str(),
        };
        match name {
            "local" | "for" => declaring = true,
            "function" => function = true,
            n if KEYWORDS.contains(&n) => declaring = false,
            n if declaring || params => {
                declared.insert(n.to_owned());
            }
            n => {
                let prev = i.checked_sub(1).map(|p| &tokens[p]);
                // `t.ok`, `redis:x`, but not `a .. b`.
                let before = i.checked_sub(2).map(|p| &tokens[p]);
                let field = matches!(prev, Some(Token::Punct('.' | ':')))
                    && before != Some(&Token::Punct('.'));
                let key = braces > 0
                    && matches!(prev, Some(Token::Punct('{' | ',')))
                    && tokens.get(i + 1) == Some(&Token::Punct('='))
                    && tokens.get(i + 2) != Some(&Token::Punct('='));
                if field || key {
                    continue;
                }
                used.insert(n.to_owned());
                if !declared.contains(n) && !bound.contains(n) && !GLOBALS.contains(&n) {
                    missing.insert(n.to_owned());
                }
            }
        }
    }
    (missing, used)
}

/// A script's bound names (its first lines, `local a, b = unpack(KEYS)`) and the files after
/// them (`-- name.lua` lines), each with its text.
fn parts(body: &str) -> (Vec<&str>, Vec<(&str, String)>) {
    let mut names = Vec::new();
    let mut files: Vec<(&str, String)> = Vec::new();
    for line in body.lines() {
        if let Some(list) = line
            .strip_prefix("local ")
            .and_then(|l| {
                l.strip_suffix(" = unpack(KEYS)")
                    .or(l.strip_suffix(" = unpack(ARGV)"))
            })
            .filter(|_| files.is_empty())
        {
            names.extend(list.split(", "));
        } else if let Some(file) = line
            .strip_prefix("-- ")
            .and_then(|l| l.strip_suffix(".lua"))
        {
            files.push((file, String::new()));
        } else if let Some((_, text)) = files.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    (names, files)
}

/// A helper's `-- Uses: a, b.` line.
fn uses(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| l.starts_with("--"))
        .find_map(|l| l.strip_prefix("-- Uses: "))
        .map(|list| {
            list.trim_end_matches('.')
                .split(", ")
                .filter(|n| *n != "none")
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_name_a_script_uses_is_bound_and_every_name_bound_is_used() {
    for (script, lua) in calls::all() {
        let (names, files) = parts(&lua.body);
        assert!(!names.is_empty(), "{script} binds no names");
        let bound: HashSet<&str> = names.iter().copied().collect();
        assert_eq!(
            bound.len(),
            names.len(),
            "{script} binds a name twice: {names:?}"
        );
        let (own, helpers) = files.split_last().expect("a script has its own file");
        for (helper, text) in helpers {
            for name in uses(text) {
                assert!(
                    bound.contains(name),
                    "{script} includes {helper}.lua, which uses `{name}`, but does not bind it"
                );
            }
        }
        let all: String = files.iter().map(|(_, text)| text.as_str()).collect();
        let (missing, used) = undeclared(&tokens(&all), &bound);
        assert!(
            missing.is_empty(),
            "{script} ({}.lua) uses {missing:?} unbound",
            own.0
        );
        for name in &names {
            assert!(
                used.contains(*name),
                "{script} binds `{name}` and never uses it"
            );
        }
    }
}

#[test]
fn a_missing_name_is_caught() {
    let bound: HashSet<&str> = ["lock", "token"].into_iter().collect();
    let lua = "local function f(a) return a .. lock end\n\
               local t = {ttl = 1, token}\n\
               for _, w in ipairs(t) do redis.call('DEL', w, ttl) end";
    let (missing, used) = undeclared(&tokens(lua), &bound);
    assert_eq!(missing.into_iter().collect::<Vec<_>>(), ["ttl"]);
    assert!(used.contains("lock") && used.contains("token") && !used.contains("a b"));
}

#[test]
fn scripts_use_names_not_positions_and_say_what_they_return() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lock/scripts");
    let mut sent: BTreeSet<String> = BTreeSet::new();
    let mut own: BTreeSet<String> = BTreeSet::new();
    for (script, lua) in calls::all() {
        let (_, files) = parts(&lua.body);
        let (last, _) = files.last().unwrap();
        own.insert((*last).to_owned());
        sent.extend(files.iter().map(|(f, _)| (*f).to_owned()));
        let header: String = std::fs::read_to_string(dir.join(format!("{last}.lua")))
            .unwrap()
            .lines()
            .take_while(|l| l.starts_with("--"))
            .collect();
        assert!(
            header.contains("Returns"),
            "{last}.lua does not say what it returns"
        );
        assert!(
            header.contains(&format!("`{script}` in calls.rs")),
            "{last}.lua does not name its definition, `{script}` in calls.rs"
        );
    }
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "lua") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{name}.lua must end with a newline");
        for positional in ["KEYS[", "ARGV["] {
            assert!(!text.contains(positional), "{name}.lua uses {positional}n]");
        }
        if !own.contains(&name) {
            assert!(
                text.lines()
                    .take_while(|l| l.starts_with("--"))
                    .any(|l| l.starts_with("-- Uses:")),
                "the helper {name}.lua does not say what names it uses"
            );
        }
        on_disk.insert(name);
    }
    assert_eq!(
        on_disk, sent,
        "a .lua file no script sends, or one that is missing"
    );
}

#[test]
fn a_script_binds_its_keys_then_its_arguments_in_the_order_of_its_definition() {
    use crate::lock::scripts::Script;
    let (names, files) = parts(&calls::Release::lua().body);
    assert_eq!(
        names,
        [
            "lock",
            "wake",
            "queue",
            "alive",
            "holder",
            "done",
            "waiting",
            "runs",
            "counts", // KEYS
            "token",
            "linger",
            "success_for",
            "waited",
            "outcome",
            "status",
            "lost_outcome",
            "lost_status",
            "runs_kept",
            "record_ttl", // ARGV
        ]
    );
    assert_eq!(files.last().unwrap().0, "release");
    let keys = crate::lock::Keys::new("redlock:", "k");
    assert_eq!(
        calls::Release::keys(&keys)[..2],
        ["redlock:{k}", "redlock:{k}:wake"]
    );
    let mut argv = Vec::new();
    super::Args::push(
        &calls::Release {
            finish: calls::Finish {
                token: "t",
                linger: std::time::Duration::from_micros(10),
                success_for: None,
                waited: true,
                ended: crate::lock::RunEnding::of(crate::exit::Outcome::Exited(3), 75),
                record: crate::lock::record::Kept {
                    runs_kept: 20,
                    record_ttl: std::time::Duration::from_secs(1),
                },
            },
        },
        &mut argv,
    );
    assert_eq!(
        argv,
        [
            "t",
            "1",
            "0",
            "1",
            "failed",
            "3",
            "lock_lost",
            "76",
            "20",
            "1000"
        ]
    );
}
