//! A lock on one Redis server: one URL, a Sentinel service's master, or the Cluster node that
//! owns the lock's slot, over the one connection `transport` keeps to it.

use std::time::{Duration, Instant};

use redis::Value;

use crate::lock::preflight::{self, Preflight};
use crate::lock::reply::{held, integers, mismatch, ms_arg, strings, unexpected};
use crate::lock::scripts::{
    ACQUIRE, ACQUIRE_FAIR, ACQUIRE_MANY, EXTEND, EXTEND_MANY, FENCE_RAISE, FENCE_READ,
    FORCE_RELEASE, INSPECT, INTERRUPT, LEAVE, Lua, RELEASE, RELEASE_MANY, UNDO,
};
use crate::lock::{
    Acquire, FAIR_BEAT, Failure, Forced, Held, Holder, Interrupt, Keys, Kind, LockInfo, Locker,
    Renewal, WAIT_SLACK, WAKE_LINGER,
};
use crate::transport::Connection;
use crate::transport::endpoint::Endpoint;

/// A lock on one Redis server (one URL, a Sentinel service's master, or the Cluster node that
/// owns the lock's slot), over one connection that is re-opened after any I/O failure; a
/// waiter blocks on it too ([`Locker::wait`]).
pub(crate) struct SingleRedis {
    conn: Connection,
    keys: Keys,
    /// First come, first served among waiters (`--fair`).
    fair: bool,
    /// How long a fair waiter's queue entry lives without a refresh.
    entry_lifetime: Duration,
    /// Skip runs within this long of a successful one (`--min-interval`).
    min_interval: Option<Duration>,
    /// Stored beside the lock when taken.
    holder: Holder,
    /// After taking the lock, after every renewal and after raising a quorum's fencing
    /// counter, WAIT for this many replicas, this long at most (`--min-replicas`).
    min_replicas: Option<(u32, Duration)>,
    /// Check `maxmemory-policy` once per connection, in the same round trip as an acquire.
    preflight: Preflight,
    /// Alone, one of at most N, or shared (`--limit`, `--shared`).
    kind: Kind,
    /// The last acquire turned this waiter away (a semaphore's waiter let in with room left
    /// then wakes the next).
    turned_away: bool,
    /// How long an attempt that is turned away counts as waiting in the registry of waiters
    /// (None: the ttl, [`WAIT_SLACK`] and a second, which covers any wait between attempts).
    waiting_lifetime: Option<Duration>,
    /// This waiter is in the waiters' queue without `--fair` (an exclusive waiter behind shared
    /// holders): it must come back every [`FAIR_BEAT`] to keep its place, as a fair one does.
    queued: bool,
}

impl SingleRedis {
    /// `entry_lifetime` matters only when `fair`: it must outlast the waiter's longest sleep
    /// between attempts, since each attempt refreshes the entry.
    pub fn new(endpoint: Endpoint, keys: Keys, fair: bool, entry_lifetime: Duration) -> Self {
        Self {
            conn: Connection::new(endpoint),
            keys,
            fair,
            entry_lifetime,
            min_interval: None,
            holder: Holder::default(),
            min_replicas: None,
            preflight: Preflight::Off,
            kind: Kind::Exclusive,
            turned_away: false,
            waiting_lifetime: None,
            queued: false,
        }
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

    /// The renewal for how this client holds the lock: its key, or its place among several.
    fn extend_script(&self) -> &'static Lua {
        match self.kind {
            Kind::Exclusive => &EXTEND,
            Kind::Limit(_) | Kind::Shared => &EXTEND_MANY,
        }
    }

