//! The Redis lock protocol: key names, Lua scripts, and acquire / extend / release (over the
//! connection `transport` keeps to the lock's server).
//!
//! Every key a script touches is passed in KEYS and carries the `{name}` hash tag, so the same
//! scripts run unchanged on Redis Cluster.

pub mod quorum;
pub mod validity;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::Value;

use crate::transport::Connection;
pub use crate::transport::Failure;
use crate::transport::endpoint::Endpoint;

/// A Lua script and its SHA1 for EVALSHA, hashed once per process.
struct Lua {
    body: &'static str,
    sha: OnceLock<String>,
}

impl Lua {
    const fn new(body: &'static str) -> Self {
        Self {
            body,
            sha: OnceLock::new(),
        }
    }

    fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| redis::Script::new(self.body).get_hash().to_owned())
    }
}

/// The server clock, for every script that reads it: `now_us()` and `now_ms()`. TIME makes a
/// script non-deterministic, hence effects replication (the default since Redis 5, asked for
/// explicitly for older servers).
macro_rules! clock_lua {
    () => {
        r"
redis.replicate_commands()
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
"
    };
}

/// Lua helpers shared by the scripts that touch the waiters (after [`clock_lua`]): purging fair
/// queue entries whose waiter stopped refreshing them, and waking exactly one waiter.
///
/// KEYS are always [lock, fence, wake, queue, alive, holder, done] (see [`Keys`]). A fair waiter's own wake
/// list is `wake .. ':' .. token`: not declared in KEYS, but it carries the same hash tag and so
/// lives in the same Cluster slot.
macro_rules! waiters_lua {
    () => {
        r"
local function purge(now_ms)
  local stale = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now_ms)
  for _, w in ipairs(stale) do
    redis.call('ZREM', KEYS[4], w)
    redis.call('DEL', KEYS[3] .. ':' .. w)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now_ms)
  return #stale
end
local function wake(linger)
  local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  local list = KEYS[3]
  if head then list = KEYS[3] .. ':' .. head end
  redis.call('DEL', list)
  redis.call('RPUSH', list, '1')
  redis.call('PEXPIRE', list, linger)
end
"
    };
}

/// Lua helpers of the acquire scripts (after [`clock_lua`]): the `--min-interval` check and the
/// holder's details.
///
/// ARGV of both acquire scripts starts: token, ttl ms, min-interval ms ('0' = off), host, pid,
/// command line, start time (unix seconds).
macro_rules! acquire_lua {
    () => {
        r"
local function done_ago()
  if ARGV[3] == '0' then return nil end
  local at = tonumber(redis.call('GET', KEYS[7]) or '')
  if not at then return nil end
  local ago = now_ms() - at
  if ago < tonumber(ARGV[3]) then return math.max(ago, 0) end
  return nil
end
local function holder()
  redis.call('DEL', KEYS[6])
  redis.call('HSET', KEYS[6], 'token', ARGV[1], 'host', ARGV[4], 'pid', ARGV[5],
    'argv', ARGV[6], 'started', ARGV[7])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
end
"
    };
}

/// Take the lock if free (SET NX PX), advance the fencing counter and record the holder's
/// details, all in one step. A retry of our own acquire whose reply was lost finds our token
/// and succeeds again. With a min-interval, a run that succeeded within it wins over all that.
/// Returns {1, fencing counter}, {0, holder's PTTL in ms} or {2, ms since that success}.
static ACQUIRE: Lua = Lua::new(concat!(
    clock_lua!(),
    acquire_lua!(),
    r"
local ago = done_ago()
if ago then return {2, ago} end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  holder()
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, redis.call('PTTL', KEYS[1])}
",
));

