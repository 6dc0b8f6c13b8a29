//! The password file libpq reads, `$PGPASSFILE` or `~/.pgpass`: lines of
//! `hostname:port:database:username:password`, the first that matches the connection giving its
//! password. Found, checked and read by libpq's rules, so that a file psql uses serves unchanged.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::url::DEFAULT_SOCKET_DIR;

/// The password for this connection from a password file's contents, by libpq's rules: each of
/// the first four fields is `*` (anything) or a value that must equal the connection's, with
/// `\` escaping the next character (`\:`, `\\`); a line starting with `#` is a comment, a line
/// of fewer than five fields matches nothing, and the first line that matches wins (an empty
/// password there gives None). `host` is the host as the URL gives it: a name, an address
/// (IPv6 without brackets, its colons escaped in the file), or a socket directory; the
/// default socket directory (or no host) is matched as `localhost`, as libpq does, and any
/// other directory by its path. No database or no user: None, as in libpq.
pub(super) fn lookup(
    contents: &str,
    host: &str,
    port: u16,
    database: &str,
    user: &str,
) -> Option<String> {
    if database.is_empty() || user.is_empty() {
        return None;
    }
    let host = if host.is_empty() || host == DEFAULT_SOCKET_DIR {
        "localhost"
    } else {
        host
    };
    let port = port.to_string();
    for line in contents.split('\n') {
        let line = line.trim_end_matches('\r');
        if line.starts_with('#') {
            continue;
        }
        let rest = [host, &port, database, user]
            .into_iter()
            .try_fold(line, matched);
        if let Some(rest) = rest {
            return Some(password(rest)).filter(|p| !p.is_empty());
        }
    }
    None
}

/// What follows the first field of `line` and its `:`, if that field is `*` or equals `wanted`.
fn matched<'a>(line: &'a str, wanted: &str) -> Option<&'a str> {
    if let Some(rest) = line.strip_prefix("*:") {
        return Some(rest);
    }
    let mut field = String::new();
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => field.push(chars.next()?.1),
            ':' => return (field == wanted).then(|| &line[i + 1..]),
            c => field.push(c),
        }
    }
    None
}

/// The password field: up to the next unescaped `:`, a `\` escaping the next character (one at
/// the very end is kept).
fn password(field: &str) -> String {
    let mut password = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        match c {
            ':' => break,
            '\\' => password.push(chars.next().unwrap_or('\\')),
            c => password.push(c),
        }
    }
    password
}

