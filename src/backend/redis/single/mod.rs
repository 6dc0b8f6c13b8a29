//! A lock on one Redis server: one URL, a Sentinel service's master, or the Cluster node that
//! owns the lock's slot, over the one connection `transport` keeps to it.

use std::time::{Duration, Instant};

use redis::Value;

use crate::backend::block::Block;
use crate::backend::redis::Keys;
use crate::backend::redis::durable::Durability;
use crate::backend::redis::preflight::{self, Preflight};
use crate::backend::redis::record::Kept;
use crate::backend::redis::reply::{FromReply, unexpected};
use crate::backend::redis::scripts::calls::{AcquireReply, Attempt, Finish, TurnedAway};
use crate::backend::redis::scripts::{self, Script, calls};
use crate::backend::redis::transport::Connection;
use crate::backend::redis::transport::endpoint::Endpoint;
use crate::backend::redis::waiters::{BLPOP, WAIT_SLACK, WAKE_LINGER};
use crate::lock::record::{self, Lost, RunEnding, Started, Tenure};
use crate::lock::{
    Acquire, Failure, Held, HeldAs, Holder, Interrupt, Kind, Locker, Renewal, Until,
};

mod acked;
mod behind;

use behind::SingleInterrupt;
mod quorum_node;
mod reads;

/// A lock on one Redis server (one URL, a Sentinel service's master, or the Cluster node that
/// owns the lock's slot), over one connection that is re-opened after any I/O failure; a
/// waiter blocks on it too ([`Locker::wait`]).
pub(crate) struct SingleRedis {
    // Also for `counter`'s part of it.
    pub(super) conn: Connection,
    pub(super) keys: Keys,
    /// The run's owner token, which every request of the lock is made for (empty for a client
    /// that takes nothing: the admin commands' reads, an interrupt).
    token: String,
    /// First come, first served among waiters (`--fair`).
    fair: bool,
    /// How long a fair waiter's queue entry lives without a refresh.
    entry_lifetime: Duration,
    /// Skip runs within this long of a successful one (`--min-interval`).
    min_interval: Option<Duration>,
    /// Stored beside the lock when taken.
    holder: Holder,
    /// After taking the lock, after every renewal and after raising a quorum's fencing
    /// counter, wait this long at most for the write to reach what is asked
    /// (`--min-replicas`, `--fsync`).
    durability: Option<(Durability, Duration)>,
    /// Check `maxmemory-policy` once per connection, in the same round trip as an acquire.
    preflight: Preflight,
    /// Alone, one of at most N, or shared (`--limit`, `--shared`).
    kind: Kind,
    /// An acquire turned this waiter away, or may have (it failed, and its reply may have been
    /// lost): the scripts then clear what that left among the waiters' records (see
    /// [`Attempt::waited`]); a first attempt that gets in touches none of them.
    waited: bool,
    /// How long an attempt that is turned away counts as waiting in the registry of waiters
    /// (None: the ttl, [`WAIT_SLACK`] and a second, which covers any wait between attempts).
    waiting_lifetime: Option<Duration>,
    /// This waiter is in the waiters' queue without `--fair` (an exclusive waiter behind shared
    /// holders): it must come back every `FAIR_BEAT` (`waiters`) to keep its place, as a fair
    /// one does.
    queued: bool,
    /// An acquire reached the server and got no reply redlock could read, and no acquire has
    /// been answered since: it may have taken the lock ([`Locker::unanswered`]).
    acquire_unanswered: bool,
    /// The last script's reply came, of a shape it never gives (a hostile server or proxy).
    unreadable: bool,
    /// The plain take found the key held by several, or not redlock's: this run's attempts go
    /// to the feature acquire (acquire.lua), which knows what to do with such a key.
    several: bool,
    /// The run this client took, as the acquire answered: its release writes the run's end
    /// into the record without reading it.
    taken: Option<Taken>,
}

/// A run this client took (when the server ran the take, unix ms), and how long it has held
/// the lock.
#[derive(Debug)]
struct Taken {
    run: Started,
    tenure: Tenure,
}

impl Taken {
    /// When the run held the lock to at the latest, by the server's clock (unix ms): what the
    /// record keeps as the end of a run found lost.
    fn over_by(&self) -> u64 {
        self.run.at_ms + self.tenure.held().as_millis() as u64
    }
}