/// ACQUIRE for `--fair`: the lock goes only to the head of the queue of waiters (or to anyone
/// when nobody waits). A waiter that cannot take it joins the queue, or refreshes its entry
/// there, which lives `ARGV[8]` ms unless refreshed. Purging a dead head of a free lock wakes
/// the next one. ARGV: as ACQUIRE, then entry lifetime ms, wake-up linger ms.
/// Returns {1, fencing counter}, {0, holder's PTTL in ms (-2 when free but not our turn)} or
/// {2, ms since a success within the min-interval}.
static ACQUIRE_FAIR: Lua = Lua::new(concat!(
    clock_lua!(),
    waiters_lua!(),
    acquire_lua!(),
    r"
local ago = done_ago()
if ago then return {2, ago} end
local me = ARGV[1]
local now = now_us()
local purged = purge(math.floor(now / 1000))
local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
if (head == nil or head == me) and redis.call('SET', KEYS[1], me, 'NX', 'PX', ARGV[2]) then
  redis.call('ZREM', KEYS[4], me)
  redis.call('ZREM', KEYS[5], me)
  redis.call('DEL', KEYS[3] .. ':' .. me)
  holder()
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == me then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if not redis.call('ZSCORE', KEYS[4], me) then
  redis.call('ZADD', KEYS[4], now, me)
end
local entry = tonumber(ARGV[8])
redis.call('ZADD', KEYS[5], math.floor(now / 1000) + entry, me)
for i = 4, 5 do
  if redis.call('PTTL', KEYS[i]) < entry then redis.call('PEXPIRE', KEYS[i], entry) end
end
if purged > 0 and redis.call('EXISTS', KEYS[1]) == 0 then wake(ARGV[9]) end
return {0, redis.call('PTTL', KEYS[1])}
",
));

/// Extend the lease (and the holder's details with it) only while the key still holds our token.
/// Returns 1 extended, 0 key gone, -1 held by another owner.
static EXTEND: Lua = Lua::new(
    r"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
  return 1
end
if v then return -1 end
return 0
",
);

/// Delete the key (and the holder's details) only while it holds our token, and wake one
/// waiter: the head of the fair queue, or else whoever blocks first on the shared wake list.
/// With a min-interval (ARGV[3] ms, '0' = none) the run succeeded: record when, for that long,
/// before waking anyone, so the woken waiter sees it. ARGV: token, wake-up linger ms, min-interval ms.
/// Returns 1 released, 0 key already gone, -1 held by another owner (left untouched).
static RELEASE: Lua = Lua::new(concat!(
    clock_lua!(),
    waiters_lua!(),
    r"
local now = now_ms()
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[7], now, 'PX', ARGV[3])
end
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return -1 end
if v then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[6])
end
purge(now)
wake(ARGV[2])
if v then return 1 end
return 0
",
));

/// A waiter gives up: drop its queue entry, and if the lock is free pass on a wake-up it may
/// have taken. ARGV: token, wake-up linger ms. Returns 1.
static LEAVE: Lua = Lua::new(concat!(
    clock_lua!(),
    waiters_lua!(),
    r"
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[3] .. ':' .. ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  purge(now_ms())
  wake(ARGV[2])
end
return 1
",
));

/// Break-glass release: delete the lock whoever holds it (or only while it holds ARGV[2], when
/// not ''), advance the fencing counter past the old holder's token, and wake one waiter.
/// ARGV: wake-up linger ms, expected token or ''.
/// Returns {0, fencing counter} when the lock was free (nothing changed), {-1, fencing counter,
/// token} when it holds another token than expected (left alone), or {1, new fencing counter,
/// removed token, holder host, pid, command line, start time} ('' when unknown).
static FORCE_RELEASE: Lua = Lua::new(concat!(
    clock_lua!(),
    waiters_lua!(),
    r"
local v = redis.call('GET', KEYS[1])
if not v then return {0, tonumber(redis.call('GET', KEYS[2]) or '0')} end
if ARGV[2] ~= '' and v ~= ARGV[2] then
  return {-1, tonumber(redis.call('GET', KEYS[2]) or '0'), v}
end
local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
if h[1] ~= v then h = {} end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[6])
local fence = redis.call('INCR', KEYS[2])
purge(now_ms())
wake(ARGV[1])
return {1, fence, v, h[2] or '', h[3] or '', h[4] or '', h[5] or ''}
",
));

