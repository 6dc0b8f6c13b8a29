//! The lock protocol on PostgreSQL, as a run's lease drives it ([`Locker`]); each step one
//! statement:
//!
//! - **take**: a plain attempt (exclusive, not `--fair`, no `--min-interval`) is [`plain`], the
//!   classic lock table's one statement; every other, and one that statement turns away, is the
//!   `take` function of `schema.sql`: holders whose lease ended by the server's clock removed
//!   (their runs vanished), then, if there is room, a holder's row with its lease's end
//!   (`clock_timestamp()` + ttl) and the fencing token, the lock's counter raised by one, and the
//!   run's record; else the client is registered as a waiter, in the order it came, with the
//!   session it waits in (which holds an advisory lock while it lives: `session()`). Queued
//!   waiters ahead whose session has ended are passed over.
//! - **wait**: `LISTEN` on the waiter's own channel (first, then an attempt at once: a wake-up
//!   before the `LISTEN` was not heard), until a notification, the holder's lease's end (nothing
//!   notifies an expiry: the lease layer's hold is at most what was left of it), or the
//!   interrupt.
//! - **renew** (`renew`): the lease extended where our token still holds and has not ended;
//!   else the lock is lost, and the answer says whether another holds it alone (Theirs) or not
//!   (Gone), as a release that finds its lease ended says too.
//! - **release**: our holder's row deleted where our token still holds, the run's end recorded,
//!   and `NOTIFY` to the first waiter whose session lives in the same transaction (heard as it
//!   commits; the rows of those whose session ended removed on the way): one statement while
//!   our lease holds ([`plain::PLAIN_RELEASE`]), else the `release` function.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_postgres::types::Type;

use super::conn::{Conn, Heard, column, older_tables};
use super::plain;
use crate::backend::block::{self, Allowances, Block};
use crate::lock::record::{RunEnding, Tenure};
use crate::lock::{
    Acquire, Failure, Held, HeldAs, Holder, Interrupt, Kind, Locker, Renewal, RunSpec, Until,
};

/// How late a waiter's wait for a notification may end: it ends by the client's own timer at
/// its hold, so these only bound how long a server that froze meanwhile is waited for. They
/// are Redis's figures for its BLPOP, so that a wait ends at the same moments on every
/// backend, and a waiter counts as waiting as long.
const LISTEN: Allowances = Allowances {
    slack: Duration::from_secs(1),
    late: Duration::from_millis(150),
    min_hold: Duration::from_millis(1),
};

/// A run's lock on PostgreSQL.
pub(crate) struct PgLocker {
    conn: Conn,
    /// The lock's row: the prefix and its name.
    name: String,
    kind: Kind,
    fair: bool,
    min_interval: Option<Duration>,
    holder: Holder,
    /// The run's owner token, the holder's name in the lock's row and its record of runs.
    token: String,
    /// How long a waiter turned away stays registered.
    waiting: Duration,
    /// The lock's channel, once an attempt found it busy.
    channel: Option<String>,
    /// The lock, once taken: its fencing token and how long the run has held it.
    taken: Option<(i64, Tenure)>,
    /// An attempt failed before its answer came: it may have taken the lock.
    unanswered: bool,
    interrupt: Arc<Notify>,
}

impl PgLocker {
    pub(crate) fn new(conn: Conn, name: String, run: &RunSpec) -> Self {
        Self {
            conn,
            name,
            kind: run.kind,
            fair: run.fair,
            min_interval: run.min_interval,
            holder: run.holder.clone(),
            token: run.token.clone(),
            waiting: block::waiting_lifetime(run.waiting, LISTEN),
            channel: None,
            taken: None,
            unanswered: false,
            interrupt: Arc::new(Notify::new()),
        }
    }

