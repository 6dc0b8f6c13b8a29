//! The scripts as Redis gets them, checked without Redis: each names its definition and says
//! what it returns, binds its KEYS and ARGV in the definition's order, and uses every name it
//! binds (an argument the client sends and the Lua ignores is a mistake). A name used but not
//! bound fails in Redis itself ("Script attempted to access nonexistent global variable"),
//! which the integration tests reach on every path; `every_script_loads` in the integration
//! suite has Redis compile each one.

use std::collections::BTreeSet;
use std::path::Path;

use super::calls;

/// A script's bound names (its first lines, `local a, b = unpack(KEYS)`) and the files after
/// them (`-- name.lua` lines), each with its text, the script's own file marked.
fn parts(body: &str) -> (Vec<&str>, Vec<(&str, String)>, usize) {
    let mut names = Vec::new();
    let mut files: Vec<(&str, String)> = Vec::new();
    let mut own = 0;
    let mut main_next = false;
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
            if main_next {
                own = files.len();
            }
            files.push((file, String::new()));
        } else if let Some((_, text)) = files.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
        main_next = line == "local function main()";
    }
    (names, files, own)
}

/// The identifiers of Lua text, comments and string literals left out (near enough: the
/// scripts' strings hold no quote characters of the other kind).
fn identifiers(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("--").next().unwrap_or("");
        let mut quoted = None;
        let mut word = String::new();
        for c in code.chars().chain([' ']) {
            match quoted {
                Some(q) if c == q => quoted = None,
                Some(_) => {}
                None if c == '\'' || c == '"' => quoted = Some(c),
                None if c.is_alphanumeric() || c == '_' => word.push(c),
                None => {
                    if !word.is_empty() {
                        found.insert(std::mem::take(&mut word));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn every_name_a_script_binds_is_used_once_bound() {
    for (script, lua) in calls::all() {
        let (names, files, _) = parts(lua.body());
        assert!(!names.is_empty(), "{script} binds no names");
        let distinct: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(distinct.len(), names.len(), "{script} binds a name twice");
        let all: String = files.iter().map(|(_, text)| text.as_str()).collect();
        let used = identifiers(&all);
        for name in &names {
            assert!(
                used.contains(*name),
                "{script} binds `{name}` and never uses it"
            );
        }
    }
}

#[test]
fn scripts_use_names_not_positions_and_say_what_they_return() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/redis");
    let mut sent: BTreeSet<String> = BTreeSet::new();
    for (script, lua) in calls::all() {
        let (_, files, own) = parts(lua.body());
        let (name, _) = files[own];
        sent.extend(files.iter().map(|(f, _)| (*f).to_owned()));
        let file = if name.contains('/') {
            format!("{name}.lua")
        } else {
            format!("scripts/{name}.lua")
        };
        let header: String = std::fs::read_to_string(root.join(file))
            .unwrap()
            .lines()
            .take_while(|l| l.starts_with("--"))
            .collect();
        assert!(
            header.contains("Returns"),
            "{name}.lua does not say what it returns"
        );
        assert!(
            header.contains(&format!("`{script}` in calls.rs")),
            "{name}.lua does not name its definition, `{script}` in calls.rs"
        );
    }
    let mut on_disk = BTreeSet::new();
    for dir in ["scripts", "record", "waiters", "several"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "lua") {
                continue;
            }
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let name = if dir == "scripts" {
                stem
            } else {
                format!("{dir}/{stem}")
            };
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.ends_with('\n'), "{name}.lua must end with a newline");
            for positional in ["KEYS[", "ARGV["] {
                assert!(!text.contains(positional), "{name}.lua uses {positional}n]");
            }
            on_disk.insert(name);
        }
    }
    assert_eq!(
        on_disk, sent,
        "a .lua file no script sends, or one that is missing"
    );
}

#[test]
fn a_script_binds_its_keys_then_its_arguments_in_the_order_of_its_definition() {
    use crate::backend::redis::scripts::Script;
    let (names, files, own) = parts(calls::GiveBack::lua().body());
    assert_eq!(
        names,
        [
            "lock",
            "holder",
            "done",
            "wake",
            "queue",
            "alive",
            "waiting",
            "counts", // KEYS
            "token",
            "linger",
            "success_for",
            "waited",
            "slot",
            "outcome",
            "status",
            "lost_outcome",
            "lost_status",
            "lost_by",
            "runs_kept",
            "record_ttl",
            "unused",
            "ended_run", // ARGV
        ]
    );
    assert_eq!(files[own].0, "give_back");
    assert_eq!(files.last().unwrap().0, "waiters/wake_next");
    let keys = crate::backend::redis::Keys::new("redlock:", "k");
    assert_eq!(
        calls::GiveBack::keys(&keys)[..2],
        ["redlock:{k}", "redlock:{k}:holder"]
    );
    let mut argv = Vec::new();
    super::Args::push(
        &calls::GiveBack {
            finish: calls::Finish {
                token: "t",
                linger: std::time::Duration::from_micros(10),
                success_for: None,
                waited: true,
                slot: "7",
                ended: crate::lock::RunEnding::of(crate::exit::Outcome::Exited(3), 75),
                record: crate::backend::redis::record::Kept {
                    runs_kept: 20,
                    record_ttl: std::time::Duration::from_secs(1),
                },
                unused: false,
            },
            ended_run: "{}",
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
            "7",
            "failed",
            "3",
            "lock_lost",
            "76",
            "0",
            "20",
            "1000",
            "0",
            "{}"
        ]
    );
}

/// shas.rs as the scripts' texts make it.
fn shas_file() -> String {
    let mut out = String::from(
        "//! The SHA1 of every script's text (see `scripts`), by its definition's name: what \
         EVALSHA\n//! sends. Written by the test `stored_hashes_are_the_texts_hashes` (run it with\n\
         //! `SNAPSHOTS=overwrite` after changing a script); do not edit by hand.\n\n\
         /// The stored SHA1 of the script called `name` (\"\" for a name with none: EVALSHA is\n\
         /// then answered NOSCRIPT, and the text goes by EVAL).\n\
         pub(super) fn of(name: &str) -> &'static str {\n    match name {\n",
    );
    for (name, lua) in calls::all() {
        let sha = redis::Script::new(&(lua.compose)()).get_hash().to_owned();
        out.push_str(&format!("        {name:?} => {sha:?},\n"));
    }
    out.push_str("        _ => \"\",\n    }\n}\n");
    out
}

#[test]
fn stored_hashes_are_the_texts_hashes() {
    // EVALSHA runs whatever the server cached under the SHA1 sent: a stored SHA1 that is not
    // the text's would run another build's script wherever a server still has it.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/redis/scripts/shas.rs");
    let wanted = shas_file();
    if std::env::var("SNAPSHOTS").as_deref() == Ok("overwrite") {
        std::fs::write(&path, &wanted).unwrap();
    }
    let stored = std::fs::read_to_string(&path).unwrap();
    assert!(
        stored == wanted,
        "src/backend/redis/scripts/shas.rs is not the scripts' hashes: run \
         `SNAPSHOTS=overwrite cargo test --lib stored_hashes_are_the_texts_hashes`"
    );
    for (name, lua) in calls::all() {
        assert_eq!(lua.sha, redis::Script::new(lua.body()).get_hash(), "{name}");
    }
}