/// Undo a quorum's partial acquire: delete the lock (and the holder's details) only while it
/// holds our token, waking nobody (the lock was never ours to hand over). Returns 1 or 0.
static UNDO: Lua = Lua::new(
    r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[6])
  return 1
end
return 0
",
);

/// The fencing counter, for a quorum's read phase. Returns it (0 when never taken).
static FENCE_READ: Lua = Lua::new(
    r"
return tonumber(redis.call('GET', KEYS[2]) or '0') or 0
",
);

/// Raise the fencing counter to at least ARGV[1], for a quorum's write-back phase; never lowers
/// it. Returns the counter afterwards.
static FENCE_RAISE: Lua = Lua::new(
    r"
local c = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local t = tonumber(ARGV[1])
if c < t then
  redis.call('SET', KEYS[2], ARGV[1])
  return t
end
return c
",
);

/// Read a lock's state without changing anything.
/// Returns {fencing counter, ms since the last recorded success (-1 none), ms left of that
/// record, lock PTTL (-2 free), token, holder host, pid, command line, start time}.
static INSPECT: Lua = Lua::new(concat!(
    clock_lua!(),
    r"
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local now = now_ms()
local at = tonumber(redis.call('GET', KEYS[7]) or '')
local ago, left = -1, -2
if at then ago = math.max(now - at, 0); left = redis.call('PTTL', KEYS[7]) end
local v = redis.call('GET', KEYS[1])
if not v then return {fence, ago, left, -2} end
local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
if h[1] ~= v then h = {} end
return {fence, ago, left, redis.call('PTTL', KEYS[1]), v, h[2] or '', h[3] or '', h[4] or '', h[5] or ''}
",
));

/// The Redis keys of one lock; all share the `{name}` hash tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The lock itself: the holder's token, with the lease as its expiry.
    pub lock: String,
    /// The fencing counter, advanced by every acquisition.
    pub fence: String,
    /// The list a release pushes to wake one waiter (a fair waiter's own list adds `:TOKEN`).
    pub wake: String,
    /// The fair queue: waiter tokens scored by arrival (server time, µs).
    pub queue: String,
    /// When each fair waiter's queue entry lapses unless refreshed (server time, ms).
    pub alive: String,
    /// The holder's details (hash: token, host, pid, argv, started), with the lock's expiry.
    pub holder: String,
    /// When a run last succeeded (server time, ms), kept for `--min-interval`.
    pub done: String,
}

impl Keys {
    pub fn new(prefix: &str, name: &str) -> Self {
        let lock = format!("{prefix}{{{name}}}");
        Self {
            fence: format!("{lock}:fence"),
            wake: format!("{lock}:wake"),
            queue: format!("{lock}:queue"),
            alive: format!("{lock}:alive"),
            holder: format!("{lock}:holder"),
            done: format!("{lock}:done"),
            lock,
        }
    }

    /// Every key, in the order the scripts expect them in KEYS.
    fn all(&self) -> [&str; 7] {
        [
            &self.lock,
            &self.fence,
            &self.wake,
            &self.queue,
            &self.alive,
            &self.holder,
            &self.done,
        ]
    }

    /// The list a waiter blocks on: the shared one, or its own when waiting in a fair queue.
    fn wake_list(&self, token: &str, fair: bool) -> String {
        if fair {
            format!("{}:{token}", self.wake)
        } else {
            self.wake.clone()
        }
    }
}

/// The result of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// Taken; the fencing counter after this acquisition.
    Acquired { fence: i64 },
    /// Held by someone else, who has this much lease left (None: no expiry, or unknown).
    Busy { remaining: Option<Duration> },
    /// Not attempted: a run of this lock succeeded this long ago, within the min-interval.
    Skipped { ago: Duration },
}

/// What a compare-and-extend or compare-and-delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The key held our token (and was extended or deleted).
    Ours,
    /// The key was gone.
    Gone,
    /// The key held another owner's token; it was left untouched.
    Theirs,
}

