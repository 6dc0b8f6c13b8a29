//! A ZooKeeper URL, read: `zk://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/CHROOT]`
//! (the servers of one ensemble, any of which may answer; `zks://` for TLS), and where a
//! lock's node lives under the chroot ([`Base`]). No message quotes the URL's user part.
//!
//! ZooKeeper refuses some paths (its `PathUtils.validatePath`): an empty or relative segment,
//! and the characters [`refused`] names. A chroot or a prefix that holds one is refused here,
//! in one line; a lock's name may hold anything, so it is escaped instead.

use crate::backend::url::{BadEscape, percent_decode};
use crate::report::one_line;

/// The default client port of a ZooKeeper server.
const ZK_PORT: u16 = 2181;

/// A ZooKeeper URL, read. No `Debug`: it holds the password.
#[derive(PartialEq, Eq)]
pub(super) struct Parsed {
    pub(super) tls: bool,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    /// `host:port` of each server (an IPv6 address in brackets).
    pub(super) hosts: Vec<String>,
    /// The chroot, decoded: `/a/b`, or "" for none.
    pub(super) chroot: String,
}

impl Parsed {
    pub(super) fn scheme(&self) -> &'static str {
        if self.tls { "zks" } else { "zk" }
    }

    /// The URL as messages show it: the scheme, the servers and the chroot, no credentials.
    pub(super) fn shown(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme(),
            self.hosts.join(","),
            self.chroot
        )
    }

    /// The servers as the client takes them, `h1:p1,h2:p2`: the chroot is given apart, since
    /// the client would cut a chroot with a ',' in it.
    pub(super) fn connect_string(&self) -> String {
        self.hosts.join(",")
    }
}

/// `zk://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/CHROOT]`, or `zks://`. An error is one
/// line that names what is wrong and what would be right.
pub(super) fn parse(url: &str) -> Result<Parsed, String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("zk://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("zks://") {
        (true, rest)
    } else {
        return Err("not a ZooKeeper URL (use zk:// or zks://)".into());
    };
    let scheme = if tls { "zks" } else { "zk" };
    // A password may hold any character, '@' included: the user part runs to the last '@', as
    // `backend::url::parts` finds it. A '/' before that '@' is a password's, or the chroot
    // holds an '@': which one cannot be told, so the message quotes neither.
    let (userinfo, after) = match rest.rsplit_once('@') {
        Some((userinfo, after)) => (Some(userinfo), after),
        None => (None, rest),
    };
    if userinfo.is_some_and(|u| u.contains('/')) {
        return Err(
            "invalid ZooKeeper URL: a '/' comes before its last '@': write a '/' of \
                    the user part as %2F, or an '@' of the chroot as %40"
                .into(),
        );
    }
    let quoted = format!("{scheme}://{}", one_line(after));
    if after.contains(['?', '#']) {
        return Err(format!(
            "invalid ZooKeeper URL '{quoted}': it takes no parameters, only servers and a \
             chroot (write a '?' or '#' of the chroot as %3F or %23)"
        ));
    }
    let (hosts, path) = after.split_at(after.find('/').unwrap_or(after.len()));
    let (user, password) = credentials(scheme, after, userinfo)?;
    let mut members = Vec::new();
    for member in hosts.split(',') {
        let member = member.trim();
        let (host, port) = split_port(member).ok_or_else(|| {
            let v6 = if member.matches(':').count() > 1 && !member.starts_with('[') {
                " (an IPv6 address goes in brackets: [::1]:2181)"
            } else {
                ""
            };
            format!(
                "invalid ZooKeeper URL '{quoted}': '{}' is not HOST[:PORT]{v6}",
                one_line(member)
            )
        })?;
        let member = format!("{host}:{port}");
        if members.contains(&member) {
            return Err(format!("{member} is given twice in the ZooKeeper URL"));
        }
        members.push(member);
    }
    let chroot = chroot(path)
        .map_err(|why| format!("invalid ZooKeeper URL '{quoted}': its chroot {why}"))?;
    if is_zookeepers_own(&chroot) {
        return Err(format!(
            "invalid ZooKeeper URL '{quoted}': its chroot is in /zookeeper, ZooKeeper's own \
             tree (its quotas and configuration), which is not for locks"
        ));
    }
    Ok(Parsed {
        tls,
        user,
        password,
        hosts: members,
        chroot,
    })
}

