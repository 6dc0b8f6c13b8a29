//! Who holds a lock, as stored beside it (host, pid, command line, start time), and what the
//! admin commands read or break: a lock's state (one holder or several, and its waiters) and a
//! forced release's result, decoded from the replies of `inspect.lua` and `force_release.lua`.

use std::time::Duration;

use redis::Value;

use crate::lock::counter::Foreign;
use crate::lock::record::Summary;
use crate::lock::reply::{Fields, FromReply};
use crate::lock::scripts::args;
use crate::lock::{HeldAs, Kind};

args! {
    /// Who holds (or is taking) a lock, as stored beside it for `redlock status`; the acquire
    /// scripts take it as four arguments (`host`, `pid`, `command`, `started`).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Holder {
        pub host: String,
        pub pid: u32,
        /// The command line, shell-quoted, cut to [`MAX_COMMAND`] bytes (see [`cut_command`]).
        pub command: String,
        /// Unix seconds, by the holder's clock.
        pub started: u64,
    }
}
/// The most of a command line stored beside a lock, in bytes: a lock's record stays a few KiB
/// however long the command line (up to the kernel's 2 MiB and more), so that `status` and
/// `list` of a semaphore's holders stay far below the 4 MiB a reply may have.
pub(crate) const MAX_COMMAND: usize = 1024;

/// `line` cut to its first [`MAX_COMMAND`] bytes (on a character boundary), followed by
/// `… (cut from N bytes)`; a line no longer than that as it is.
pub(crate) fn cut_command(line: String) -> String {
    if line.len() <= MAX_COMMAND {
        return line;
    }
    let mut end = MAX_COMMAND;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut from {} bytes)", &line[..end], line.len())
}

impl Holder {
    /// This process, about to run `argv` (its command line cut by [`cut_command`]).
    pub fn current(argv: &[std::ffi::OsString]) -> Self {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let command = argv
            .iter()
            .map(|a| crate::report::shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ");
        let command = cut_command(command);
        Self {
            host,
            pid: std::process::id(),
            command,
            started,
        }
    }
}

/// What `inspect.lua` found at a lock's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inspected {
    /// A lock redlock made (held or free).
    Lock(Box<LockInfo>),
    /// A Redis key of this type that redlock did not make, at the lock key `redis_key`.
    Foreign {
        redis_key: String,
        redis_type: String,
    },
}

/// A lock's state as `redlock status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The lock's own Redis key (`PREFIX{NAME}`).
    pub redis_key: String,
    /// The fencing counter (0 when never taken).
    pub fence: i64,
    /// What its key holds instead of a counter redlock wrote (then `fence` is 0, and means
    /// nothing).
    pub foreign_fence: Option<Foreign>,
    /// The one exclusive holder's token and remaining lease (None when no expiry), when so held.
    pub held: Option<(String, Option<Duration>)>,
    /// The exclusive holder's details, when held by a redlock that stored them.
    pub holder: Option<Holder>,
    /// When held by several at once (a semaphore's slots, shared holders): how, and who.
    pub several: Option<Several>,
    /// How long ago a run last succeeded, and how long that record still holds off new runs.
    pub done: Option<(Duration, Option<Duration>)>,
    /// Live waiters in the queue (`--fair` ones, and exclusive ones behind shared holders),
    /// and how long the oldest of them has waited (None: nobody is queued).
    pub queue: Option<(u64, Duration)>,
    /// Waiters of any kind turned away lately and not yet gone (the registry of waiters).
    pub waiting: u64,
    /// The record of its runs: the last one, the last success, the counters.
    pub runs: Summary,
}

/// A lock held by several at once: a semaphore's slots (`--limit N`) or shared holders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Several {
    /// How they hold it, as recorded.
    pub held_as: HeldAs,
    /// When the last lease ends (None: no expiry).
    pub ttl: Option<Duration>,
    /// The live holders, the soonest lease end first.
    pub places: Vec<Place>,
}

/// One of several holders of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub token: String,
    /// The lease left, by the server's clock.
    pub lease: Duration,
    /// Its details, when stored.
    pub holder: Option<Holder>,
    /// How long it has held its place, by the server's clock (None: not recorded).
    pub age: Option<Duration>,
}

impl Several {
    /// How the holders hold it; None when not recorded (or not understood).
    pub fn kind(&self) -> Option<Kind> {
        self.held_as.kind().filter(|k| *k != Kind::Exclusive)
    }
}

