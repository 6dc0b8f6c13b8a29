//! What the admin commands read of locks on PostgreSQL, or break: a lock's rows (its holders,
//! waiters and record of runs) read in one statement, so one snapshot, as JSON; times by the
//! server's clock. A forced release is one call of `force` (`schema.sql`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_postgres::types::Type;

use super::conn::{Conn, column};
use crate::lock::Fence;
use crate::lock::record::{Counts, RUNS_KEPT, Run, RunEnd, Summary};
use crate::lock::{
    Failure, Forced, HeldAs, Holder, Inspected, Kind, LockInfo, Node, Place, Runs, Several,
};

/// The database, as the admin commands read it.
pub(crate) struct PgNode {
    pub conn: Conn,
    pub prefix: String,
}

/// The statement that reads lock `$1` whole: one row of JSON (none if it has no row).
const READ: &str = "
SELECT json_build_object(
  'now', @schema@.ms(clock_timestamp()),
  'fence', l.fence,
  'last_success', @schema@.ms(l.last_success),
  'interval', l.success_interval_ms,
  'last_success_fence', l.last_success_fence,
  'last_ended_fence', l.last_ended_fence,
  'counts', l.counts,
  'holders', (SELECT COALESCE(json_agg(json_build_object(
        'token', h.token, 'fence', h.fence, 'kind', h.kind,
        'since', @schema@.ms(h.since),
        'left', GREATEST(0, @schema@.ms(h.until) - @schema@.ms(clock_timestamp())),
        'host', h.host, 'pid', h.pid, 'command', h.command, 'started', h.started)
        ORDER BY h.until), '[]')
      FROM @schema@.holders h WHERE h.name = l.name AND h.until >= clock_timestamp()),
  'waiting', (SELECT count(*) FROM @schema@.waiters w
      WHERE w.name = l.name AND w.until >= clock_timestamp()),
  'queued', (SELECT count(*) FROM @schema@.waiters w
      WHERE w.name = l.name AND w.queued AND w.until >= clock_timestamp()),
  'oldest', (SELECT @schema@.ms(clock_timestamp() - min(w.since))
      FROM @schema@.waiters w
      WHERE w.name = l.name AND w.queued AND w.until >= clock_timestamp()),
  'runs', (SELECT COALESCE(json_agg(json_build_object(
        'fence', r.fence, 'token', r.token, 'host', r.host, 'pid', r.pid,
        'started', @schema@.ms(r.started),
        'until', @schema@.ms(r.until),
        'ended', @schema@.ms(r.ended),
        'outcome', r.outcome, 'status', r.status,
        'holding', EXISTS (SELECT 1 FROM @schema@.holders h WHERE h.name = r.name
            AND h.fence = r.fence AND h.until >= clock_timestamp()))
        ORDER BY r.fence DESC), '[]')
      FROM @schema@.runs r WHERE r.name = l.name)
)::text AS lock, l.name
FROM @schema@.locks l WHERE l.name = ANY($1)";

impl PgNode {
    /// Lock `name` as one read found it (None: it has no row, never taken).
    fn read(&mut self, name: &str, timeout: Duration) -> Result<Option<Value>, Failure> {
        Ok(self
            .read_each(std::slice::from_ref(&name.to_owned()), timeout)?
            .pop()
            .flatten())
    }

    /// Locks `names` as one statement found them, in their order (None: no row).
    fn read_each(
        &mut self,
        names: &[String],
        timeout: Duration,
    ) -> Result<Vec<Option<Value>>, Failure> {
        let sql = READ.replace("@schema@", self.conn.schema());
        let rows: Vec<String> = names
            .iter()
            .map(|name| format!("{}{name}", self.prefix))
            .collect();
        let found =
            self.conn
                .query(Instant::now() + timeout, &sql, &[(&rows, Type::TEXT_ARRAY)])?;
        let mut by_name = std::collections::HashMap::new();
        for r in &found {
            let name: Option<String> = column(r, "name")?;
            let lock: Option<String> = column(r, "lock")?;
            if let (Some(name), Some(lock)) = (name, lock) {
                by_name.insert(name, serde_json::from_str::<Value>(&lock).ok());
            }
        }
        Ok(rows
            .iter()
            .map(|row| by_name.remove(row).flatten())
            .collect())
    }