/// The lock protocol as the lease and run code see it. One implementation per deployment kind
/// ([`SingleRedis`]: one server, a Sentinel service's master or the Cluster node of the
/// lock's slot; a quorum of masters composes several).
pub trait Locker: Send {
    /// A second connection on which a waiter blocks until a release wakes it.
    fn waker(&self, token: &str) -> Box<dyn Waker>;
    /// Stop waiting: leave the fair queue and, if the lock is free, pass on a wake-up this
    /// waiter may have taken.
    fn leave(&mut self, token: &str, timeout: Duration) -> Result<(), Failure>;
    /// One attempt to take the lock with `token` for `ttl`, within `timeout`.
    fn acquire(
        &mut self,
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Acquire, Failure>;
    /// Extend the lease to `ttl` from now if the lock still holds `token`.
    fn extend(&mut self, token: &str, ttl: Duration, timeout: Duration) -> Result<Held, Failure>;
    /// Delete the lock if it still holds `token`; `succeeded` records a successful run for
    /// the min-interval, if one is set.
    fn release(&mut self, token: &str, succeeded: bool, timeout: Duration)
    -> Result<Held, Failure>;
}

/// Blocks until a release wakes this waiter.
pub trait Waker: Send {
    /// Block up to `timeout`: Ok(true) when woken, Ok(false) when the time ran out.
    fn wait(&mut self, timeout: Duration) -> Result<bool, Failure>;
}

/// How long a wake-up waits in its list for a waiter to take it.
pub const WAKE_LINGER: Duration = Duration::from_secs(5);

/// A lock on one Redis server (one URL, a Sentinel service's master, or the Cluster node that
/// owns the lock's slot), over one connection that is re-opened after any I/O failure.
pub struct SingleRedis {
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
    /// After taking the lock, WAIT for this many replicas, this long (`--min-replicas`).
    min_replicas: Option<(u32, Duration)>,
    /// Check `maxmemory-policy` once per connection, in the same round trip as an acquire.
    preflight: bool,
}

/// Who holds (or is taking) a lock, as stored beside it for `redlock status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
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
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A lock's state as `redlock status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub keys: Keys,
    /// The fencing counter (0 when never taken).
    pub fence: i64,
    /// The holder's token and remaining lease (None when no expiry), when held.
    pub held: Option<(String, Option<Duration>)>,
    /// The holder's details, when held by a redlock that stored them.
    pub holder: Option<Holder>,
    /// How long ago a run last succeeded, and how long that record still holds off new runs.
    pub done: Option<(Duration, Option<Duration>)>,
}

