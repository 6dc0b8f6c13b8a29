//! The lock's Lua scripts and the one typed boundary to them.
//!
//! Each script is a `.lua` file under `scripts/` and one Rust definition in [`calls`]: a struct
//! of its arguments, the keys of the lock it is given, and the type its reply decodes to. That
//! definition is the only place where the order of KEYS and ARGV is written: the script as sent
//! opens with two lines that bind them to the names of the definition's keys and fields
//! (`local lock, fence, ... = unpack(KEYS)`, then the same for ARGV), so the Lua uses names
//! only, and a new argument is a compile error wherever a caller does not supply it (the client
//! in `single`, the chaos suite's replay).
//!
//! The helper files (`clock.lua`, `fence.lua`, `pass_on.lua`, ...) are not scripts of their
//! own: they define the Lua functions several scripts share, and come after the names and
//! before the script's own file. A definition lists exactly the helpers its script calls, and
//! the steps that follow its own file in the same call (`then`: the record of runs, the
//! waiters' bookkeeping), so a plain run's scripts carry nothing of the features it does not
//! use. The tests below check the binding of names; Redis itself refuses a name left unbound.
//!
//! [`send`] is the one way a script goes to Redis: EVALSHA with the SHA1 stored in [`shas`],
//! EVAL when the server's script cache lost it (failover, restart, SCRIPT FLUSH), with another
//! command pipelined beside it in the same round trip when asked. A script's text is composed
//! only for that EVAL: composing and hashing the two scripts of a plain run cost about 0.09 ms of
//! every run's start, for a text the server almost always has already. The test
//! `stored_hashes_are_the_texts_hashes` holds every stored SHA1 to its text.

pub mod calls;
mod shas;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

use crate::backend::redis::Keys;
use crate::backend::redis::reply::FromReply;
use crate::lock::Kind;

/// A script as sent: the names of its KEYS and ARGV bound, its helpers, its own file; and its
/// SHA1 for EVALSHA.
#[derive(Debug)]
pub struct Lua {
    /// The SHA1 of its text, as stored in [`shas`].
    sha: &'static str,
    /// Its text, composed the first time it is needed (an EVAL).
    body: OnceLock<String>,
    compose: fn() -> String,
    /// A server answered NOSCRIPT to this script's EVALSHA, and no EVAL of it has been answered
    /// since: requests send it whole (EVAL) first. The EVAL that follows a NOSCRIPT in the
    /// same request cannot carry the ASKING the transport sent before the first command, so on
    /// a Cluster node importing the lock's slot it is answered MOVED, and the transport comes
    /// back through ASK: this time the EVAL goes first, with ASKING, and loads the script there.
    flushed: AtomicBool,
}

impl Lua {
    /// The script called `name` (its definition's), whose text `compose` makes.
    pub fn new(name: &str, compose: fn() -> String) -> Lua {
        Lua {
            sha: shas::of(name),
            body: OnceLock::new(),
            compose,
            flushed: AtomicBool::new(false),
        }
    }

    /// Its text, as sent by EVAL.
    pub fn body(&self) -> &str {
        self.body.get_or_init(|| {
            let body = (self.compose)();
            debug_assert_eq!(redis::Script::new(&body).get_hash(), self.sha);
            body
        })
    }