    /// The plain lock's take and, if turned away, its place as a waiter ([`plain`]); None when
    /// the function must decide.
    fn plain(
        &mut self,
        token: &str,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Option<Acquire>, Failure> {
        let sql = plain::PLAIN_TAKE.replace("@schema@", self.conn.schema());
        let (ttl_ms, pid) = (ms(ttl), i64::from(self.holder.pid));
        let started = i64::try_from(self.holder.started).unwrap_or(0);
        let (kept, record_ttl) = (super::runs_kept(), super::record_ttl_ms());
        let answer = attempt(
            &mut self.conn,
            &mut self.unanswered,
            deadline,
            &sql,
            &[
                (&self.name, Type::TEXT),
                (&token, Type::TEXT),
                (&ttl_ms, Type::INT8),
                (&self.holder.host, Type::TEXT),
                (&pid, Type::INT8),
                (&self.holder.command, Type::TEXT),
                (&started, Type::INT8),
                (&kept, Type::INT4),
                (&record_ttl, Type::INT8),
            ],
        );
        let rows = match answer {
            // Tables of an older redlock, before this one's `init`: the function decides.
            Err(failure) if older_tables(&failure) => return Ok(None),
            answer => answer?,
        };
        if let Some(row) = rows.first() {
            let fence: i64 = column(row, "fence")?;
            self.taken = Some((fence, Tenure::new(ttl)));
            return Ok(Some(Acquire::Acquired { fence }));
        }
        let sql = plain::PLAIN_WAIT.replace("@schema@", self.conn.schema());
        let waiting_ms = ms(self.waiting);
        let answer = self.conn.query(
            deadline,
            &sql,
            &[
                (&self.name, Type::TEXT),
                (&token, Type::TEXT),
                (&waiting_ms, Type::INT8),
            ],
        );
        let rows = match answer {
            // Tables of redlock 0.3.0, which its hosts share until this redlock's `init`: no
            // place for the waiter's session. Their `take` function registers it, as 0.3.0's.
            Err(failure) if older_tables(&failure) => return Ok(None),
            answer => answer?,
        };
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        if column::<Option<bool>>(row, "undecided")?.unwrap_or(true) {
            return Ok(None);
        }
        self.channel = column(row, "channel")?;
        Ok(Some(Acquire::Busy {
            // At least 100 ms, as the function answers.
            remaining: from_ms(column(row, "remaining_ms")?)
                .map(|r| r.max(Duration::from_millis(100))),
            queued: false,
        }))
    }

    /// What `token`, holding nothing it knows of, finds in the lock's place: another holding it
    /// alone ([`Held::Theirs`]) or not ([`Held::Gone`]), as the functions answer it
    /// (`theirs_or_gone`); Gone on an older redlock's tables, which have no such function.
    fn theirs_or_gone(&mut self, token: &str, deadline: Instant) -> Result<Held, Failure> {
        let sql = format!(
            "SELECT {}.theirs_or_gone($1, $2, clock_timestamp()) AS found",
            self.conn.schema()
        );
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
            [(&self.name, Type::TEXT), (&token, Type::TEXT)];
        match self.conn.query(deadline, &sql, &params) {
            Ok(rows) => Ok(match rows.first() {
                Some(row) => held(column::<Option<String>>(row, "found")?.as_deref()),
                None => Held::Gone,
            }),
            Err(failure) if older_tables(&failure) => Ok(Held::Gone),
            Err(failure) => Err(failure),
        }
    }

    /// `SELECT schema.function(args...)`, with `n` parameters.
    fn call(&self, function: &str, n: usize) -> String {
        let args: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
        format!(
            "SELECT * FROM {}.{function}({})",
            self.conn.schema(),
            args.join(", ")
        )
    }
}

/// One attempt to take the lock: `unanswered` while no answer came (the server's refusal is
/// one: nothing was taken), for [`Locker::unanswered`].
fn attempt(
    conn: &mut Conn,
    unanswered: &mut bool,
    deadline: Instant,
    sql: &str,
    params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
) -> Result<Vec<tokio_postgres::Row>, Failure> {
    *unanswered = true;
    let answer = conn.query(deadline, sql, params);
    *unanswered = matches!(answer, Err(Failure::Unreachable(_)));
    answer
}

/// How the lock was held, as `renew` and `release` answer it: 'ours', 'theirs' (another holds
/// it alone) or 'gone'; anything else is gone.
fn held(said: Option<&str>) -> Held {
    match said {
        Some("ours") => Held::Ours,
        Some("theirs") => Held::Theirs,
        _ => Held::Gone,
    }
}

/// Milliseconds, as the functions take them.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A duration from milliseconds a function answered.
fn from_ms(ms: Option<i64>) -> Option<Duration> {
    ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

impl Locker for PgLocker {
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        let token: &str = &self.token.clone();
        let deadline = Instant::now() + timeout;
        if self.kind == Kind::Exclusive
            && !self.fair
            && self.min_interval.is_none()
            && let Some(decided) = self.plain(token, ttl, deadline)?
        {
            return Ok(decided);
        }
        let limit = match self.kind {
            Kind::Limit(n) => i32::try_from(n).unwrap_or(i32::MAX),
            _ => 0,
        };
        let (kind, ttl_ms, waiting_ms) = (self.kind.stored(), ms(ttl), ms(self.waiting));
        let interval = self.min_interval.map(ms);
        let pid = i64::from(self.holder.pid);
        let started = i64::try_from(self.holder.started).unwrap_or(0);
        let (kept, record_ttl) = (super::runs_kept(), super::record_ttl_ms());
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 14] = [
            (&self.name, Type::TEXT),
            (&token, Type::TEXT),
            (&ttl_ms, Type::INT8),
            (&kind, Type::TEXT),
            (&limit, Type::INT4),
            (&self.fair, Type::BOOL),
            (&interval, Type::INT8),
            (&waiting_ms, Type::INT8),
            (&self.holder.host, Type::TEXT),
            (&pid, Type::INT8),
            (&self.holder.command, Type::TEXT),
            (&started, Type::INT8),
            (&kept, Type::INT4),
            (&record_ttl, Type::INT8),
        ];
        let (take, old_take) = (self.call("take", 14), self.call("take", 12));
        let rows = match attempt(
            &mut self.conn,
            &mut self.unanswered,
            deadline,
            &take,
            &params,
        ) {
            // redlock 0.3.0's function, before this redlock's `init`: the record's limits its own.
            Err(failure) if older_tables(&failure) => attempt(
                &mut self.conn,
                &mut self.unanswered,
                deadline,
                &old_take,
                &params[..12],
            )?,
            answer => answer?,
        };
        let row = rows
            .first()
            .ok_or_else(|| Failure::Refused("the take answered no row".into()))?;
        let result: Option<String> = column(row, "result")?;
        self.channel = column(row, "channel")?;
        match result.as_deref().unwrap_or_default() {
            "acquired" => {
                let fence: i64 = column(row, "fence")?;
                self.taken = Some((fence, Tenure::new(ttl)));
                Ok(Acquire::Acquired { fence })
            }
            "busy" => Ok(Acquire::Busy {
                remaining: from_ms(column(row, "remaining_ms")?),
                queued: column::<Option<bool>>(row, "queued")?.unwrap_or(false),
            }),
            "skipped" => Ok(Acquire::Skipped {
                ago: from_ms(column(row, "ago_ms")?).unwrap_or_default(),
            }),
            "mismatch" => Ok(Acquire::Mismatch {
                found: HeldAs::from_stored(
                    &column::<Option<String>>(row, "found_kind")?.unwrap_or_default(),
                ),
            }),
            other => Err(Failure::Refused(
                format!(
                    "the take answered '{}', which this redlock does not know",
                    other
                )
                .into(),
            )),
        }
    }

    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        let block = Block::until(until, LISTEN);
        let Some(channel) = self.channel.clone() else {
            return Ok(true);
        };
        let limit = Instant::now() + block.limit;
        if self.conn.listen(&channel, limit)? {
            // Listening only from now: a release before this was not heard. Look again.
            return Ok(true);
        }
        match self.conn.heard(block.hold, limit, &self.interrupt) {
            Ok(Heard::Notified | Heard::Interrupted) => Ok(true),
            Ok(Heard::Nothing) => Ok(false),
            Err(failure) => Err(failure),
        }
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        crate::backend::blocking::interrupter(&self.interrupt)
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let token: &str = &self.token.clone();
        let sql = self.call("leave", 3);
        self.conn.query(
            Instant::now() + timeout,
            &sql,
            &[
                (&self.name, Type::TEXT),
                (&token, Type::TEXT),
                (&busy, Type::BOOL),
            ],
        )?;
        Ok(())
    }

    fn unanswered(&self) -> bool {
        self.unanswered
    }

    /// Beside the command's start: the release's statement run once on a lock no row names,
    /// which takes no row lock and writes nothing. A new session plans its first statements
    /// with cold catalog caches; paid here, that cost is off the release's path, and so off
    /// the hand-over's (measured in scripts/bench.sh). Its failure is nobody's: the release
    /// runs as it would have.
    fn settle(&mut self, timeout: Duration) {
        if self.taken.is_none() {
            return;
        }
        let sql = plain::PLAIN_RELEASE.replace("@schema@", self.conn.schema());
        let (none, zero, outcome) = ("", 0i64, "success");
        let _ = self.conn.query(
            Instant::now() + timeout,
            &sql,
            &[
                (&none, Type::TEXT),
                (&none, Type::TEXT),
                (&zero, Type::INT8),
                (&outcome, Type::TEXT),
                (&0i32, Type::INT4),
                (&zero, Type::INT8),
                (&None::<i64>, Type::INT8),
                (&zero, Type::INT8),
            ],
        );
    }

    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let token: &str = &self.token.clone();
        let sent = Instant::now();
        let Some((fence, _)) = self.taken else {
            return Ok(Renewal::Lost(self.theirs_or_gone(token, sent + timeout)?));
        };
        let sql = self.call("renew", 6);
        let lost = RunEnding::of(crate::exit::Outcome::LockLost, 0);
        let ttl_ms = ms(ttl);
        let rows = self.conn.query(
            sent + timeout,
            &sql,
            &[
                (&self.name, Type::TEXT),
                (&token, Type::TEXT),
                (&fence, Type::INT8),
                (&ttl_ms, Type::INT8),
                (&lost.outcome, Type::TEXT),
                (&lost.status, Type::INT4),
            ],
        )?;
        let said: Option<String> = match rows.first() {
            Some(row) => column(row, "renew")?,
            None => None,
        };
        match held(said.as_deref()) {
            Held::Ours => {}
            lost => return Ok(Renewal::Lost(lost)),
        }
        if let Some((_, tenure)) = &mut self.taken {
            tenure.renewed(sent, ttl);
        }
        Ok(Renewal::Extended)
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        let token: &str = &self.token.clone();
        let deadline = Instant::now() + timeout;
        let Some((fence, tenure)) = self.taken else {
            // An attempt whose answer was lost: undo whatever it took.
            let sql = self.call("leave", 3);
            let rows = self.conn.query(
                deadline,
                &sql,
                &[
                    (&self.name, Type::TEXT),
                    (&token, Type::TEXT),
                    (&false, Type::BOOL),
                ],
            )?;
            let had: Option<bool> = match rows.first() {
                Some(row) => column(row, "leave")?,
                None => None,
            };
            return match had {
                Some(true) => Ok(Held::Ours),
                _ => self.theirs_or_gone(token, deadline),
            };
        };
        let took = ms(tenure.held());
        let interval = self.min_interval.map(ms);
        let lost_by = i64::try_from(ended.lost.lost_by).unwrap_or(0);
        let record_ttl = super::record_ttl_ms();
        // The function takes all eleven (redlock 0.3.0's the first ten); the statement the first
        // seven.
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 11] = [
            (&self.name, Type::TEXT),
            (&token, Type::TEXT),
            (&fence, Type::INT8),
            (&ended.outcome, Type::TEXT),
            (&ended.status, Type::INT4),
            (&took, Type::INT8),
            (&interval, Type::INT8),
            (&ended.lost.lost_outcome, Type::TEXT),
            (&ended.lost.lost_status, Type::INT4),
            (&lost_by, Type::INT8),
            (&record_ttl, Type::INT8),
        ];
        // While our lease holds, one statement ([`plain::PLAIN_RELEASE`]); else the function.
        let sql = plain::PLAIN_RELEASE.replace("@schema@", self.conn.schema());
        let statement: Vec<_> = params[..7].to_vec();
        match self.conn.query(deadline, &sql, &statement) {
            Ok(rows) if !rows.is_empty() => {
                self.taken = None;
                self.prune(fence, deadline);
                return Ok(Held::Ours);
            }
            Ok(_) => {}
            Err(failure) if older_tables(&failure) => {}
            Err(failure) => return Err(failure),
        }
        let rows = match self
            .conn
            .query(deadline, &self.call("release", 11), &params)
        {
            Err(failure) if older_tables(&failure) => {
                self.conn
                    .query(deadline, &self.call("release", 10), &params[..10])?
            }
            answer => answer?,
        };
        let said: Option<String> = match rows.first() {
            Some(row) => column(row, "release")?,
            None => None,
        };
        self.taken = None;
        let held = held(said.as_deref());
        if held == Held::Ours {
            self.prune(fence, deadline);
        }
        Ok(held)
    }
}