/// What a forced release removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forced {
    /// The lock was free; nothing changed. The fencing counter as it is.
    Free { fence: i64 },
    /// The lock holds `token`, not the one expected; nothing changed.
    Other { token: String, fence: i64 },
    /// Removed the lock holding `token`; the fencing counter is now `fence`.
    Removed {
        token: String,
        fence: i64,
        holder: Option<Holder>,
    },
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
            preflight: false,
        }
    }

    /// After taking the lock, wait up to `wait` for `replicas` replicas to acknowledge it
    /// (WAIT); if fewer do, release it and fail (Refused). 0: do not wait.
    pub fn with_min_replicas(mut self, replicas: u32, wait: Duration) -> Self {
        self.min_replicas = (replicas > 0).then_some((replicas, wait));
        self
    }

    /// Warn (once per connection) when the server's `maxmemory-policy` could evict lock keys.
    /// The check rides in the same round trip as the first acquire on each connection.
    pub fn with_preflight(mut self, on: bool) -> Self {
        self.preflight = on;
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
        let reply = self.eval(&INSPECT, &[], timeout)?;
        let items = strings(&reply).ok_or_else(|| unexpected(self.endpoint(), &reply))?;
        let int = |i: usize| items.get(i).and_then(|s| s.parse::<i64>().ok());
        let ms = |v: i64| u64::try_from(v).ok().map(Duration::from_millis);
        let (Some(fence), Some(ago), Some(left), Some(pttl)) = (int(0), int(1), int(2), int(3))
        else {
            return Err(unexpected(self.endpoint(), &reply));
        };
        let held = match (pttl, items.get(4)) {
            (-2, _) | (_, None) => None,
            (pttl, Some(token)) => Some((token.clone(), ms(pttl))),
        };
        Ok(LockInfo {
            keys: self.keys.clone(),
            fence,
            holder: held
                .as_ref()
                .and_then(|_| holder_from(&items[5.min(items.len())..])),
            held,
            done: ms(ago).map(|ago| (ago, ms(left))),
        })
    }

    /// Break-glass: delete the lock whoever holds it (or only while it holds `expected`) and
    /// advance the fencing counter.
    pub fn force_release(
        &mut self,
        expected: Option<&str>,
        timeout: Duration,
    ) -> Result<Forced, Failure> {
        let args = [&*ms_arg(WAKE_LINGER), expected.unwrap_or("")];
        let reply = self.eval(&FORCE_RELEASE, &args, timeout)?;
        let items = strings(&reply).ok_or_else(|| unexpected(self.endpoint(), &reply))?;
        let fence = items.get(1).and_then(|s| s.parse::<i64>().ok());
        match (items.first().map(String::as_str), fence) {
            (Some("0"), Some(fence)) => Ok(Forced::Free { fence }),
            (Some("-1"), Some(fence)) if items.len() >= 3 => Ok(Forced::Other {
                token: items[2].clone(),
                fence,
            }),
            (Some("1"), Some(fence)) if items.len() >= 7 => Ok(Forced::Removed {
                token: items[2].clone(),
                fence,
                holder: holder_from(&items[3..]),
            }),
            _ => Err(unexpected(self.endpoint(), &reply)),
        }
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
    pub fn raise_fence(&mut self, to: i64, timeout: Duration) -> Result<i64, Failure> {
        match self.eval(&FENCE_RAISE, &[&to.to_string()], timeout)? {
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
        self.eval_checked(script, args, timeout, false)
    }

    /// [`Self::eval`]; with `preflight`, the first request on a new connection also asks for
    /// `maxmemory-policy` in the same round trip (pipelined) and warns about an evicting one.
    fn eval_checked(
        &mut self,
        script: &Lua,
        args: &[&str],
        timeout: Duration,
        preflight: bool,
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
            let first = if preflight && node.fresh {
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
            preflight_report(&addr, config);
        }
        reply
    }
}

/// Say what a `CONFIG GET maxmemory-policy` reply means for the lock: a warning when keys
/// with an expiry (lock keys) can be evicted; nothing but a -v line when CONFIG is refused
/// (renamed or disabled on managed services, or not allowed to this ACL user).
fn preflight_report(addr: &str, config: Option<Value>) {
    let policy = match &config {
        Some(Value::Array(items)) => items.get(1).and_then(|v| match v {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }),
        Some(Value::Map(pairs)) => pairs.first().and_then(|(_, v)| match v {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }),
        _ => None,
    };
    match policy.as_deref() {
        Some("noeviction") => {}
        Some(policy) => crate::report!(
            0,
            "eviction_policy" { "policy" => policy },
            "warning: Redis at {addr} has maxmemory-policy {policy}: under memory pressure it can \
             evict lock keys (volatile-* policies evict exactly keys with an expiry, as locks have); \
             use noeviction"
        ),
        None => crate::report!(
            1,
            "preflight_skipped" {},
            "could not read maxmemory-policy from Redis at {addr} (CONFIG refused or renamed); not checked"
        ),
    }
}

impl SingleRedis {
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
        let released = match self.eval(&RELEASE, &[token, &ms_arg(WAKE_LINGER), "0"], wait * 2) {
            Ok(_) => "released it".to_owned(),
            Err(failure) => format!("releasing it failed ({failure}); it expires by itself"),
        };
        Err(Failure::Refused(format!(
            "{why} (--min-replicas); {released}"
        )))
    }
}