/// The user and password of a URL's user part (`USER[:PASSWORD]`), decoded. `after` is what
/// follows the user part, for messages.
fn credentials(
    scheme: &str,
    after: &str,
    userinfo: Option<&str>,
) -> Result<(Option<String>, Option<String>), String> {
    let Some(userinfo) = userinfo else {
        return Ok((None, None));
    };
    let (user, password) = match userinfo.split_once(':') {
        Some((user, password)) => (user, Some(decode(password)?)),
        None => (userinfo, None),
    };
    let user = decode(user)?;
    let after = one_line(after);
    match (user.is_empty(), &password) {
        (true, Some(_)) => Err(format!(
            "a password for ZooKeeper needs a user name in the URL: {scheme}://USER@{after}"
        )),
        (true, None) => Err(format!(
            "invalid ZooKeeper URL '{scheme}://...@{after}': the user name is empty"
        )),
        (false, _) => Ok((Some(user), password)),
    }
}

/// `host:port`, `host` (ZooKeeper's port) or `[v6]:port`: the host and the port.
fn split_port(member: &str) -> Option<(&str, u16)> {
    crate::backend::url::host_and_port(member, ZK_PORT)
}

/// The user part's percent-encoded piece, decoded; the message never quotes it.
fn decode(part: &str) -> Result<String, String> {
    percent_decode(part).map_err(|bad| match bad {
        BadEscape::NotHex => {
            "a '%' in the ZooKeeper URL's user part is not followed by two hex digits".to_owned()
        }
        BadEscape::NotUtf8 => "the ZooKeeper URL's user part is not UTF-8".to_owned(),
    })
}

/// Whether `path` is ZooKeeper's own tree, `/zookeeper` or below: the server keeps its quotas
/// and its configuration there.
fn is_zookeepers_own(path: &str) -> bool {
    path == "/zookeeper" || path.starts_with("/zookeeper/")
}

/// The chroot a URL's path names (`/a/b`, percent-encoded), decoded and checked: "" for none
/// (no path, or `/`). One trailing '/' is dropped: `/a/` is `/a`. An error says what is
/// wrong, to follow "its chroot".
fn chroot(path: &str) -> Result<String, String> {
    let Some(body) = path.strip_prefix('/').filter(|body| !body.is_empty()) else {
        return Ok(String::new());
    };
    let body = body.strip_suffix('/').unwrap_or(body);
    let body = percent_decode(body).map_err(|bad| match bad {
        BadEscape::NotHex => "has a '%' not followed by two hex digits".to_owned(),
        BadEscape::NotUtf8 => "is not UTF-8 once decoded".to_owned(),
    })?;
    segments(&body)?;
    Ok(format!("/{body}"))
}

/// Whether each '/'-separated segment of `path` (no leading '/') is a node's name ZooKeeper
/// takes; if not, why, to follow the path's name in a message.
fn segments(path: &str) -> Result<(), String> {
    for segment in path.split('/') {
        match segment {
            "" => return Err("has an empty segment ('//')".into()),
            "." | ".." => {
                return Err(format!(
                    "has a '{segment}' segment: ZooKeeper takes no relative path"
                ));
            }
            _ => {}
        }
        if let Some(c) = segment.chars().find(|c| refused(*c)) {
            return Err(format!(
                "has U+{:04X}, a character ZooKeeper refuses in a path",
                u32::from(c)
            ));
        }
    }
    Ok(())
}

/// Whether ZooKeeper refuses `c` in a path: U+0000-U+001F, U+007F-U+009F, U+D800-U+F8FF and
/// U+FFF0-U+FFFF (`PathUtils.validatePath`). Its server checks Java's UTF-16, where every
/// character past U+FFFF is two surrogates (U+D800-U+DFFF): those are refused too.
fn refused(c: char) -> bool {
    matches!(
        u32::from(c),
        0..=0x1f | 0x7f..=0x9f | 0xd800..=0xf8ff | 0xfff0..
    )
}