    /// Lock `name` as [`Node::inspect`] shows it, from what [`Self::read_each`] found.
    fn inspected(&self, name: &str, lock: &Value) -> Inspected {
        let stored_key = format!("{}.locks '{}{name}'", self.conn.schema(), self.prefix);
        let runs = runs_of(lock);
        let now_ms = runs.summary.now_ms;
        let holders: Vec<&Value> = lock
            .get("holders")
            .and_then(Value::as_array)
            .map(|h| h.iter().collect())
            .unwrap_or_default();
        let kind = holders.first().map(|h| text(h, "kind")).unwrap_or_default();
        let held_as = if holders.is_empty() {
            HeldAs::Kind(Kind::Exclusive)
        } else {
            HeldAs::from_stored(&kind)
        };
        let done = match (int(lock, "last_success"), int(lock, "interval")) {
            (Some(at), Some(interval)) => {
                let ago = (now_ms as i64).saturating_sub(at).max(0);
                (interval > ago).then(|| (ms(Some(ago)), Some(ms(Some(interval - ago)))))
            }
            _ => None,
        };
        let queued = int(lock, "queued").unwrap_or(0);
        let mut info = LockInfo {
            stored_key,
            fence: Fence::Counter(int(lock, "fence").unwrap_or(0)),
            held: None,
            holder: None,
            several: None,
            done,
            queue: (queued > 0).then(|| (queued as u64, ms(int(lock, "oldest")))),
            waiting: int(lock, "waiting")
                .and_then(|w| u64::try_from(w).ok())
                .unwrap_or(0),
            runs: runs.summary,
        };
        match held_as.kind() {
            Some(Kind::Limit(_) | Kind::Shared) => {
                let places: Vec<Place> = holders
                    .iter()
                    .map(|h| Place {
                        token: text(h, "token"),
                        lease: ms(int(h, "left")),
                        holder: Some(holder_of(h)),
                        age: int(h, "since").map(|s| ms(Some((now_ms as i64).saturating_sub(s)))),
                    })
                    .collect();
                info.several = Some(Several {
                    held_as,
                    ttl: places.last().map(|p| p.lease),
                    places,
                });
            }
            _ => {
                if let Some(h) = holders.first() {
                    info.held = Some((text(h, "token"), Some(ms(int(h, "left")))));
                    info.holder = Some(holder_of(h));
                }
            }
        }
        Inspected::Lock(Box::new(info))
    }
}

fn int(value: &Value, name: &str) -> Option<i64> {
    value.get(name).and_then(Value::as_i64)
}