impl LockInfo {
    /// Held by anyone: one exclusive holder or several.
    pub fn is_held(&self) -> bool {
        self.held.is_some() || self.several.is_some()
    }

    /// Who holds it, as one string a quorum's nodes can agree on: the exclusive holder's token,
    /// or the tokens of several holders, sorted, joined by spaces.
    pub fn owner(&self) -> Option<String> {
        if let Some((token, _)) = &self.held {
            return Some(token.clone());
        }
        let several = self.several.as_ref()?;
        let mut tokens: Vec<&str> = several.places.iter().map(|p| p.token.as_str()).collect();
        tokens.sort_unstable();
        Some(tokens.join(" "))
    }

    /// The waiters to show: the registry's count, and never fewer than are queued (a client
    /// too old to register still queues).
    pub fn waiters(&self) -> u64 {
        self.waiting.max(self.queue.map_or(0, |(n, _)| n))
    }
}

impl FromReply for Inspected {
    fn from_reply(value: &Value) -> Option<Self> {
        let mut f = Fields::of(value)?;
        let state = f.text()?;
        let redis_key = f.text()?;
        if state == "foreign" {
            let redis_type = f.text()?;
            return f.end().then_some(Inspected::Foreign {
                redis_key,
                redis_type,
            });
        }
        let fence = f.int()?;
        let (ago, left, pttl) = (f.millis()?, f.millis()?, f.millis()?);
        let (queued, oldest, waiting) = (f.count()?, f.millis()?, f.count()?);
        let runs = Summary::read(&mut f)?;
        let (mut held, mut holder, mut several) = (None, None, None);
        match state.as_str() {
            "free" => {}
            "lock" => {
                held = Some((f.text()?, pttl));
                holder = holder_from(&mut f)?;
            }
            "several" => {
                let held_as = HeldAs::from_stored(&f.text()?);
                let mut places = Vec::new();
                while !f.end() {
                    places.push(Place {
                        token: f.text()?,
                        lease: f.millis()??,
                        holder: holder_from(&mut f)?,
                        age: f.millis()?,
                    });
                }
                several = Some(Several {
                    held_as,
                    ttl: pttl,
                    places,
                });
            }
            _ => return None,
        }
        if !f.end() {
            return None;
        }
        Some(Inspected::Lock(Box::new(LockInfo {
            redis_key,
            fence,
            foreign_fence: None,
            held,
            holder,
            several,
            done: ago.map(|ago| (ago, left)),
            queue: match (queued, oldest) {
                (n, Some(oldest)) if n > 0 => Some((n, oldest)),
                _ => None,
            },
            waiting,
            runs,
        })))
    }
}

/// What a forced release removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forced {
    /// The lock was free; only its `--fair` queue was cleared, of `cleared` waiters. The fencing
    /// counter as it is.
    Free { fence: i64, cleared: u64 },
    /// The lock holds `token`, not the one expected; nothing changed.
    Other { token: String, fence: i64 },
    /// Held by several (`held_as`: how), none with the token expected; nothing changed.
    NotAHolder {
        held_as: HeldAs,
        holders: u64,
        fence: i64,
    },
    /// Held by several and no token named one of them; nothing changed.
    Several {
        held_as: HeldAs,
        holders: u64,
        fence: i64,
    },
    /// Removed the holder of `token` (the lock, or its place among several); the fencing
    /// counter is now `fence`.
    Removed {
        token: String,
        fence: i64,
        holder: Option<Holder>,
        /// How it was held: alone, or as one of several.
        held_as: HeldAs,
        /// Holders left (0 for an exclusive lock).
        left: u64,
    },
    /// The lock key was a Redis key of `redis_type` that redlock did not make: deleted (the
    /// fencing counter advanced to `fence`), or, when a token was expected, left alone (it
    /// holds none).
    Foreign {
        redis_type: String,
        fence: i64,
        removed: bool,
    },
    /// The fencing counter holds something redlock did not write: left alone, never advanced.
    /// `gone`: the lock is free now (removed, or free already), or with `token` (the one
    /// expected) that holder is not among its holders any more; else it is still there.
    Unfenced {
        foreign: Foreign,
        token: Option<String>,
        gone: bool,
    },
}

