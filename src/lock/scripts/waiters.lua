-- The clients waiting for the lock (included after clock.lua and wake.lua): the fair queue
-- (`queue`: tokens scored by arrival, server time in us; `alive`: when each entry lapses unless
-- refreshed, ms), used by --fair waiters and by exclusive waiters behind shared holders; and
-- the registry of waiters (`waiting`: token -> until when it counts as waiting, ms), where
-- every waiter turned away, any kind of lock, is recorded for `redlock status`.
--
-- wake_one(linger_ms) wakes exactly one waiter: the head of the fair queue, or else whoever
-- blocks first on the shared wake list. purge_queue(now) drops queue entries whose waiter
-- stopped refreshing them and returns how many. pass_on(linger_ms) wakes one waiter, after
-- purging, when any may be waiting (registered or queued): with nobody waiting, a release
-- touches nothing more. enqueue(who, now_us, entry_ms) puts a waiter in the queue (keeping its
-- place if there) and keeps it there `entry_ms` unless refreshed; dequeue(who) takes it out of
-- the queue and the registry and drops its own wake list. register(who, now, lifetime_ms)
-- records that `who` was turned away and counts as waiting for `lifetime_ms`, which covers its
-- longest sleep before its next attempt (each attempt refreshes it), and drops entries that
-- lapsed.
-- Uses: wake, queue, alive, waiting.
local function wake_one(linger_ms)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  local list = wake
  if head then list = own_list(head) end
  redis.call('DEL', list)
  push(list, '1', linger_ms)
end
local function purge_queue(now)
  local stale = redis.call('ZRANGEBYSCORE', alive, '-inf', now)
  if #stale == 0 then return 0 end
  for _, w in ipairs(stale) do
    redis.call('ZREM', queue, w)
    redis.call('DEL', own_list(w))
  end
  redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
  return #stale
end
local function pass_on(linger_ms)
  if redis.call('EXISTS', waiting, queue) == 0 then return end
  purge_queue(now_ms())
  wake_one(linger_ms)
end
local function enqueue(who, now_u, entry_ms)
  if not redis.call('ZSCORE', queue, who) then
    redis.call('ZADD', queue, now_u, who)
  end
  redis.call('ZADD', alive, math.floor(now_u / 1000) + entry_ms, who)
  for _, key in ipairs({queue, alive}) do
    if redis.call('PTTL', key) < entry_ms then redis.call('PEXPIRE', key, entry_ms) end
  end
end
local function dequeue(who)
  redis.call('ZREM', queue, who)
  redis.call('ZREM', alive, who)
  redis.call('ZREM', waiting, who)
  redis.call('DEL', own_list(who))
end
local function register(who, now, lifetime_ms)
  redis.call('ZREMRANGEBYSCORE', waiting, '-inf', now)
  redis.call('ZADD', waiting, now + lifetime_ms, who)
  if redis.call('PTTL', waiting) < lifetime_ms then redis.call('PEXPIRE', waiting, lifetime_ms) end
end