/// The file libpq reads: `$PGPASSFILE`, else `$HOME/.pgpass` (variables set and not empty);
/// None if there is no such file. libpq ignores the file with a warning when it is not a plain
/// file, or when its group or others have any access to it (`mode & 0o077`): then the error
/// is that warning, one line.
pub(super) fn file(env: impl Fn(&str) -> Option<String>) -> Result<Option<PathBuf>, String> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    let path = match (set("PGPASSFILE"), set("HOME")) {
        (Some(file), _) => PathBuf::from(file),
        (None, Some(home)) => PathBuf::from(home).join(".pgpass"),
        (None, None) => return Ok(None),
    };
    // Unreadable is absent, as in libpq.
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(None);
    };
    let shown = crate::report::one_line(&path.to_string_lossy());
    if !meta.is_file() {
        return Err(format!(
            "password file '{shown}' is not a plain file, so it is ignored, as libpq does"
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "password file '{shown}' has group or world access (mode {mode:04o}), so it is \
             ignored, as libpq does: chmod 0600 '{shown}'"
        ));
    }
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let file = "\
# hostname:port:database:username:password
db.example.com:5432:app:alice:first
db.example.com:5432:app:alice:second
*:5432:*:bob:any\\:thing\\\\
db.example.com:*:*:*:wild
short:5432:app:alice
";
        let at = |host: &str, port: u16, db: &str, user: &str| lookup(file, host, port, db, user);
        assert_eq!(
            at("db.example.com", 5432, "app", "alice").as_deref(),
            Some("first")
        );
        assert_eq!(
            at("other", 5432, "x", "bob").as_deref(),
            Some("any:thing\\")
        );
        assert_eq!(
            at("db.example.com", 6432, "x", "carol").as_deref(),
            Some("wild")
        );
        assert_eq!(
            at("db.example.com", 5432, "app", "bob").as_deref(),
            Some("any:thing\\")
        );
        // Short lines, other ports and other hosts match nothing.
        assert_eq!(at("short", 5432, "app", "alice"), None);
        assert_eq!(at("other", 6432, "x", "bob"), None);
        assert_eq!(at("db.example.com", 5432, "", "alice"), None);
        assert_eq!(at("db.example.com", 5432, "app", ""), None);
    }

    #[test]
    fn escapes_wildcards_and_line_ends() {
        let file = "\\*:1:d:u:literal-star\r\n::1:1:d:u:unescaped\r\n\\:\\:1:1:d:u:v6:extra\n\
                    h:1:d:u:\nh:1:d:u:later\nw:*:*:*:tail\\";
        assert_eq!(
            lookup(file, "*", 1, "d", "u").as_deref(),
            Some("literal-star")
        );
        assert_eq!(lookup(file, "x", 1, "d", "u"), None);
        // An IPv6 address's colons are escaped; the password ends at the next ':'.
        assert_eq!(lookup(file, "::1", 1, "d", "u").as_deref(), Some("v6"));
        // The first match wins even with an empty password.
        assert_eq!(lookup(file, "h", 1, "d", "u"), None);
        assert_eq!(lookup(file, "w", 2, "e", "v").as_deref(), Some("tail\\"));
        assert_eq!(lookup("h\\", "h", 1, "d", "u"), None);
        assert_eq!(lookup("#h:1:d:u:commented\n", "#h", 1, "d", "u"), None);
        assert_eq!(
            lookup(" #h:1:d:u:not-a-comment", " #h", 1, "d", "u").as_deref(),
            Some("not-a-comment")
        );
    }

    #[test]
    fn a_unix_socket_matches_as_localhost_only_in_the_default_directory() {
        let file = "localhost:5432:d:u:local\n/tmp:5433:d:u:tmp\n";
        assert_eq!(
            lookup(file, DEFAULT_SOCKET_DIR, 5432, "d", "u").as_deref(),
            Some("local")
        );
        assert_eq!(lookup(file, "", 5432, "d", "u").as_deref(), Some("local"));
        assert_eq!(
            lookup(file, "localhost", 5432, "d", "u").as_deref(),
            Some("local")
        );
        assert_eq!(lookup(file, "/tmp", 5432, "d", "u"), None);
        assert_eq!(lookup(file, "/tmp", 5433, "d", "u").as_deref(), Some("tmp"));
    }

    #[test]
    fn the_file_is_pgpassfile_or_home_and_read_only_when_private() {
        let dir = std::env::temp_dir().join(format!("redlock-pgpass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pgpass = dir.join(".pgpass");
        std::fs::write(&pgpass, "*:*:*:*:pw\n").unwrap();
        let chmod = |mode| {
            std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let dir_s = dir.to_str().unwrap().to_owned();
        let home = |name: &str| (name == "HOME").then(|| dir_s.clone());
        chmod(0o600);
        assert_eq!(file(home), Ok(Some(pgpass.clone())));
        chmod(0o400);
        assert_eq!(file(home), Ok(Some(pgpass.clone())));
        for mode in [0o640, 0o604, 0o610] {
            chmod(mode);
            let warning = file(home).unwrap_err();
            let expected = format!("group or world access (mode {mode:04o})");
            assert!(warning.contains(&expected), "{warning}");
            assert!(warning.contains(&format!("chmod 0600 '{}'", pgpass.display())));
            assert!(!warning.contains('\n'));
        }
        // PGPASSFILE comes first; an empty one is unset; a missing file is no file.
        let other = dir.join("elsewhere");
        let other_s = other.to_str().unwrap().to_owned();
        let both = |name: &str| match name {
            "PGPASSFILE" => Some(other_s.clone()),
            _ => home(name),
        };
        assert_eq!(file(both), Ok(None));
        let empty = |name: &str| match name {
            "PGPASSFILE" => Some(String::new()),
            _ => home(name),
        };
        chmod(0o600);
        assert_eq!(file(empty), Ok(Some(pgpass.clone())));
        assert_eq!(file(|_: &str| None), Ok(None));
        let is_dir = |name: &str| (name == "PGPASSFILE").then(|| dir_s.clone());
        assert!(file(is_dir).unwrap_err().contains("not a plain file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