impl FromReply for Forced {
    fn from_reply(value: &Value) -> Option<Self> {
        let mut f = Fields::of(value)?;
        let what = f.text()?;
        let fence = f.int()?;
        let forced = match what.as_str() {
            "free" => Forced::Free {
                fence,
                cleared: f.count()?,
            },
            "other" => Forced::Other {
                token: f.text()?,
                fence,
            },
            "not_a_holder" => Forced::NotAHolder {
                held_as: HeldAs::from_stored(&f.text()?),
                holders: f.count()?,
                fence,
            },
            "several" => Forced::Several {
                held_as: HeldAs::from_stored(&f.text()?),
                holders: f.count()?,
                fence,
            },
            "removed" => Forced::Removed {
                token: f.text()?,
                fence,
                holder: holder_from(&mut f)?,
                held_as: HeldAs::from_stored(&f.text()?),
                left: f.count()?,
            },
            "foreign" => Forced::Foreign {
                redis_type: f.text()?,
                fence,
                removed: f.int()? == 1,
            },
            _ => return None,
        };
        f.end().then_some(forced)
    }
}

/// A holder from the next four fields (host, pid, command line, start time); Some(None) when
/// not recorded (no host).
fn holder_from(f: &mut Fields) -> Option<Option<Holder>> {
    let (host, pid, command, started) = (f.text()?, f.text()?, f.text()?, f.text()?);
    Some((!host.is_empty()).then(|| Holder {
        host,
        pid: pid.parse().unwrap_or(0),
        command,
        started: started.parse().unwrap_or(0),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_command_line_is_cut_on_a_character_boundary_and_says_so() {
        let short = "x".repeat(MAX_COMMAND);
        assert_eq!(cut_command(short.clone()), short);
        let long = "c".repeat(1_680_000);
        assert_eq!(
            cut_command(long),
            format!("{}… (cut from 1680000 bytes)", "c".repeat(MAX_COMMAND))
        );
        // 'é' is two bytes: the 1024th byte is the first half of one, so the cut is before it.
        let accents = format!("x{}", "é".repeat(MAX_COMMAND));
        let cut = cut_command(accents);
        assert_eq!(
            cut,
            format!(
                "x{}… (cut from 2049 bytes)",
                "é".repeat(MAX_COMMAND / 2 - 1)
            )
        );
        assert!(cut.len() < MAX_COMMAND + 30);
    }

    /// A script's array reply: numbers as integers (as Lua sends them), the rest as strings;
    /// `{}` is an empty summary of the record of runs.
    fn reply(items: &[&str]) -> Value {
        Value::Array(
            items
                .iter()
                .map(|s| match s.parse::<i64>() {
                    Ok(i) => Value::Int(i),
                    Err(_) if *s == "{}" => Value::Array(vec![
                        Value::Int(1),
                        Value::Nil,
                        Value::Nil,
                        Value::Nil,
                        Value::Array(vec![]),
                    ]),
                    Err(_) => Value::BulkString(s.as_bytes().to_vec()),
                })
                .collect(),
        )
    }

    fn info(items: &[&str]) -> Option<LockInfo> {
        match Inspected::from_reply(&reply(items))? {
            Inspected::Lock(info) => Some(*info),
            Inspected::Foreign { .. } => None,
        }
    }

    #[test]
    fn inspect_replies_parse_for_each_way_a_lock_is_held() {
        let key = "redlock:{k}";
        let free = info(&["free", key, "3", "-1", "-2", "-2", "0", "-1", "2", "{}"]).unwrap();
        assert!(!free.is_held());
        assert_eq!((free.fence, free.waiters(), free.owner()), (3, 2, None));
        assert_eq!(free.redis_key, key);

        let one = [
            "lock", key, "4", "-1", "-2", "900", "1", "50", "0", "{}", "t", "h", "7", "sleep 1",
            "9",
        ];
        let one = info(&one).unwrap();
        assert_eq!(
            one.held,
            Some(("t".into(), Some(Duration::from_millis(900))))
        );
        assert_eq!(one.holder.as_ref().map(|h| h.pid), Some(7));
        // Queued waiters count even when an older client did not register them.
        assert_eq!(one.waiters(), 1);
        // Details recorded for another token are not this holder's.
        let unknown = info(&[
            "lock", key, "4", "-1", "-2", "900", "0", "-1", "0", "{}", "t", "", "", "", "",
        ]);
        assert_eq!(unknown.unwrap().holder, None);

        let set = [
            "several", key, "5", "-1", "-2", "2000", "0", "-1", "1", "{}", "limit 3", //
            "a", "1500", "h", "8", "run a", "9", "300", //
            "b", "2000", "", "", "", "", "-1",
        ];
        let set = info(&set).unwrap();
        let several = set.several.as_ref().unwrap();
        assert_eq!(several.kind(), Some(Kind::Limit(3)));
        assert_eq!(several.places.len(), 2);
        assert_eq!(several.places[0].age, Some(Duration::from_millis(300)));
        assert_eq!(several.places[1].holder, None);
        assert_eq!(several.places[1].age, None);
        assert_eq!(set.owner().as_deref(), Some("a b"));
        assert!(set.held.is_none() && set.is_held());
        let unrecorded = [
            "several", key, "5", "-1", "-2", "2000", "0", "-1", "0", "{}", "",
        ];
        let unrecorded = info(&unrecorded).unwrap().several.unwrap();
        assert_eq!(
            (unrecorded.kind(), unrecorded.held_as),
            (None, HeldAs::Unrecorded)
        );

        // A holder cut short, a field too many, an unknown state: not replies.
        let short = [
            "several", key, "5", "-1", "-2", "2000", "0", "-1", "1", "{}", "shared", "a", "1500",
        ];
        assert_eq!(info(&short), None);
        assert_eq!(
            info(&[
                "free", key, "3", "-1", "-2", "-2", "0", "-1", "2", "{}", "x"
            ]),
            None
        );
        assert_eq!(
            info(&["gone", key, "3", "-1", "-2", "-2", "0", "-1", "2", "{}"]),
            None
        );
    }

    #[test]
    fn a_key_redlock_did_not_make_is_its_own_case() {
        assert_eq!(
            Inspected::from_reply(&reply(&["foreign", "redlock:{k}", "hash"])),
            Some(Inspected::Foreign {
                redis_key: "redlock:{k}".into(),
                redis_type: "hash".into()
            })
        );
        assert_eq!(
            Forced::from_reply(&reply(&["foreign", "7", "list", "1"])),
            Some(Forced::Foreign {
                redis_type: "list".into(),
                fence: 7,
                removed: true
            })
        );
    }

    #[test]
    fn force_release_replies_parse() {
        let removed = ["removed", "6", "a", "h", "8", "run a", "9", "limit 2", "1"];
        match Forced::from_reply(&reply(&removed)) {
            Some(Forced::Removed {
                token,
                fence: 6,
                holder: Some(h),
                held_as,
                left: 1,
            }) => {
                assert_eq!((token.as_str(), h.pid), ("a", 8));
                assert_eq!(held_as, HeldAs::Kind(Kind::Limit(2)));
            }
            other => panic!("{other:?}"),
        }
        let alone = ["removed", "6", "t", "", "", "", "", "lock", "0"];
        assert!(matches!(
            Forced::from_reply(&reply(&alone)),
            Some(Forced::Removed {
                holder: None,
                held_as: HeldAs::Kind(Kind::Exclusive),
                left: 0,
                ..
            })
        ));
        assert_eq!(
            Forced::from_reply(&reply(&["several", "5", "shared", "3"])),
            Some(Forced::Several {
                held_as: HeldAs::Kind(Kind::Shared),
                holders: 3,
                fence: 5
            })
        );
        assert_eq!(
            Forced::from_reply(&reply(&["not_a_holder", "5", "limit 2", "2"])),
            Some(Forced::NotAHolder {
                held_as: HeldAs::Kind(Kind::Limit(2)),
                holders: 2,
                fence: 5
            })
        );
        assert_eq!(
            Forced::from_reply(&reply(&["other", "5", "t"])),
            Some(Forced::Other {
                token: "t".into(),
                fence: 5
            })
        );
        assert_eq!(
            Forced::from_reply(&reply(&["free", "5", "2"])),
            Some(Forced::Free {
                fence: 5,
                cleared: 2
            })
        );
        assert_eq!(Forced::from_reply(&reply(&["removed", "5", "t"])), None);
        assert_eq!(Forced::from_reply(&reply(&["x"])), None);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(crate::report::shell_quote("./backup.sh"), "./backup.sh");
        assert_eq!(
            crate::report::shell_quote("--out=/tmp/x,y"),
            "--out=/tmp/x,y"
        );
        assert_eq!(crate::report::shell_quote(""), "''");
        assert_eq!(crate::report::shell_quote("a b"), "'a b'");
        assert_eq!(crate::report::shell_quote("it's"), r"'it'\''s'");
        assert_eq!(crate::report::shell_quote("$HOME"), "'$HOME'");
    }
}