impl SingleRedis {
    /// `entry_lifetime` matters only when `fair`: it must outlast the waiter's longest sleep
    /// between attempts, since each attempt refreshes the entry.
    pub fn new(endpoint: Endpoint, keys: Keys, fair: bool, entry_lifetime: Duration) -> Self {
        Self {
            conn: Connection::new(endpoint),
            keys,
            token: String::new(),
            fair,
            entry_lifetime,
            min_interval: None,
            holder: Holder::default(),
            durability: None,
            preflight: Preflight::Off,
            kind: Kind::Exclusive,
            waited: false,
            waiting_lifetime: None,
            queued: false,
            acquire_unanswered: false,
            unreadable: false,
            several: false,
            taken: None,
        }
    }

    /// Act for the run of owner token `token`.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = token.to_owned();
        self
    }

    /// Count a waiter turned away as waiting this long (`redlock status`); it must cover the
    /// longest wait before the next attempt.
    pub fn with_waiting_lifetime(mut self, lifetime: Duration) -> Self {
        self.waiting_lifetime = Some(lifetime);
        self
    }

    /// Hold the lock as `kind`: alone (the default), as one of at most N, or shared.
    pub fn with_kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// After taking the lock, wait up to `wait` for it to reach `replicas` replicas (WAIT),
    /// and with `fsync` the append-only files, the master's and those replicas' (WAITAOF); if
    /// it does not, release it and fail (Refused). Every renewal is followed by the same in its
    /// round trip, and one that did not reach them is [`Renewal::Unacknowledged`]. Neither:
    /// do not wait.
    pub fn with_durability(mut self, replicas: u32, fsync: bool, wait: Duration) -> Self {
        self.durability = Durability::of(replicas, fsync).map(|d| (d, wait));
        self
    }

    /// Check (once per connection) whether the server's `maxmemory-policy` could evict lock
    /// keys, and warn as `preflight` says. The check rides in the same round trip as the first
    /// acquire (or `inspect`) on each connection.
    pub fn with_preflight(mut self, preflight: Preflight) -> Self {
        self.preflight = preflight;
        self
    }

    /// Where this lock lives.
    pub fn endpoint(&self) -> &Endpoint {
        self.conn.endpoint()
    }

    /// Record `holder` beside the lock when taking it.
    pub fn with_holder(mut self, holder: Holder) -> Self {
        self.holder = holder;
        self
    }

    /// Skip runs within `interval` of a successful one, and record successes for that long.
    pub fn with_min_interval(mut self, interval: Option<Duration>) -> Self {
        self.min_interval = interval;
        self
    }

    /// How a run found lost ends, with when it held the lock to at the latest, where known.
    fn lost(&self, lost: Lost) -> Lost {
        Lost {
            lost_by: self.taken.as_ref().map_or(0, Taken::over_by),
            ..lost
        }
    }

    /// The taken run's N in the record of runs ('' when none, or not recorded).
    fn slot(&self) -> String {
        self.taken
            .as_ref()
            .map_or_else(String::new, |taken| taken.run.slot.clone())
    }

    /// How long an attempt turned away counts as waiting (see `with_waiting_lifetime`).
    fn waiting_lifetime(&self, ttl: Duration) -> Duration {
        self.waiting_lifetime
            .unwrap_or(ttl + WAIT_SLACK + Duration::from_secs(1))
    }

    /// The one way a script is called: [`scripts::send`] (EVALSHA, EVAL when the script cache
    /// was emptied by a failover, restart or SCRIPT FLUSH) over this lock's connection, within
    /// `timeout`, with what `beside` asks for in the same round trip; any I/O failure drops the
    /// connection. The reply decoded, and with [`Beside::Durable`] the reply of WAIT or
    /// WAITAOF, about every write this connection made so far, the script's own included.
    fn call<S: Script>(
        &mut self,
        script: &S,
        timeout: Duration,
        beside: Beside,
    ) -> Result<(S::Reply, Option<Value>), Failure> {
        let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
        self.unreadable = false;
        let keys = &self.keys;
        let mut policy = None;
        let reply = self.conn.request(deadline, |node| {
            let (extra, again) = match beside {
                Beside::Preflight(p) if p != Preflight::Off && node.fresh => {
                    (Some(preflight::question()), false)
                }
                Beside::Durable(durability, wait) => (Some(durability.command(wait)), true),
                _ => (None, false),
            };
            let (reply, other) =
                scripts::send(&mut node.conn, keys, script, extra.as_ref(), again)?;
            if !again && extra.is_some() {
                policy = Some((node.addr.clone(), other.clone()));
            }
            // The script's error first: MOVED, ASK and READONLY are followed as for any request.
            let reply = reply?;
            match other {
                Some(Value::ServerError(e)) if again => Err(e.into()),
                other => Ok((reply, other.filter(|_| again))),
            }
        });
        if let (Some((addr, config)), Beside::Preflight(preflight)) = (policy, beside) {
            self.report_policy(&addr, config.as_ref(), preflight, deadline);
        }
        let (reply, acked) = reply?;
        let decoded = S::Reply::from_reply(&reply);
        // Carried out, but what it did cannot be read: as good as no answer.
        self.unreadable = decoded.is_none();
        let decoded = decoded.ok_or_else(|| unexpected(self.endpoint(), &reply))?;
        Ok((decoded, acked))
    }

    /// Warn about an evicting `maxmemory-policy` (see `preflight`).
    fn report_policy(
        &mut self,
        addr: &str,
        config: Option<&Value>,
        preflight: Preflight,
        deadline: Instant,
    ) {
        let policy = preflight::policy(config);
        let loud = match policy.as_deref() {
            Some(p) if preflight::evicting(p) => {
                // Under -q nobody would see it: the week is not spent on it.
                preflight == Preflight::Always
                    || (crate::report::enabled(0) && self.first_warning(deadline))
            }
            _ => false,
        };
        preflight::report(addr, policy.as_deref(), loud);
    }

    /// Whether this is the first warning about the eviction policy for this lock in
    /// [`preflight::WARN_EVERY`] (recorded with SET NX EX; a failed request counts as the first,
    /// so the warning is not lost).
    fn first_warning(&mut self, deadline: Instant) -> bool {
        let key = self.keys.warned.clone();
        let deadline = deadline.max(Instant::now() + Duration::from_millis(100));
        self.conn
            .request(deadline, |node| {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(1)
                    .arg("NX")
                    .arg("EX")
                    .arg(preflight::WARN_EVERY.as_secs())
                    .query::<Option<String>>(&mut node.conn)
            })
            .map_or(true, |set| set.is_some())
    }

    /// The release for how this client holds the lock; `success_for`: record the run's
    /// success for that long; `ended`: how the run ended, for its record; `unused`: a take
    /// given back to be tried again, whose run leaves the record instead ([`Finish::unused`]).
    fn finish(
        &mut self,
        token: &str,
        success_for: Option<Duration>,
        (ended, unused): (RunEnding, bool),
        timeout: Duration,
    ) -> Result<Held, Failure> {
        let slot = self.slot();
        let ended = RunEnding {
            lost: self.lost(ended.lost),
            ..ended
        };
        let finish = Finish {
            token,
            linger: WAKE_LINGER,
            success_for,
            waited: self.waited,
            slot: &slot,
            ended,
            record: Kept::DEFAULT,
            unused,
        };
        let ended_run = self.taken.as_ref().map_or_else(String::new, |taken| {
            ended.json(&taken.run, token, &self.holder, taken.tenure.held())
        });
        let ended_run = ended_run.as_str();
        let (held, _) = match self.kind {
            Kind::Exclusive => {
                let give_back = calls::GiveBack { finish, ended_run };
                self.call(&give_back, timeout, Beside::Nothing)?
            }
            _ => {
                let release = calls::ReleaseMany { finish, ended_run };
                self.call(&release, timeout, Beside::Nothing)?
            }
        };
        Ok(held)
    }
}