    /// The text of the script of `S` from its files (`(name, text)`, helpers first, its own
    /// last) and the steps that follow it (`then`, each under its own pcall: what need not hold
    /// for the lock's own step to stand, such as the record of runs).
    pub fn compose<S: Script>(
        files: &[(&'static str, &'static str)],
        then: &[(&'static str, &'static str)],
    ) -> String {
        let mut args = Vec::new();
        S::names("", &mut args);
        let mut body =
            String::from("-- KEYS and ARGV by name, as the Rust definition orders them\n");
        for (table, names) in [("KEYS", S::KEYS), ("ARGV", &args)] {
            if !names.is_empty() {
                body.push_str(&format!("local {} = unpack({table})\n", names.join(", ")));
            }
        }
        // What main() sets once it made a write a failure must undo (guard.lua).
        body.push_str("local undo = nil\n");
        // Each file under its name, which also tells what a line number in an error is in; the
        // script's own file (the last) as main(), run under pcall.
        let (own, helpers) = files.split_last().expect("a script has its own file");
        for (name, text) in helpers {
            body.push_str(&format!("-- {name}.lua\n{text}"));
        }
        let (name, text) = own;
        // The guard, only on the way out of a failure: what each of KEYS holds, and the
        // failure handler (guard.lua).
        let kept_as: Vec<String> = S::KEYS
            .iter()
            .map(|key| format!("'{}'", Keys::kept_as(key)))
            .collect();
        body.push_str(&format!(
            "local function main()\n-- {name}.lua\n{text}end\n\
             local ok, reply = pcall(main)\n\
             if not ok then\n\
             -- guard.lua\n\
             local function kept_as() return {{{}}} end\n\
             {}\
             return failed(reply)\n\
             end\n",
            kept_as.join(", "),
            include_str!("scripts/guard.lua")
        ));
        // Each step after it sees the reply (and may add to it); its failure is its own.
        for (name, text) in then {
            body.push_str(&format!("-- {name}.lua\npcall(function()\n{text}end)\n"));
        }
        body.push_str("return reply\n");
        body
    }
}

/// What a script takes in ARGV: single values, or groups of them (a struct made with
/// [`args!`]), flattened in order.
pub trait Args {
    /// Append this value's elements of ARGV.
    fn push(&self, argv: &mut Vec<String>);
    /// Append the Lua names a field called `field` of this type binds: that name for a single
    /// value, the names of its own fields for a group.
    fn names(field: &'static str, names: &mut Vec<&'static str>);
}

impl<T: Args + ?Sized> Args for &T {
    fn push(&self, argv: &mut Vec<String>) {
        (**self).push(argv);
    }
    fn names(field: &'static str, names: &mut Vec<&'static str>) {
        T::names(field, names);
    }
}

/// [`Args`] for types that are one element of ARGV, written as the expression gives.
macro_rules! single {
    ($($ty:ty => |$v:ident| $text:expr;)*) => {$(
        impl Args for $ty {
            fn push(&self, argv: &mut Vec<String>) {
                let $v = self;
                argv.push($text);
            }
            fn names(field: &'static str, names: &mut Vec<&'static str>) {
                names.push(field);
            }
        }
    )*};
}

single! {
    str => |v| v.to_owned();
    String => |v| v.clone();
    u32 => |v| v.to_string();
    i32 => |v| v.to_string();
    u64 => |v| v.to_string();
    i64 => |v| v.to_string();
    // '1' or '0'.
    bool => |v| if *v { "1" } else { "0" }.to_owned();
    // Whole milliseconds, at least 1 (0 would mean "none").
    Duration => |v| millis(*v);
    // '0' for none.
    Option<Duration> => |v| v.map_or_else(|| "0".to_owned(), millis);
    // '' for none.
    Option<&str> => |v| v.unwrap_or_default().to_owned();
    // As stored beside the lock: 'lock', 'limit N', 'shared'.
    Kind => |v| v.stored();
}

/// A duration as a Redis argument in whole milliseconds, at least 1 (0 would mean "none").
pub(crate) fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

/// A struct whose fields are, in order, elements of a script's ARGV (or groups of them, which
/// are flattened in their place); the fields' names are the names its Lua binds them to.
macro_rules! args {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident: $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$lt>)? {
            $($(#[$fmeta])* $fvis $field: $ty,)*
        }

        impl $(<$lt>)? $crate::backend::redis::scripts::Args for $name $(<$lt>)? {
            fn push(&self, _argv: &mut Vec<String>) {
                $($crate::backend::redis::scripts::Args::push(&self.$field, _argv);)*
            }
            fn names(_field: &'static str, _names: &mut Vec<&'static str>) {
                $(<$ty as $crate::backend::redis::scripts::Args>::names(stringify!($field), _names);)*
            }
        }
    };
}
pub(crate) use args;