/// Where the locks of one `--prefix` live, relative to the chroot (the client applies the
/// chroot itself): a folder, and the stem every lock's node name starts with. Lock `NAME` is
/// the node `FOLDER/STEM{NAME}`, the name escaped, as etcd's keys are `PREFIX{NAME}`: the
/// braces end the stem, so that no two prefixes name one lock (`redlock:a` and `b` is
/// `redlock:a{b}`, not the default's `redlock:{ab}`), and `--prefix` has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Base {
    /// `/` (the chroot itself) or `/a/b`.
    folder: String,
    stem: String,
}

/// The [`Base`] of `prefix`: what is before its last '/' is a folder under the chroot, what is
/// after is the stem. A leading '/' is ignored: `/locks/x` is `locks/x`. The default
/// `redlock:` is folder `/` and stem `redlock:`; `a/b/` is folder `/a/b` and no stem.
/// `chroot` only names the folder in a message.
pub(super) fn base(chroot: &str, prefix: &str) -> Result<Base, String> {
    let bad = |why: String| {
        format!(
            "invalid --prefix '{}' for ZooKeeper: {why}",
            one_line(prefix)
        )
    };
    let rest = prefix.strip_prefix('/').unwrap_or(prefix);
    let (folder, stem) = match rest.rsplit_once('/') {
        Some((folder, stem)) => {
            segments(folder).map_err(|why| {
                let folder = one_line(folder);
                bad(format!("the folder it names, {chroot}/{folder}, {why}"))
            })?;
            (format!("/{folder}"), stem)
        }
        None => ("/".to_owned(), rest),
    };
    if chroot.is_empty() && is_zookeepers_own(&folder) {
        return Err(bad(
            "its folder is in /zookeeper, ZooKeeper's own tree (its quotas and \
             configuration), which is not for locks"
                .to_owned(),
        ));
    }
    if let Some(c) = stem.chars().find(|c| refused(*c)) {
        let c = u32::from(c);
        return Err(bad(format!(
            "it has U+{c:04X}, a character ZooKeeper refuses in a path"
        )));
    }
    Ok(Base {
        folder,
        stem: stem.to_owned(),
    })
}

impl Base {
    /// The folder of the locks, relative to the chroot: `/` or `/a/b`.
    pub(super) fn folder(&self) -> &str {
        &self.folder
    }

    /// The path of lock `name` (never empty: `parse_key` refuses it), relative to the chroot:
    /// a node of the folder, which no other name shares.
    pub(super) fn lock(&self, name: &str) -> String {
        let node = format!("{}{{{}}}", self.stem, escape(name));
        match self.folder.as_str() {
            "/" => format!("/{node}"),
            folder => format!("{folder}/{node}"),
        }
    }

    /// The lock's name of a child of the folder, `lock`'s inverse: None for a child that does
    /// not start with the stem, or whose rest is not a name as `lock` escapes it.
    pub(super) fn name_of(&self, child: &str) -> Option<String> {
        let escaped = child
            .strip_prefix(self.stem.as_str())?
            .strip_prefix('{')?
            .strip_suffix('}')?;
        let name = percent_decode(escaped).ok()?;
        // Only the one spelling `lock` writes: `%41` is not `A`, so no two nodes are one lock.
        (escape(&name) == escaped).then_some(name)
    }
}