impl SingleRedis {
    /// An attempt by the acquire of the features this run uses: `--fair`, `--min-interval`,
    /// `--limit`, `--shared`, or an exclusive waiter behind shared holders.
    fn feature_acquire(
        &mut self,
        attempt: Attempt,
        timeout: Duration,
        preflight: Beside,
    ) -> Result<(AcquireReply, Option<Value>), Failure> {
        match self.kind {
            Kind::Exclusive => self.call(&calls::Acquire { attempt }, timeout, preflight),
            held_as => self.call(&calls::AcquireMany { attempt, held_as }, timeout, preflight),
        }
    }

    /// Whether an attempt goes to the plain take, which carries nothing of the features it
    /// does not use: an exclusive lock without `--fair` or `--min-interval`, not queued behind
    /// shared holders, on a key the plain take can take. The others go to theirs.
    fn plain(&self) -> bool {
        self.kind == Kind::Exclusive
            && !self.fair
            && self.min_interval.is_none()
            && !self.queued
            && !self.several
    }

    /// The plain take of `token` for `ttl`, `holder` and `run` as the attempt gives them.
    fn take<'a>(
        &self,
        token: &'a str,
        ttl: Duration,
        holder: &'a Holder,
        run: &'a str,
    ) -> calls::Take<'a> {
        calls::Take {
            token,
            ttl,
            holder,
            lifetime: self.waiting_lifetime(ttl),
            waited: self.waited,
            record: Kept::DEFAULT,
            run,
        }
    }

    /// The BLPOP of `token`'s wake lists, held `hold` by the server.
    fn blpop(&self, token: &str, hold: Duration) -> redis::Cmd {
        let mut blpop = redis::cmd("BLPOP");
        // BLPOP takes seconds; 0 would mean forever.
        blpop
            .arg(self.keys.wake_lists(token, self.fair))
            .arg(format!("{:.3}", hold.as_secs_f64().max(0.001)));
        blpop
    }

    /// Whether the BLPOP's `reply` says the waiter was woken (else its time ran out).
    fn woken(&self, reply: Value) -> Result<bool, Failure> {
        match reply {
            Value::Nil => Ok(false),
            Value::Array(_) => Ok(true),
            other => Err(unexpected(self.endpoint(), &other)),
        }
    }

    /// What an attempt's answer means, and what this client keeps of it.
    fn answered(
        &mut self,
        token: &str,
        reply: AcquireReply,
        ttl: Duration,
    ) -> Result<Acquire, Failure> {
        Ok(match reply {
            AcquireReply::Acquired { fence, at_ms, slot } => {
                self.taken = Some(Taken {
                    run: Started { at_ms, fence, slot },
                    tenure: Tenure::new(ttl),
                });
                if let Some((durability, wait)) = self.durability {
                    self.durable(token, durability, wait)?;
                }
                Acquire::Acquired { fence }
            }
            AcquireReply::Busy { retry_in, why } => {
                self.waited = true;
                // Queued behind shared holders: its place there must be refreshed.
                self.queued = why == TurnedAway::Queued;
                Acquire::Busy {
                    remaining: retry_in,
                    queued: why == TurnedAway::Promised,
                }
            }
            AcquireReply::Skipped { ago } => Acquire::Skipped { ago },
            AcquireReply::Mismatch(found) => Acquire::Mismatch { found },
            // Only the plain take answers so, and its answer went to the feature acquire.
            AcquireReply::Several(t) => Acquire::Mismatch {
                found: HeldAs::Foreign(format!("a Redis {t}")),
            },
        })
    }
}