/// A duration as a Redis argument in whole milliseconds, at least 1 (0 would mean "none").
fn ms_arg(d: Duration) -> String {
    d.as_millis().max(1).to_string()
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
        let mut args: Vec<&str> = vec![
            token,
            &ttl_ms,
            &interval,
            &holder.host,
            &pid,
            &holder.command,
            &started,
        ];
        let script = if self.fair {
            args.extend([entry.as_str(), linger.as_str()]);
            &ACQUIRE_FAIR
        } else {
            &ACQUIRE
        };
        let reply = self.eval_checked(script, &args, timeout, self.preflight)?;
        match integers(&reply).as_deref() {
            Some([1, fence]) => {
                let fence = *fence;
                if let Some((replicas, wait)) = self.min_replicas {
                    self.replicated(token, replicas, wait)?;
                }
                Ok(Acquire::Acquired { fence })
            }
            Some([0, pttl]) => Ok(Acquire::Busy {
                remaining: u64::try_from(*pttl).ok().map(Duration::from_millis),
            }),
            Some([2, ago]) => Ok(Acquire::Skipped {
                ago: Duration::from_millis(u64::try_from(*ago).unwrap_or(0)),
            }),
            _ => Err(unexpected(self.endpoint(), &reply)),
        }
    }

    fn extend(&mut self, token: &str, ttl: Duration, timeout: Duration) -> Result<Held, Failure> {
        let reply = self.eval(&EXTEND, &[token, &ms_arg(ttl)], timeout)?;
        held(self.endpoint(), &reply)
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
        let reply = self.eval(&RELEASE, &[token, &ms_arg(WAKE_LINGER), &done], timeout)?;
        held(self.endpoint(), &reply)
    }

    fn waker(&self, token: &str) -> Box<dyn Waker> {
        Box::new(RedisWaker {
            conn: Connection::new(self.endpoint().clone()),
            list: self.keys.wake_list(token, self.fair),
        })
    }

    fn leave(&mut self, token: &str, timeout: Duration) -> Result<(), Failure> {
        self.eval(&LEAVE, &[token, &ms_arg(WAKE_LINGER)], timeout)
            .map(drop)
    }
}

/// A BLPOP on the lock's wake list, over its own connection.
struct RedisWaker {
    conn: Connection,
    list: String,
}

/// How long a waker may take to connect, and how late past its timeout a BLPOP reply may be
/// (Redis checks blocked clients' timeouts about every 100 ms).
const WAKER_SLACK: Duration = Duration::from_secs(2);

impl Waker for RedisWaker {
    fn wait(&mut self, timeout: Duration) -> Result<bool, Failure> {
        // BLPOP takes seconds; 0 would mean forever.
        let seconds = format!("{:.3}", timeout.as_secs_f64().max(0.001));
        let list = &self.list;
        let reply = self
            .conn
            .request(Instant::now() + timeout + WAKER_SLACK, |node| {
                redis::cmd("BLPOP")
                    .arg(list)
                    .arg(&seconds)
                    .query::<Value>(&mut node.conn)
            })?;
        match reply {
            Value::Nil => Ok(false),
            Value::Array(_) => Ok(true),
            other => Err(unexpected(self.conn.endpoint(), &other)),
        }
    }
}

fn integers(value: &Value) -> Option<Vec<i64>> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A script's array reply as strings (integers written out, nil as "").
fn strings(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(i) => Some(i.to_string()),
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                Value::Nil => Some(String::new()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A holder from [host, pid, command line, start time]; None when not recorded.
fn holder_from(items: &[String]) -> Option<Holder> {
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

fn held(endpoint: &Endpoint, reply: &Value) -> Result<Held, Failure> {
    match reply {
        Value::Int(1) => Ok(Held::Ours),
        Value::Int(0) => Ok(Held::Gone),
        Value::Int(-1) => Ok(Held::Theirs),
        other => Err(unexpected(endpoint, other)),
    }
}

fn unexpected(endpoint: &Endpoint, reply: &Value) -> Failure {
    Failure::Refused(format!(
        "unexpected reply from Redis at {endpoint}: {reply:?}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_hash_tag() {
        let keys = Keys::new("redlock:", "backup");
        assert_eq!(keys.lock, "redlock:{backup}");
        assert_eq!(keys.fence, "redlock:{backup}:fence");
        let odd = Keys::new("p:", "a}b {c}");
        assert_eq!(odd.lock, "p:{a}b {c}}");
        assert!(odd.fence.starts_with(&odd.lock));
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
