//! What a write of the lock must reach before it counts: `--min-replicas N` (that many replicas
//! have it: WAIT) and `--fsync` (the master's append-only file has it on disk, and with
//! `--min-replicas N` that many replicas' files: WAITAOF, Redis 7.2+ and Valkey 8). The command
//! goes beside the write, in the same round trip; its reply says whether the write counts.

use std::time::Duration;

use redis::Value;

/// What a write must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Durability {
    /// Replicas that must have it (0: none).
    pub replicas: u32,
    /// The append-only files must have it on disk (the master's, and the replicas').
    pub fsync: bool,
}

impl Durability {
    /// What the backend options `min-replicas` (`N`) and `fsync` ask for (each write, also
    /// the quorum's), None when neither does; an option of another kind is not read here (the
    /// capabilities refuse it). A count that is not one is an error's message.
    pub fn from_options(options: &[(&str, String)]) -> Result<Option<Self>, String> {
        let (mut replicas, mut fsync) = (0, false);
        for (name, value) in options {
            match *name {
                "min-replicas" => {
                    replicas = value.parse().map_err(|_| {
                        format!("--min-replicas takes a number of replicas, not '{value}'")
                    })?;
                }
                "fsync" => fsync = true,
                _ => {}
            }
        }
        Ok(Self::of(replicas, fsync))
    }

    /// What `--min-replicas` and `--fsync` ask for; None when neither does.
    pub fn of(replicas: u32, fsync: bool) -> Option<Self> {
        (replicas > 0 || fsync).then_some(Self { replicas, fsync })
    }

    /// The flags that ask for it, for messages: `--min-replicas`, `--fsync`, or both.
    pub fn flags(self) -> &'static str {
        match (self.replicas > 0, self.fsync) {
            (true, true) => "--fsync, --min-replicas",
            (false, true) => "--fsync",
            _ => "--min-replicas",
        }
    }

    /// The command that waits, up to `wait`, for the writes this connection made so far to
    /// reach what is asked: `WAIT N ms`, or `WAITAOF 1 N ms`.
    pub fn command(self, wait: Duration) -> redis::Cmd {
        let ms = wait.as_millis().max(1).to_string();
        if self.fsync {
            redis::cmd("WAITAOF")
                .arg(1)
                .arg(self.replicas)
                .arg(ms)
                .clone()
        } else {
            redis::cmd("WAIT").arg(self.replicas).arg(ms).clone()
        }
    }

    /// Whether `reply` (to [`Self::command`], which waited `wait`) says the write counts; if
    /// not, why (None: the reply is not one such a command gives).
    pub fn judge(self, reply: &Value, what: &str, wait: Duration) -> Option<Result<(), String>> {
        let within = crate::report::duration(wait);
        let (local, replicas) = match (self.fsync, reply) {
            (false, Value::Int(n)) => (true, *n),
            (true, Value::Array(counts)) => match counts.as_slice() {
                [Value::Int(local), Value::Int(replicas)] => (*local >= 1, *replicas),
                _ => return None,
            },
            _ => return None,
        };
        let wanted = self.replicas;
        Some(if !local {
            Err(format!(
                "the master did not fsync {what} to its append-only file within {within}"
            ))
        } else if replicas < i64::from(wanted) {
            let done = if self.fsync {
                "fsynced"
            } else {
                "acknowledged"
            };
            Err(format!(
                "only {replicas} of {wanted} replica(s) {done} {what} within {within}"
            ))
        } else {
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn what_each_option_asks_for() {
        assert_eq!(Durability::of(0, false), None);
        let replicas = Durability::of(2, false).unwrap();
        let fsync = Durability::of(0, true).unwrap();
        let both = Durability::of(1, true).unwrap();
        assert_eq!(
            replicas.command(ms(100)).get_packed_command(),
            redis::cmd("WAIT").arg(2).arg("100").get_packed_command()
        );
        assert_eq!(
            both.command(ms(0)).get_packed_command(),
            redis::cmd("WAITAOF")
                .arg(1)
                .arg(1)
                .arg("1")
                .get_packed_command()
        );
        assert_eq!(
            (replicas.flags(), fsync.flags(), both.flags()),
            ("--min-replicas", "--fsync", "--fsync, --min-replicas")
        );
    }

    #[test]
    fn replies_say_whether_the_write_counts() {
        let wait = ms(100);
        let replicas = Durability::of(2, false).unwrap();
        assert_eq!(
            replicas.judge(&Value::Int(2), "the lock", wait),
            Some(Ok(()))
        );
        assert_eq!(
            replicas.judge(&Value::Int(1), "the lock", wait),
            Some(Err(
                "only 1 of 2 replica(s) acknowledged the lock within 100ms".into()
            ))
        );
        let both = Durability::of(1, true).unwrap();
        let counts = |l, r| Value::Array(vec![Value::Int(l), Value::Int(r)]);
        assert_eq!(both.judge(&counts(1, 1), "the renewal", wait), Some(Ok(())));
        assert_eq!(
            both.judge(&counts(0, 1), "the renewal", wait),
            Some(Err(
                "the master did not fsync the renewal to its append-only file within 100ms".into()
            ))
        );
        assert_eq!(
            both.judge(&counts(1, 0), "the renewal", wait),
            Some(Err(
                "only 0 of 1 replica(s) fsynced the renewal within 100ms".into()
            ))
        );
        assert_eq!(both.judge(&Value::Int(1), "x", wait), None);
        assert_eq!(replicas.judge(&counts(1, 1), "x", wait), None);
    }
}