/// What a script call sends beside the script, in the same round trip.
#[derive(Debug, Clone, Copy)]
enum Beside {
    Nothing,
    /// The eviction-policy question, on the first request of each connection.
    Preflight(Preflight),
    /// WAIT or WAITAOF, this long at most, for what `--min-replicas` and `--fsync` ask. They go
    /// beside the script, not into it: inside a script they do not block.
    Durable(Durability, Duration),
}

impl Locker for SingleRedis {
    fn acquire(&mut self, ttl: Duration, timeout: Duration) -> Result<Acquire, Failure> {
        let token: &str = &self.token.clone();
        let holder = self.holder.clone();
        let run = record::started_json(token, &holder);
        let attempt = Attempt {
            token,
            ttl,
            min_interval: self.min_interval,
            holder: &holder,
            entry: self.entry_lifetime,
            linger: WAKE_LINGER,
            lifetime: self.waiting_lifetime(ttl),
            fair: self.fair,
            waited: self.waited,
            record: Kept::DEFAULT,
            run: &run,
        };
        let preflight = Beside::Preflight(self.preflight);
        let begun = Instant::now();
        // Through sentinels: only on a master a majority of them name.
        let confirmed = self.conn.confirm_master(begun + timeout);
        let timeout = timeout.saturating_sub(begun.elapsed());
        // A plain run takes the lock with the plain take, which carries nothing of the features
        // it does not use; the others, and a key the plain take cannot take, go to theirs.
        let sent = if let Err(failure) = confirmed {
            Err(failure)
        } else if self.plain() {
            let take = self.take(token, ttl, &holder, &run);
            match self.call(&take, timeout, preflight) {
                Ok((AcquireReply::Several(_), _)) => {
                    self.several = true;
                    self.feature_acquire(attempt, timeout, preflight)
                }
                sent => sent,
            }
        } else {
            self.feature_acquire(attempt, timeout, preflight)
        };
        // A failed attempt may have been turned away, its reply lost.
        self.waited |= sent.is_err();
        // Or it may have taken the lock: only an acquire's answer settles that.
        self.acquire_unanswered = match &sent {
            Ok(_) => false,
            Err(_) => self.acquire_unanswered || self.conn.unanswered() || self.unreadable,
        };
        if let Err(failure @ Failure::Refused(_)) = &sent
            && let Some(said) = self.stopped_at_the_counter(failure, timeout)
        {
            return Err(said);
        }
        self.answered(token, sent?.0, ttl)
    }