    /// The release for how this client holds the lock.
    fn release_script(&self) -> &'static Lua {
        match self.kind {
            Kind::Exclusive => &RELEASE,
            Kind::Limit(_) | Kind::Shared => &RELEASE_MANY,
        }
    }

    /// After taking the lock, wait up to `wait` for `replicas` replicas to acknowledge it
    /// (WAIT); if fewer do, release it and fail (Refused). Every renewal is followed by the
    /// same WAIT in its round trip, and one that too few replicas acknowledged is
    /// [`Renewal::Unacknowledged`]. 0: do not wait.
    pub fn with_min_replicas(mut self, replicas: u32, wait: Duration) -> Self {
        self.min_replicas = (replicas > 0).then_some((replicas, wait));
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

    /// Look at another lock's keys from now on (`redlock list` reuses one connection).
    pub fn set_keys(&mut self, keys: Keys) {
        self.keys = keys;
    }

    /// The lock's state, read in one script.
    pub fn inspect(&mut self, timeout: Duration) -> Result<LockInfo, Failure> {
        let reply = self.eval_checked(&INSPECT, &[], timeout, self.preflight)?;
        strings(&reply)
            .and_then(|items| LockInfo::parse(self.keys.clone(), &items))
            .ok_or_else(|| unexpected(self.endpoint(), &reply))
    }

    /// Break-glass: delete the lock whoever holds it (or only while it holds `expected`) and
    /// advance the fencing counter; held by several, remove the one holder of `expected`
    /// (or the only one).
    pub fn force_release(
        &mut self,
        expected: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        let args = [&*ms_arg(WAKE_LINGER), expected.unwrap_or("")];
        let reply = self.eval(&FORCE_RELEASE, &args, timeout)?;
        strings(&reply)
            .and_then(|items| Forced::parse(&items))
            .ok_or_else(|| unexpected(self.endpoint(), &reply))
    }

    /// Undo a partial quorum acquire on this node, waking nobody.
    pub fn undo(&mut self, token: &str, timeout: Duration) -> Result<(), Failure> {
        self.eval(&UNDO, &[token], timeout).map(drop)
    }

    /// The fencing counter as it is (a quorum's read phase).
    pub fn read_fence(&mut self, timeout: Duration) -> Result<i64, Failure> {
        match self.eval(&FENCE_READ, &[], timeout)? {
            Value::Int(fence) => Ok(fence),
            other => Err(unexpected(self.endpoint(), &other)),
        }
    }

    /// Raise the fencing counter to at least `to` (a quorum's write-back phase); the counter after.
    /// With `--min-replicas`, only once that many replicas acknowledged the raise, as the
    /// acquire's own INCR is: a failover of this node must not lower the counter again.
    pub fn raise_fence(&mut self, to: i64, timeout: Duration) -> Result<i64, Failure> {
        let to = to.to_string();
        let reply =
            match self.min_replicas {
                None => self.eval(&FENCE_RAISE, &[&to], timeout)?,
                Some((replicas, wait)) => {
                    let wait = wait.min(timeout / 2);
                    let (reply, acked) =
                        self.eval_acked(&FENCE_RAISE, &[&to], replicas, wait, timeout)?;
                    if acked < i64::from(replicas) {
                        return Err(Failure::Unreachable(format!(
                        "only {acked} of {replicas} replica(s) of Redis at {} acknowledged the \
                         fencing counter within {} (--min-replicas)",
                        self.endpoint(),
                        humantime::format_duration(wait)
                    ).into()));
                    }
                    reply
                }
            };
        match reply {
            Value::Int(fence) => Ok(fence),
            other => Err(unexpected(self.endpoint(), &other)),
        }
    }

    /// One SCAN step over keys matching `pattern`: the next cursor (0 when done) and the keys.
    pub fn scan(
        &mut self,
        cursor: u64,
        pattern: &str,
        timeout: Duration,
    ) -> Result<(u64, Vec<Vec<u8>>), Failure> {
        self.conn.request(Instant::now() + timeout, |node| {
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query::<(u64, Vec<Vec<u8>>)>(&mut node.conn)
        })
    }

    /// Run `script` with EVALSHA, falling back to EVAL when the script cache was emptied
    /// (failover, restart, SCRIPT FLUSH). Any I/O failure drops the connection.
    fn eval(&mut self, script: &Lua, args: &[&str], timeout: Duration) -> Result<Value, Failure> {
        self.eval_checked(script, args, timeout, Preflight::Off)
    }

    /// [`Self::eval`]; with `preflight`, the first request on a new connection also asks for
    /// `maxmemory-policy` in the same round trip (pipelined) and warns about an evicting one.
    fn eval_checked(
        &mut self,
        script: &Lua,
        args: &[&str],
        timeout: Duration,
        preflight: Preflight,
    ) -> Result<Value, Failure> {
        let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
        let keys = self.keys.all();
        let build = |verb: &str, body: &str| {
            let mut cmd = redis::cmd(verb);
            cmd.arg(body).arg(keys.len()).arg(&keys[..]).arg(args);
            cmd
        };
        let mut policy = None;
        let reply = self.conn.request(deadline, |node| {
            let first = if preflight != Preflight::Off && node.fresh {
                let mut pipe = redis::pipe();
                pipe.ignore_errors()
                    .add_command(build("EVALSHA", script.sha()))
                    .cmd("CONFIG")
                    .arg("GET")
                    .arg("maxmemory-policy");
                let mut replies: Vec<Value> = pipe.query(&mut node.conn)?;
                let config = replies.pop();
                let reply = replies.pop().unwrap_or(Value::Nil);
                policy = Some((node.addr.clone(), config));
                match reply {
                    Value::ServerError(e) => Err(redis::RedisError::from(e)),
                    other => Ok(other),
                }
            } else {
                build("EVALSHA", script.sha()).query::<Value>(&mut node.conn)
            };
            match first {
                Err(e) if e.code() == Some("NOSCRIPT") => {
                    build("EVAL", script.body).query::<Value>(&mut node.conn)
                }
                other => other,
            }
        });
        if let Some((addr, config)) = policy {
            let policy = preflight::policy(config.as_ref());
            let loud = match policy.as_deref() {
                Some(p) if preflight::evicting(p) => {
                    // Under -q nobody would see it: the week is not spent on it.
                    preflight == Preflight::Always
                        || (crate::report::enabled(0) && self.first_warning(deadline))
                }
                _ => false,
            };
            preflight::report(&addr, policy.as_deref(), loud);
        }
        reply
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

    /// `script` (EVALSHA, EVAL on NOSCRIPT) and `WAIT replicas wait` pipelined in one round
    /// trip: the script's reply, and how many replicas acknowledged every write this
    /// connection made so far, the script's own included. WAIT goes beside the script, not
    /// into it: inside a script it does not block. Fit `wait` into `timeout` (the server holds
    /// the reply that long when replicas are missing).
    fn eval_acked(
        &mut self,
        script: &Lua,
        args: &[&str],
        replicas: u32,
        wait: Duration,
        timeout: Duration,
    ) -> Result<(Value, i64), Failure> {
        let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
        let keys = self.keys.all();
        let wait_ms = ms_arg(wait);
        let send = |verb: &str, body: &str, conn: &mut dyn redis::ConnectionLike| {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            pipe.cmd(verb)
                .arg(body)
                .arg(keys.len())
                .arg(&keys[..])
                .arg(args);
            pipe.cmd("WAIT").arg(replicas).arg(&wait_ms);
            let mut replies: Vec<Value> = pipe.query(conn)?;
            let acked = replies.pop().unwrap_or(Value::Nil);
            let reply = replies.pop().unwrap_or(Value::Nil);
            Ok::<_, redis::RedisError>((reply, acked))
        };
        let (reply, acked) = self.conn.request(deadline, |node| {
            let (mut reply, mut acked) = send("EVALSHA", script.sha(), &mut node.conn)?;
            if matches!(&reply, Value::ServerError(e) if e.code() == "NOSCRIPT") {
                (reply, acked) = send("EVAL", script.body, &mut node.conn)?;
            }
            // The script's error first: MOVED, ASK and READONLY are followed as for any request.
            for value in [&reply, &acked] {
                if let Value::ServerError(e) = value {
                    return Err(redis::RedisError::from(e.clone()));
                }
            }
            Ok((reply, acked))
        })?;
        match acked {
            Value::Int(acked) => Ok((reply, acked)),
            other => Err(unexpected(self.endpoint(), &other)),
        }
    }

    /// `--min-replicas`: WAIT until `replicas` replicas acknowledged the lock, at most `wait`.
    /// Fewer: release it (compare-and-delete) and fail with Refused, so the command never runs.
    fn replicated(&mut self, token: &str, replicas: u32, wait: Duration) -> Result<(), Failure> {
        // The server gives up after `wait`; the reply gets as long again to arrive.
        let deadline = Instant::now() + wait * 2 + Duration::from_millis(10);
        let acked = self.conn.request(deadline, |node| {
            redis::cmd("WAIT")
                .arg(replicas)
                .arg(ms_arg(wait))
                .query::<i64>(&mut node.conn)
        });
        let why = match acked {
            Ok(n) if n >= i64::from(replicas) => return Ok(()),
            Ok(n) => format!(
                "only {n} of {replicas} replica(s) acknowledged the lock within {}",
                humantime::format_duration(wait)
            ),
            Err(failure) => format!("waiting for {replicas} replica(s) failed ({failure})"),
        };
        let script = self.release_script();
        let released = match self.eval(script, &[token, &ms_arg(WAKE_LINGER), "0"], wait * 2) {
            Ok(_) => "released it".to_owned(),
            Err(failure) => format!("releasing it failed ({failure}); it expires by itself"),
        };
        Err(Failure::Refused(
            format!("{why} (--min-replicas); {released}").into(),
        ))
    }
}

impl Locker for SingleRedis {
    fn acquire(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Acquire, Failure> {
        let interval = self.min_interval.map_or_else(|| "0".to_owned(), ms_arg);
        let holder = self.holder.clone();
        let (pid, started) = (holder.pid.to_string(), holder.started.to_string());
        let ttl_ms = ms_arg(ttl);
        let (entry, linger) = (ms_arg(self.entry_lifetime), ms_arg(WAKE_LINGER));
        let waiting = ms_arg(
            self.waiting_lifetime
                .unwrap_or(ttl + WAIT_SLACK + Duration::from_secs(1)),
        );
        let mut args: Vec<&str> = vec![
            token,
            &ttl_ms,
            &interval,
            &holder.host,
            &pid,
            &holder.command,
            &started,
            &entry,
            &linger,
            &waiting,
        ];
        let stored = self.kind.stored();
        let limit = match self.kind {
            Kind::Limit(n) => n.to_string(),
            _ => "0".to_owned(),
        };
        let script = match &stored {
            Some(stored) => {
                args.extend([
                    stored.as_str(),
                    &limit,
                    if self.fair { "1" } else { "0" },
                    if self.turned_away { "1" } else { "0" },
                ]);
                &ACQUIRE_MANY
            }
            None if self.fair => &ACQUIRE_FAIR,
            None => &ACQUIRE,
        };
        let reply = self.eval_checked(script, &args, timeout, self.preflight)?;
        if let Some(used) = mismatch(&reply) {
            return Ok(Acquire::Mismatch { used });
        }
        let acquire = match integers(&reply).as_deref() {
            Some([1, fence]) => {
                let fence = *fence;
                if let Some((replicas, wait)) = self.min_replicas {
                    self.replicated(token, replicas, wait)?;
                }
                Acquire::Acquired { fence }
            }
            // acquire_fair.lua's "free, but not our turn" is a PTTL of -2.
            Some([0, pttl]) => {
                // Held by one exclusive holder: no queue entry of ours is refreshed any more.
                self.queued = false;
                Acquire::Busy {
                    remaining: u64::try_from(*pttl).ok().map(Duration::from_millis),
                    queued: *pttl == -2 && self.fair,
                }
            }
            // 1: room, but promised to waiters ahead; 2: in the queue behind shared holders.
            Some([0, ms, why]) => {
                self.queued = *why == 2;
                Acquire::Busy {
                    remaining: u64::try_from(*ms).ok().map(Duration::from_millis),
                    queued: *why == 1,
                }
            }
            Some([2, ago]) => Acquire::Skipped {
                ago: Duration::from_millis(u64::try_from(*ago).unwrap_or(0)),
            },
            _ => return Err(unexpected(self.endpoint(), &reply)),
        };
        self.turned_away = matches!(acquire, Acquire::Busy { .. });
        Ok(acquire)
    }

    fn extend(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Renewal, Failure> {
        let ttl = ms_arg(ttl);
        let script = self.extend_script();
        let Some((replicas, wait)) = self.min_replicas else {
            let reply = self.eval(script, &[token, &ttl], timeout)?;
            return held(self.endpoint(), &reply).map(Renewal::from);
        };
        // Half the time limit at most: the server holds the reply up to `wait`, then sends it.
        let wait = wait.min(timeout / 2);
        let (reply, acked) = self.eval_acked(script, &[token, &ttl], replicas, wait, timeout)?;
        Ok(match held(self.endpoint(), &reply)? {
            Held::Ours if acked >= i64::from(replicas) => Renewal::Extended,
            Held::Ours => Renewal::Unacknowledged(format!(
                "only {acked} of {replicas} replica(s) acknowledged the renewal within {}",
                humantime::format_duration(wait)
            )),
            lost => Renewal::Lost(lost),
        })
    }

    fn release(
        &mut self,
        token: &str,
        succeeded: bool,
        timeout: Duration,
    ) -> Result<Held, Failure> {
        let done = match self.min_interval {
            Some(interval) if succeeded => ms_arg(interval),
            _ => "0".to_owned(),
        };
        let reply = self.eval(
            self.release_script(),
            &[token, &ms_arg(WAKE_LINGER), &done],
            timeout,
        )?;
        held(self.endpoint(), &reply)
    }

    fn wait(&mut self, token: &str, timeout: Duration) -> Result<bool, Failure> {
        // A --fair waiter (or an exclusive one queued behind shared holders) comes back every
        // FAIR_BEAT to refresh its place (its attempt does), so that a waiter that died is
        // forgotten within FAIR_ENTRY_LIFETIME.
        let timeout = if self.fair || self.queued {
            timeout.min(FAIR_BEAT)
        } else {
            timeout
        };
        // BLPOP takes seconds; 0 would mean forever.
        let seconds = format!("{:.3}", timeout.as_secs_f64().max(0.001));
        let lists = self.keys.wake_lists(token, self.fair);
        let reply = self
            .conn
            .request(Instant::now() + timeout + WAIT_SLACK, |node| {
                redis::cmd("BLPOP")
                    .arg(&lists)
                    .arg(&seconds)
                    .query::<Value>(&mut node.conn)
            })?;
        match reply {
            Value::Nil => Ok(false),
            Value::Array(_) => Ok(true),
            other => Err(unexpected(self.endpoint(), &other)),
        }
    }

    fn interrupter(&self, token: &str) -> Box<dyn Interrupt> {
        Box::new(SingleInterrupt {
            endpoint: self.endpoint().clone(),
            keys: self.keys.clone(),
            token: token.to_owned(),
        })
    }

    fn leave(&mut self, token: &str, timeout: Duration) -> Result<(), Failure> {
        self.eval(&LEAVE, &[token, &ms_arg(WAKE_LINGER)], timeout)
            .map(drop)
    }
}

/// Interrupts a [`SingleRedis`] waiter's wait from another thread, over a connection opened
/// for that one request (see [`Interrupt`]): none is kept while waiting.
struct SingleInterrupt {
    endpoint: Endpoint,
    keys: Keys,
    token: String,
}

impl Interrupt for SingleInterrupt {
    fn interrupt(&self, timeout: Duration) -> Result<(), Failure> {
        let mut once = SingleRedis::new(
            self.endpoint.clone(),
            self.keys.clone(),
            false,
            Duration::ZERO,
        );
        once.eval(&INTERRUPT, &[&self.token, &ms_arg(WAKE_LINGER)], timeout)
            .map(drop)
    }
}