/// One Lua script: its arguments are the struct's fields ([`Args`]), its KEYS some of the lock's
/// [`Keys`], its reply decodes to `Reply`. Made with [`script!`].
pub trait Script: Args {
    type Reply: FromReply;
    /// The fields of [`Keys`] it is given as KEYS, in order; also their names in its Lua.
    const KEYS: &'static [&'static str];
    /// Its KEYS for the lock of `keys`.
    fn keys(keys: &Keys) -> Vec<&str>;
    /// Its SHA1, and its text when needed.
    fn lua() -> &'static Lua;
}

/// Define a script: its arguments' struct (as [`args!`]), the lock's keys it takes, its files
/// (helpers first, each a `lua!("name")`), the steps that follow it in the same call (`then`,
/// optional; see [`Lua::compose`]) and its reply's type.
macro_rules! script {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(<$lt:lifetime>)? {
            $($(#[$fmeta:meta])* $field:ident: $ty:ty),* $(,)?
        }
        keys [$($key:ident),+ $(,)?];
        files [$($file:expr),+ $(,)?];
        $(then [$($then:expr),+ $(,)?];)?
        reply $reply:ty;
    ) => {
        $crate::backend::redis::scripts::args! {
            $(#[$meta])*
            pub struct $name $(<$lt>)? {
                $($(#[$fmeta])* pub $field: $ty),*
            }
        }

        impl $(<$lt>)? $crate::backend::redis::scripts::Script for $name $(<$lt>)? {
            type Reply = $reply;
            const KEYS: &'static [&'static str] = &[$(stringify!($key)),+];
            fn keys(keys: &$crate::backend::redis::Keys) -> Vec<&str> {
                vec![$(keys.$key.as_str()),+]
            }
            fn lua() -> &'static $crate::backend::redis::scripts::Lua {
                static LUA: std::sync::OnceLock<$crate::backend::redis::scripts::Lua> =
                    std::sync::OnceLock::new();
                LUA.get_or_init(|| {
                    $crate::backend::redis::scripts::Lua::new(stringify!($name), || {
                        $crate::backend::redis::scripts::Lua::compose::<Self>(
                            &[$($file),+],
                            &[$($($then),+)?],
                        )
                    })
                })
            }
        }
    };
}
pub(crate) use script;

/// Send `script` for the lock of `keys`: EVALSHA, then EVAL when the server's script cache lost
/// it; `beside`, when given, pipelined after it in the same round trip (and again with the
/// EVAL when `again`). The script's reply (an error reply as an error, so that the transport
/// follows MOVED, ASK and READONLY as for any request) and the other command's, as it came.
/// Only a failure to talk to the server at all is the outer error.
pub fn send<S: Script>(
    conn: &mut dyn ConnectionLike,
    keys: &Keys,
    script: &S,
    beside: Option<&redis::Cmd>,
    again: bool,
) -> RedisResult<(RedisResult<Value>, Option<Value>)> {
    let (_, reply, other) = sent(conn, keys, script, None, beside, again)?;
    Ok((reply, other))
}

/// Send `first`, then `script` for the lock of `keys`, in one pipeline: Redis runs the script
/// the moment `first` is answered, a blocking command's wake-up included, before the client
/// has even read that answer. `first`'s reply as it came, then the script's as [`send`] gives
/// it; when the server's script cache lost the script, it alone is sent again whole (EVAL),
/// `first` not repeated.
pub fn send_behind<S: Script>(
    conn: &mut dyn ConnectionLike,
    keys: &Keys,
    script: &S,
    first: &redis::Cmd,
) -> RedisResult<(Value, RedisResult<Value>)> {
    let (answered, reply, _) = sent(conn, keys, script, Some(first), None, false)?;
    Ok((answered.unwrap_or(Value::Nil), reply))
}

/// [`send`] and [`send_behind`]: `before`, the script, `after`, in one round trip; EVAL when
/// the server's script cache lost it, with `after` again when `again`.
fn sent<S: Script>(
    conn: &mut dyn ConnectionLike,
    keys: &Keys,
    script: &S,
    before: Option<&redis::Cmd>,
    after: Option<&redis::Cmd>,
    again: bool,
) -> RedisResult<(Option<Value>, RedisResult<Value>, Option<Value>)> {
    let lua = S::lua();
    let keys = S::keys(keys);
    let mut argv = Vec::new();
    script.push(&mut argv);
    let mut round =
        |verb: &str, text: &str, before: Option<&redis::Cmd>, after: Option<&redis::Cmd>| {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            if let Some(cmd) = before {
                pipe.add_command(cmd.clone());
            }
            pipe.cmd(verb)
                .arg(text)
                .arg(keys.len())
                .arg(&keys)
                .arg(&argv);
            if let Some(cmd) = after {
                pipe.add_command(cmd.clone());
            }
            let replies: Vec<Value> = pipe.query(conn)?;
            let mut replies = replies.into_iter();
            let first = before.map(|_| replies.next().unwrap_or(Value::Nil));
            let reply = replies.next().unwrap_or(Value::Nil);
            Ok::<_, redis::RedisError>((first, reply, replies.next()))
        };
    // Until an EVAL of it is answered (which caches it on that server), send it whole.
    let (first, mut reply, mut other) = if lua.flushed.load(Ordering::Relaxed) {
        round("EVAL", lua.body(), before, after)?
    } else {
        round("EVALSHA", lua.sha, before, after)?
    };
    if matches!(&reply, Value::ServerError(e) if e.code() == "NOSCRIPT") {
        lua.flushed.store(true, Ordering::Relaxed);
        let (_, retried, with) = round("EVAL", lua.body(), None, after.filter(|_| again))?;
        reply = retried;
        if again {
            other = with;
        }
    }
    if !matches!(&reply, Value::ServerError(_)) {
        lua.flushed.store(false, Ordering::Relaxed);
    }
    Ok((first, error_of(reply), other))
}

/// Send `script` once for the lock of each of `locks`, in one pipeline (one round trip): EVALSHA
/// each, then EVAL for those the server's script cache lost. Each reply as it came, an error
/// reply as an error (a Cluster's MOVED for a lock of another node's slot among them).
pub fn send_each<S: Script>(
    conn: &mut dyn ConnectionLike,
    locks: &[Keys],
    script: &S,
) -> RedisResult<Vec<RedisResult<Value>>> {
    let lua = S::lua();
    let mut argv = Vec::new();
    script.push(&mut argv);
    let round = |conn: &mut dyn ConnectionLike, verb: &str, text: &str, which: &[usize]| {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for &i in which {
            let keys = S::keys(&locks[i]);
            pipe.cmd(verb)
                .arg(text)
                .arg(keys.len())
                .arg(&keys)
                .arg(&argv);
        }
        pipe.query::<Vec<Value>>(conn)
    };
    let all: Vec<usize> = (0..locks.len()).collect();
    let mut replies = round(conn, "EVALSHA", lua.sha, &all)?;
    let lost: Vec<usize> = all
        .into_iter()
        .filter(|&i| matches!(&replies[i], Value::ServerError(e) if e.code() == "NOSCRIPT"))
        .collect();
    if !lost.is_empty() {
        for (i, reply) in lost.iter().zip(round(conn, "EVAL", lua.body(), &lost)?) {
            replies[*i] = reply;
        }
    }
    Ok(replies.into_iter().map(error_of).collect())
}

/// A reply, an error reply as an error.
fn error_of(reply: Value) -> RedisResult<Value> {
    match reply {
        Value::ServerError(e) => Err(e.into()),
        other => Ok(other),
    }
}

/// Run `script` for the lock of `keys` over a plain connection, its reply decoded (None: not a
/// reply it gives). For the chaos suite's replay; the client goes through [`send`] as well.
pub fn eval<S: Script>(
    conn: &mut dyn ConnectionLike,
    keys: &Keys,
    script: &S,
) -> RedisResult<Option<S::Reply>> {
    let (reply, _) = send(conn, keys, script, None, false)?;
    Ok(S::Reply::from_reply(&reply?))
}

#[cfg(test)]
mod tests;