    fn extend(&mut self, ttl: Duration, timeout: Duration) -> Result<Renewal, Failure> {
        let token: &str = &self.token.clone();
        let sent = Instant::now();
        // Through sentinels: renewed only on a master a majority of them name (or failed).
        self.conn.confirm_master(sent + timeout)?;
        let timeout = timeout.saturating_sub(sent.elapsed());
        let beside = self.acknowledged(timeout);
        let (lost, record) = (self.lost(Lost::LOCK_LOST), Kept::DEFAULT);
        let slot = self.slot();
        let slot = slot.as_str();
        let (held, acked) = match self.kind {
            Kind::Exclusive => {
                let extend = calls::Extend {
                    token,
                    ttl,
                    slot,
                    lost,
                    record,
                };
                self.call(&extend, timeout, beside)?
            }
            _ => {
                let extend = calls::ExtendMany {
                    token,
                    ttl,
                    slot,
                    lost,
                    record,
                };
                self.call(&extend, timeout, beside)?
            }
        };
        let renewal = match (held, self.judged(beside, acked.as_ref(), "the renewal")?) {
            (Held::Ours, Err(why)) => Renewal::Unacknowledged(why),
            (held, _) => Renewal::from(held),
        };
        if let (Renewal::Extended, Some(taken)) = (&renewal, &mut self.taken) {
            taken.tenure.renewed(sent, ttl);
        }
        Ok(renewal)
    }

    fn release(&mut self, ended: RunEnding, timeout: Duration) -> Result<Held, Failure> {
        let success_for = self.min_interval.filter(|_| ended.succeeded());
        self.finish(&self.token.clone(), success_for, (ended, false), timeout)
    }

    fn give_back_unacknowledged(
        &mut self,
        ended: Option<RunEnding>,
        timeout: Duration,
    ) -> Result<(), Failure> {
        self.give_back_unacknowledged_take(&self.token.clone(), ended, timeout)
    }

    fn wait(&mut self, until: Until) -> Result<bool, Failure> {
        self.wait_block(Block::until(until, BLPOP))
    }

    fn wait_then_acquire(
        &mut self,
        until: Until,
        ttl: Duration,
    ) -> (Result<bool, Failure>, Option<Acquire>) {
        let block = Block::until(until, BLPOP);
        if !self.plain() || self.durability.is_some() {
            return (self.wait_block(block), None);
        }
        self.take_behind_the_block(&self.token.clone(), block, ttl)
    }

    fn interrupter(&self) -> Box<dyn Interrupt> {
        Box::new(SingleInterrupt {
            endpoint: self.endpoint().clone(),
            keys: self.keys.clone(),
            token: self.token.clone(),
        })
    }

    fn unanswered(&self) -> bool {
        self.acquire_unanswered
    }

    fn leave(&mut self, busy: bool, timeout: Duration) -> Result<(), Failure> {
        let token: &str = &self.token.clone();
        let leave = calls::Leave {
            token,
            linger: WAKE_LINGER,
            busy,
            record: Kept::DEFAULT,
        };
        self.call(&leave, timeout, Beside::Nothing).map(drop)
    }
}