fn text(value: &Value, name: &str) -> String {
    value
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn ms(ms: Option<i64>) -> Duration {
    Duration::from_millis(ms.and_then(|ms| u64::try_from(ms).ok()).unwrap_or(0))
}

fn holder_of(h: &Value) -> Holder {
    Holder {
        host: text(h, "host"),
        pid: int(h, "pid")
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
        command: text(h, "command"),
        started: int(h, "started")
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(0),
    }
}

/// A run from its row.
fn run_of(r: &Value, now_ms: u64) -> Option<Run> {
    let started_ms = u64::try_from(int(r, "started")?).ok()?;
    let end = match r.get("outcome").and_then(Value::as_str) {
        Some("vanished") => RunEnd::Vanished {
            by: int(r, "until").and_then(|u| u64::try_from(u).ok()),
        },
        Some(outcome) => RunEnd::Ended {
            outcome: outcome.to_owned(),
            status: int(r, "status")
                .and_then(|s| i32::try_from(s).ok())
                .unwrap_or(0),
            took: Duration::from_millis(
                int(r, "ended")
                    .and_then(|e| u64::try_from(e).ok())
                    .unwrap_or(started_ms)
                    .saturating_sub(started_ms),
            ),
        },
        None if r.get("holding").and_then(Value::as_bool) == Some(true) => RunEnd::Running {
            so_far: Duration::from_millis(now_ms.saturating_sub(started_ms)),
        },
        // No end, and no holder: its lease ended without a release (the next take marks it).
        None => RunEnd::Vanished {
            by: int(r, "until").and_then(|u| u64::try_from(u).ok()),
        },
    };
    Some(Run {
        token: text(r, "token"),
        host: text(r, "host"),
        pid: int(r, "pid")
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
        started_ms,
        fence: int(r, "fence")?,
        end,
    })
}

/// The record of runs in `lock`, as `history` and `check` read it.
fn runs_of(lock: &Value) -> Runs {
    let now_ms = int(lock, "now")
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0);
    let all: Vec<Run> = lock
        .get("runs")
        .and_then(Value::as_array)
        .map(|runs| runs.iter().filter_map(|r| run_of(r, now_ms)).collect())
        .unwrap_or_default();
    let by_fence = |name: &str| {
        let fence = int(lock, name)?;
        all.iter()
            .find(|r| r.fence == fence)
            .filter(|r| !matches!(r.end, RunEnd::Running { .. }))
            .cloned()
    };
    let mut counts: Vec<(String, u64)> = lock
        .get("counts")
        .and_then(Value::as_object)
        .map(|counts| {
            counts
                .iter()
                .filter_map(|(label, n)| Some((label.clone(), n.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    counts.sort();
    let mut kept = all.clone();
    kept.truncate(RUNS_KEPT as usize);
    Runs {
        summary: Summary {
            now_ms,
            last_run: kept.first().cloned(),
            last_success: by_fence("last_success_fence"),
            last_ended: by_fence("last_ended_fence"),
            counts: Counts(counts),
        },
        runs: kept,
    }
}

impl Node for PgNode {
    /// The locks with a holder's row: a lock's row stays for ever (its counter must never go
    /// back), so `locks` holds every name ever used, where `holders` holds the few held now;
    /// `list` then reads each of these alone.
    fn names(&mut self, timeout: Duration) -> Result<BTreeSet<String>, Failure> {
        let sql = format!(
            "SELECT DISTINCT name FROM {}.holders WHERE starts_with(name, $1)",
            self.conn.schema()
        );
        let rows = self.conn.query(
            Instant::now() + timeout,
            &sql,
            &[(&self.prefix, Type::TEXT)],
        )?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let name: Option<String> = r.try_get(0).ok()?;
                name?.strip_prefix(&self.prefix).map(str::to_owned)
            })
            .collect())
    }

    fn inspect(&mut self, name: &str, timeout: Duration) -> Result<Inspected, Failure> {
        let lock = self.read(name, timeout)?.unwrap_or(Value::Null);
        Ok(self.inspected(name, &lock))
    }

    /// A batch of `list`'s in one statement: a list of thousands of held locks in as many
    /// statements took seconds.
    fn inspect_each(
        &mut self,
        names: &[String],
        _with_runs: bool,
        timeout: Duration,
    ) -> Result<Vec<Option<Inspected>>, Failure> {
        Ok(self
            .read_each(names, timeout)?
            .into_iter()
            .zip(names)
            .map(|(lock, name)| Some(self.inspected(name, &lock.unwrap_or(Value::Null))))
            .collect())
    }

    fn runs(&mut self, name: &str, timeout: Duration) -> Result<Runs, Failure> {
        let lock = self.read(name, timeout)?.unwrap_or(Value::Null);
        Ok(runs_of(&lock))
    }

    fn force_release(
        &mut self,
        name: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        let sql = format!("SELECT * FROM {}.force($1, $2)", self.conn.schema());
        let row = format!("{}{name}", self.prefix);
        let rows = self.conn.query(
            Instant::now() + timeout,
            &sql,
            &[(&row, Type::TEXT), (&token, Type::TEXT)],
        )?;
        let Some(r) = rows.first() else {
            return Err(Failure::Refused(
                "the forced release answered no row".into(),
            ));
        };
        let text = |name: &str| column::<Option<String>>(r, name).map(Option::unwrap_or_default);
        let int = |name: &str| column::<Option<i64>>(r, name).map(|v| v.unwrap_or(0));
        let result = text("result")?;
        let fence = int("fence")?;
        let holders = u64::try_from(int("holders")?).unwrap_or(0);
        let held_as = HeldAs::from_stored(&text("kind")?);
        Ok(match result.as_str() {
            "free" => Forced::Free {
                fence,
                cleared: holders,
            },
            "other" => Forced::Other {
                token: text("token")?,
                fence,
            },
            "not_a_holder" => Forced::NotAHolder {
                held_as,
                holders,
                fence,
            },
            "several" => Forced::Several {
                held_as,
                holders,
                fence,
            },
            "removed" => Forced::Removed {
                token: text("token")?,
                fence,
                holder: Some(Holder {
                    host: text("host")?,
                    pid: u32::try_from(int("pid")?).unwrap_or(0),
                    command: text("command")?,
                    started: u64::try_from(int("started")?).unwrap_or(0),
                }),
                held_as,
                left: holders,
            },
            other => {
                return Err(Failure::Refused(
                    format!(
                        "the forced release answered '{}', which this redlock does not know",
                        crate::report::one_line(other)
                    )
                    .into(),
                ));
            }
        })
    }
}
