//! Who holds a lock, as stored beside it (host, pid, command line, start time), and what the
//! admin commands read or break: a lock's state (one holder or several, and its waiters) and a
//! forced release's result, parsed from the replies of `inspect.lua` and `force_release.lua`.

use std::time::Duration;

use crate::lock::{Keys, Kind};

/// Who holds (or is taking) a lock, as stored beside it for `redlock status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holder {
    pub host: String,
    pub pid: u32,
    /// The command line, shell-quoted.
    pub command: String,
    /// Unix seconds, by the holder's clock.
    pub started: u64,
}

impl Holder {
    /// This process, about to run `argv`.
    pub fn current(argv: &[std::ffi::OsString]) -> Self {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let command = argv
            .iter()
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            host,
            pid: std::process::id(),
            command,
            started,
        }
    }
}

/// `word` as the shell would need it: bare when safe, else in single quotes.
pub(crate) fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A lock's state as `redlock status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockInfo {
    pub keys: Keys,
    /// The fencing counter (0 when never taken).
    pub fence: i64,
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
}

/// A lock held by several at once: a semaphore's slots (`--limit N`) or shared holders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Several {
    /// How they hold it, as stored: `limit N`, `shared` (`set` when not recorded).
    pub used: String,
    /// When the last lease ends (None: no expiry).
    pub ttl: Option<Duration>,
    /// The live holders, the soonest lease end first.
    pub places: Vec<Place>,
}

/// One of several holders of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
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
        Kind::from_stored(&self.used).filter(|k| *k != Kind::Exclusive)
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

    /// Parse `inspect.lua`'s reply (as strings); None when it is not one.
    pub(super) fn parse(keys: Keys, items: &[String]) -> Option<LockInfo> {
        let int = |i: usize| items.get(i).and_then(|s| s.parse::<i64>().ok());
        let (fence, ago, left, pttl, queued, oldest, waiting) = (
            int(0)?,
            int(1)?,
            int(2)?,
            int(3)?,
            int(4)?,
            int(5)?,
            int(6)?,
        );
        let used = items.get(7)?.as_str();
        let rest = &items[8..];
        let (mut held, mut holder, mut several) = (None, None, None);
        match used {
            "" => {}
            "lock" => {
                held = Some((rest.first()?.clone(), ms(pttl)));
                holder = holder_from(&rest[1..]);
            }
            _ => {
                let places = rest
                    .chunks(7)
                    .map(|p| match p {
                        [token, lease, host, pid, command, started, age] => Some(Place {
                            token: token.clone(),
                            lease: ms(lease.parse().ok()?)?,
                            holder: holder_from(&[
                                host.clone(),
                                pid.clone(),
                                command.clone(),
                                started.clone(),
                            ]),
                            age: age.parse().ok().and_then(ms),
                        }),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                several = Some(Several {
                    used: used.to_owned(),
                    ttl: ms(pttl),
                    places,
                });
            }
        }
        Some(LockInfo {
            keys,
            fence,
            held,
            holder,
            several,
            done: ms(ago).map(|ago| (ago, ms(left))),
            queue: match (u64::try_from(queued), ms(oldest)) {
                (Ok(n), Some(oldest)) if n > 0 => Some((n, oldest)),
                _ => None,
            },
            waiting: u64::try_from(waiting).unwrap_or(0),
        })
    }
}

/// Milliseconds from Redis as a duration; None for the negative markers (-1, -2).
fn ms(v: i64) -> Option<Duration> {
    u64::try_from(v).ok().map(Duration::from_millis)
}

/// What a forced release removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Forced {
    /// The lock was free; only its `--fair` queue was cleared, of `cleared` waiters. The fencing
    /// counter as it is.
    Free { fence: i64, cleared: u64 },
    /// The lock holds `token`, not the one expected; nothing changed.
    Other { token: String, fence: i64 },
    /// Held by several (`used`: how, as stored), none with the token expected; nothing changed.
    NotAHolder {
        used: String,
        holders: u64,
        fence: i64,
    },
    /// Held by several and no token named one of them; nothing changed.
    Several {
        used: String,
        holders: u64,
        fence: i64,
    },
    /// Removed the holder of `token` (the lock, or its place among several); the fencing
    /// counter is now `fence`.
    Removed {
        token: String,
        fence: i64,
        holder: Option<Holder>,
        /// How it was held: `lock` (alone), `limit N`, `shared`.
        used: String,
        /// Holders left (0 for an exclusive lock).
        left: u64,
    },
}