/// `name` as its node's name gives it between the braces: `%`, `/`, `{`, `}` and what
/// ZooKeeper refuses as `%XX` of their UTF-8 bytes. In braces, a node is never `.` or `..`.
fn escape(name: &str) -> String {
    let mut escaped = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '%' | '/' | '{' | '}') || refused(c) {
            for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                escaped += &format!("%{byte:02X}");
            }
        } else {
            escaped.push(c);
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ok(url: &str) -> Parsed {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn urls_name_the_servers_of_one_ensemble_and_a_chroot() {
        let p = ok("zk://10.0.0.1:2181,10.0.0.2:22181, 10.0.0.3 ");
        assert_eq!(
            p.hosts,
            ["10.0.0.1:2181", "10.0.0.2:22181", "10.0.0.3:2181"]
        );
        assert!(!p.tls && p.user.is_none() && p.password.is_none());
        assert_eq!((p.chroot.as_str(), p.scheme()), ("", "zk"));
        let p = ok("zks://redlock:s%40c:ret@[::1]:2181,[::2]/apps/lock%20s/");
        assert!(p.tls);
        assert_eq!(
            (p.user.as_deref(), p.password.as_deref()),
            (Some("redlock"), Some("s@c:ret"))
        );
        assert_eq!(p.hosts, ["[::1]:2181", "[::2]:2181"]);
        assert_eq!(p.chroot, "/apps/lock s");
        assert_eq!(p.shown(), "zks://[::1]:2181,[::2]:2181/apps/lock s");
        assert_eq!(p.connect_string(), "[::1]:2181,[::2]:2181");
        // A password may hold an '@' (the user part runs to the last one), a '?' or a '#'.
        let p = ok("zk://alice:p@ss?#@h/a");
        assert_eq!(p.password.as_deref(), Some("p@ss?#"));
        assert_eq!(p.user.as_deref(), Some("alice"));
        let p = ok("zk://alice@h");
        assert_eq!((p.user.as_deref(), p.password), (Some("alice"), None));
        for (url, chroot) in [
            ("zk://h/", ""),
            ("zk://h/a/", "/a"),
            ("zk://h/a/b", "/a/b"),
            ("zk://h/a%2Fb", "/a/b"),
            ("zk://h/%40x%3F%23/.a/..b/c.", "/@x?#/.a/..b/c."),
            ("zk://h/caf%C3%A9,x", "/caf\u{e9},x"),
        ] {
            assert_eq!(ok(url).chroot, chroot, "{url}");
        }
    }

    /// Each line: a URL (`U:P@` stands for `alice:s3cret@`), ` | `, what its error says.
    const BAD: &str = "
etcd://U:P@h:1                      | not a ZooKeeper URL (use zk:// or zks://)
ZK://U:P@h                          | not a ZooKeeper URL
zk://                               | invalid ZooKeeper URL 'zk://': '' is not HOST[:PORT]
zk://U:P@                           | 'zk://': '' is not HOST[:PORT]
zk://U:P@/a                         | 'zk:///a': '' is not HOST[:PORT]
zk://U:P@h:0                        | 'h:0' is not HOST[:PORT]
zk://U:P@h:65536                    | 'h:65536' is not HOST[:PORT]
zk://U:P@h:                         | 'h:' is not HOST[:PORT]
zk://U:P@a:1,,b:2                   | '' is not HOST[:PORT]
zk://U:P@h%201                      | 'h%201' is not HOST[:PORT]
zk://U:P@[::1                       | '[::1' is not HOST[:PORT]
zk://U:P@[zz]:1                     | '[zz]:1' is not HOST[:PORT]
zk://U:P@[::1]x                     | '[::1]x' is not HOST[:PORT]
zk://U:P@::1                        | in brackets: [::1]:2181
zk://U:P@h,h:2181                   | h:2181 is given twice in the ZooKeeper URL
zk://U:P@h:1?timeout=5              | 'zk://h:1?timeout=5': it takes no parameters
zk://U:P@h:1/a#b                    | write a '?' or '#' of the chroot as %3F or %23
zk://U:P@h//                        | 'zk://h//': its chroot has an empty segment ('//')
zk://U:P@h/a//b                     | its chroot has an empty segment
zk://U:P@h/a%2F                     | its chroot has an empty segment
zk://U:P@h/a/./b                    | its chroot has a '.' segment: ZooKeeper takes no relative path
zk://U:P@h/..                       | its chroot has a '..' segment
zk://U:P@h/%2E%2E/a                 | its chroot has a '..' segment
zk://U:P@h/a%01                     | its chroot has U+0001, a character ZooKeeper refuses
zk://U:P@h/a%C2%85                  | its chroot has U+0085
zk://U:P@h/a%EE%80%80               | its chroot has U+E000
zk://U:P@h/a%EF%BF%BF               | its chroot has U+FFFF
zk://U:P@h/a%F0%9F%94%92            | its chroot has U+1F512
zk://U:P@h/a\u{7}                   | 'zk://h/a\\u{7}': its chroot has U+0007
zk://U:P@h/a%zz                     | its chroot has a '%' not followed by two hex digits
zk://U:P@h/a%FF                     | its chroot is not UTF-8 once decoded
zk://:s3cret@h/a                    | needs a user name in the URL: zk://USER@h/a
zks://:s3cret@h                     | needs a user name in the URL: zks://USER@h
zk://:@h                            | needs a user name
zk://@h                             | invalid ZooKeeper URL 'zk://...@h': the user name is empty
zk://alice:s3cret%zz@h              | a '%' in the ZooKeeper URL's user part is not followed by two hex digits
zk://alice:s3cret%FF@h              | the ZooKeeper URL's user part is not UTF-8
zk://alice%:s3cret@h                | a '%' in the ZooKeeper URL's user part
zk://alice:s3c/ret@h                | a '/' comes before its last '@': write a '/' of the user part as %2F
zk://h/alice@s3cret                 | or an '@' of the chroot as %40
zk://alice:s3c/ret?x=1@h/a          | a '/' comes before its last '@'
zk://alice:s3cret@h/a@b             | a '/' comes before its last '@'
";

    #[test]
    fn bad_urls_are_refused_in_one_line_that_quotes_no_user_part() {
        for (url, expected) in BAD.lines().filter_map(|line| line.split_once(" | ")) {
            let url = url.trim_end().replace("U:P@", "alice:s3cret@");
            let err = parse(&url)
                .err()
                .unwrap_or_else(|| panic!("{url:?} was taken"));
            assert!(
                err.contains(expected) && !err.contains('\n') && !err.contains('\u{7}'),
                "{url:?}: {err}"
            );
            for secret in ["s3c", "ret", "alice"] {
                assert!(!err.contains(secret), "{url:?} quotes {secret}: {err}");
            }
        }
    }

    #[test]
    fn a_prefix_is_a_folder_under_the_chroot_and_a_stem() {
        let parts = |prefix: &str| {
            let b = base("/c", prefix).unwrap_or_else(|e| panic!("{prefix}: {e}"));
            (b.folder().to_owned(), b.stem.clone(), b.lock("build/main"))
        };
        let want = |folder: &str, stem: &str, lock: &str| {
            (folder.to_owned(), stem.to_owned(), lock.to_owned())
        };
        for (prefix, folder, stem, lock) in [
            ("redlock:", "/", "redlock:", "/redlock:{build%2Fmain}"),
            ("/redlock:", "/", "redlock:", "/redlock:{build%2Fmain}"),
            ("a/b/", "/a/b", "", "/a/b/{build%2Fmain}"),
            ("/a/b/x-", "/a/b", "x-", "/a/b/x-{build%2Fmain}"),
            ("/", "/", "", "/{build%2Fmain}"),
            ("..x/.y/", "/..x/.y", "", "/..x/.y/{build%2Fmain}"),
            ("l%", "/", "l%", "/l%{build%2Fmain}"),
        ] {
            assert_eq!(parts(prefix), want(folder, stem, lock), "{prefix}");
        }
        for (prefix, expected) in [
            ("a//b", "the folder it names, /c/a/, has an empty segment"),
            ("//b", "has an empty segment"),
            ("a/./b", "has a '.' segment"),
            ("../b", "has a '..' segment"),
            ("a\u{1}/b", "the folder it names, /c/a\\u{1}, has U+0001"),
            (
                "a/b\u{fff0}",
                "it has U+FFF0, a character ZooKeeper refuses",
            ),
            ("x\u{1f512}", "it has U+1F512"),
        ] {
            let err = base("/c", prefix).unwrap_err();
            assert!(
                err.contains(expected) && !err.contains('\u{1}'),
                "{prefix}: {err}"
            );
        }
    }

    #[test]
    fn zookeepers_own_tree_is_not_for_locks() {
        let err = base("", "zookeeper/quota/").unwrap_err();
        assert!(err.contains("ZooKeeper's own tree"), "{err}");
        assert!(base("", "/zookeeper/").is_err());
        assert!(
            base("/c", "zookeeper/").is_ok(),
            "under a chroot it is /c/zookeeper"
        );
        assert!(base("", "zookeeper:").is_ok(), "a stem, not the folder");
        for url in ["zk://h/zookeeper", "zk://h/zookeeper/quota/x"] {
            let err = parse(url).err().unwrap();
            assert!(err.contains("ZooKeeper's own"), "{url}: {err}");
        }
        assert!(parse("zk://h/zookeepers").is_ok());
    }

    #[test]
    fn names_are_escaped_into_one_node_each() {
        let default = base("", "redlock:").unwrap();
        let bare = base("", "locks/").unwrap();
        let dot = base("", ".").unwrap();
        for (base, name, lock) in [
            (&default, "a", "/redlock:{a}"),
            (&default, "100%/x", "/redlock:{100%25%2Fx}"),
            (&default, "{b}", "/redlock:{%7Bb%7D}"),
            (&default, "tab\there", "/redlock:{tab%09here}"),
            (&default, "\u{1f512}", "/redlock:{%F0%9F%94%92}"),
            (&bare, "a", "/locks/{a}"),
            (&bare, ".", "/locks/{.}"),
            (&dot, "..", "/.{..}"),
        ] {
            assert_eq!(base.lock(name), lock, "{name:?}");
        }
        // Only the spelling `lock` writes is a lock's node.
        for child in [
            ".", "{%2e}", "{%41}", "{%2f}", "{%zz}", "{%FF}", "{a", "a}", "{{a}}", "{a/b}",
            "{\u{1}}",
        ] {
            assert_eq!(bare.name_of(child), None, "{child:?}");
        }
        assert_eq!(default.name_of("other:{a}"), None);
        assert_eq!(
            default.name_of("redlock:a{b}"),
            None,
            "another prefix's lock"
        );
        assert_eq!(default.name_of("redlock:{%25}").as_deref(), Some("%"));
    }

    /// ZooKeeper's `PathUtils.validatePath` as its server runs it: on UTF-16 code units.
    fn zookeeper_takes(path: &str) -> bool {
        let units: Vec<u16> = path.encode_utf16().collect();
        let slash = u16::from(b'/');
        let dot = u16::from(b'.');
        let Some((&first, rest)) = units.split_first() else {
            return false;
        };
        first == slash
            && (rest.is_empty()
                || rest.split(|u| *u == slash).all(|segment| {
                    !segment.is_empty()
                        && segment != [dot]
                        && segment != [dot, dot]
                        && segment.iter().all(
                            |u| !matches!(u, 0..=0x1f | 0x7f..=0x9f | 0xd800..=0xf8ff | 0xfff0..),
                        )
                }))
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::collection::vec(any::<char>(), 1..40).prop_map(String::from_iter),
            "[./%2EF]{1,4}",
            // The longest name the command line takes (1,024 bytes), each byte escaped.
            Just("%".repeat(1024)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn every_name_is_one_valid_node_and_comes_back(
            name in name(),
            prefix in prop::sample::select(
                &["redlock:", "a/b/", "/", ".", "x/.", "..", "/p/%"][..],
            ),
        ) {
            let base = base("/chroot", prefix).unwrap();
            let lock = base.lock(&name);
            prop_assert!(zookeeper_takes(&lock), "{lock:?}");
            prop_assert!(zookeeper_takes(&format!("/chroot{lock}")), "{lock:?}");
            let child = lock.strip_prefix(base.folder()).unwrap().trim_start_matches('/');
            prop_assert!(!child.contains('/'));
            prop_assert_eq!(base.name_of(child), Some(name));
        }
    }
}