/// One release in this many (those whose fencing token is a multiple of it) also removes other
/// locks unused for `RECORD_TTL`, up to `PRUNE_LIMIT` of them: a statement of its own after the
/// release, so that no take or release pays for planning its `DELETE` (measured: pruning in
/// every take and release cost a plain run about 2 ms, a sixth of its time; sampled, it costs
/// one run in 16 about that once). 32 in 16 releases is two locks removed per release, more
/// than the one a run can make, so that even a lock name used once per run is kept up with.
const PRUNE_EVERY: i64 = 16;

impl PgLocker {
    /// After the release of `fence`: the sampled prune ([`PRUNE_EVERY`]). Its failure changes
    /// nothing the run did (a later release prunes instead), and is said at `-v`.
    fn prune(&mut self, fence: i64, deadline: Instant) {
        if fence % PRUNE_EVERY != 0 {
            return;
        }
        let sql = format!(
            "SELECT {}.prune($1, clock_timestamp(), $2)::text",
            self.conn.schema()
        );
        let record_ttl = super::record_ttl_ms();
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
            [(&self.name, Type::TEXT), (&record_ttl, Type::INT8)];
        if let Err(failure) = self.conn.query(deadline, &sql, &params) {
            crate::report!(
                1,
                PruneFailed { "error" => failure.to_string() },
                "pruning locks unused for 40 days failed (a later release tries again): {failure}"
            );
        }
    }
}
