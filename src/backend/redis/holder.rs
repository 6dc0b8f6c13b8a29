//! What `inspect.lua` and `force_release.lua` answer, read into the admin commands' types, and
//! the holder's details as the acquire scripts take them (four arguments: `host`, `pid`,
//! `command`, `started`).

use redis::Value;

use crate::backend::redis::record::read_summary;
use crate::backend::redis::reply::{Fields, FromReply};
use crate::backend::redis::scripts::Args;
use crate::lock::Fence;
use crate::lock::{Forced, HeldAs, Holder, Inspected, LockInfo, Place, Several};

impl Args for Holder {
    fn push(&self, argv: &mut Vec<String>) {
        Args::push(self.host.as_str(), argv);
        Args::push(&self.pid, argv);
        Args::push(self.command.as_str(), argv);
        Args::push(&self.started, argv);
    }
    fn names(_field: &'static str, names: &mut Vec<&'static str>) {
        names.extend(["host", "pid", "command", "started"]);
    }
}

impl FromReply for Inspected {
    fn from_reply(value: &Value) -> Option<Self> {
        let mut f = Fields::of(value)?;
        let state = f.text()?;
        let stored_key = f.text()?;
        if state == "foreign" {
            let what = format!("a Redis {}", f.text()?);
            return f.end().then_some(Inspected::Foreign { stored_key, what });
        }
        let fence = f.int()?;
        let (ago, left, pttl) = (f.millis()?, f.millis()?, f.millis()?);
        let (queued, oldest, waiting) = (f.count()?, f.millis()?, f.count()?);
        let runs = read_summary(&mut f)?;
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
            stored_key,
            fence: Fence::Counter(fence),
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
                what: format!("a Redis {}", f.text()?),
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
    use std::time::Duration;

    use super::*;
    use crate::lock::Kind;

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
        assert_eq!(
            (free.fence.clone(), free.waiters(), free.owner()),
            (Fence::Counter(3), 2, None)
        );
        assert_eq!(free.stored_key, key);

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
            (None, HeldAs::Unknown(String::new()))
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
                stored_key: "redlock:{k}".into(),
                what: "a Redis hash".into()
            })
        );
        assert_eq!(
            Forced::from_reply(&reply(&["foreign", "7", "list", "1"])),
            Some(Forced::Foreign {
                what: "a Redis list".into(),
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
}