impl Forced {
    /// Parse `force_release.lua`'s reply (as strings); None when it is not one.
    pub(super) fn parse(items: &[String]) -> Option<Forced> {
        let fence = items.get(1)?.parse::<i64>().ok()?;
        let int = |i: usize| items.get(i).and_then(|s| s.parse::<u64>().ok());
        Some(match (items.first()?.as_str(), items.len()) {
            ("0", _) => Forced::Free {
                fence,
                cleared: int(2).unwrap_or(0),
            },
            ("-1", 3) => Forced::Other {
                token: items[2].clone(),
                fence,
            },
            ("-1", 5) => Forced::NotAHolder {
                used: items[3].clone(),
                holders: int(4)?,
                fence,
            },
            ("-2", 4) => Forced::Several {
                used: items[2].clone(),
                holders: int(3)?,
                fence,
            },
            ("1", 9..) => Forced::Removed {
                token: items[2].clone(),
                fence,
                holder: holder_from(&items[3..7]),
                used: items[7].clone(),
                left: int(8)?,
            },
            _ => return None,
        })
    }
}

/// A holder from [host, pid, command line, start time]; None when not recorded.
pub(super) fn holder_from(items: &[String]) -> Option<Holder> {
    match items {
        [host, pid, command, started, ..] if !host.is_empty() => Some(Holder {
            host: host.clone(),
            pid: pid.parse().unwrap_or(0),
            command: command.clone(),
            started: started.parse().unwrap_or(0),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn inspect_replies_parse_for_each_way_a_lock_is_held() {
        let keys = Keys::new("redlock:", "k");
        let free = LockInfo::parse(
            keys.clone(),
            &strings(&["3", "-1", "-2", "-2", "0", "-1", "2", ""]),
        )
        .unwrap();
        assert!(!free.is_held());
        assert_eq!((free.fence, free.waiters(), free.owner()), (3, 2, None));

        let one = strings(&[
            "4", "-1", "-2", "900", "1", "50", "0", "lock", "t", "h", "7", "sleep 1", "9",
        ]);
        let one = LockInfo::parse(keys.clone(), &one).unwrap();
        assert_eq!(
            one.held,
            Some(("t".into(), Some(Duration::from_millis(900))))
        );
        assert_eq!(one.holder.as_ref().map(|h| h.pid), Some(7));
        // Queued waiters count even when an older client did not register them.
        assert_eq!(one.waiters(), 1);

        let set = strings(&[
            "5", "-1", "-2", "2000", "0", "-1", "1", "limit 3", //
            "a", "1500", "h", "8", "run a", "9", "300", //
            "b", "2000", "", "", "", "", "-1",
        ]);
        let set = LockInfo::parse(keys.clone(), &set).unwrap();
        let several = set.several.as_ref().unwrap();
        assert_eq!(several.kind(), Some(Kind::Limit(3)));
        assert_eq!(several.places.len(), 2);
        assert_eq!(several.places[0].age, Some(Duration::from_millis(300)));
        assert_eq!(several.places[1].holder, None);
        assert_eq!(several.places[1].age, None);
        assert_eq!(set.owner().as_deref(), Some("a b"));
        assert!(set.held.is_none() && set.is_held());

        // A holder cut short is not a reply.
        let short = strings(&[
            "5", "-1", "-2", "2000", "0", "-1", "1", "shared", "a", "1500",
        ]);
        assert_eq!(LockInfo::parse(keys, &short), None);
    }

    #[test]
    fn force_release_replies_parse() {
        let removed = strings(&["1", "6", "a", "h", "8", "run a", "9", "limit 2", "1"]);
        match Forced::parse(&removed) {
            Some(Forced::Removed {
                token,
                fence: 6,
                holder: Some(h),
                used,
                left: 1,
            }) => {
                assert_eq!((token.as_str(), h.pid, used.as_str()), ("a", 8, "limit 2"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Forced::parse(&strings(&["-2", "5", "shared", "3"])),
            Some(Forced::Several {
                used: "shared".into(),
                holders: 3,
                fence: 5
            })
        );
        assert_eq!(
            Forced::parse(&strings(&["-1", "5", "", "limit 2", "2"])),
            Some(Forced::NotAHolder {
                used: "limit 2".into(),
                holders: 2,
                fence: 5
            })
        );
        assert_eq!(
            Forced::parse(&strings(&["-1", "5", "t"])),
            Some(Forced::Other {
                token: "t".into(),
                fence: 5
            })
        );
        assert_eq!(Forced::parse(&strings(&["1", "5", "t"])), None);
        assert_eq!(Forced::parse(&strings(&["x"])), None);
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("./backup.sh"), "./backup.sh");
        assert_eq!(shell_quote("--out=/tmp/x,y"), "--out=/tmp/x,y");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }
}
