-- Helpers shared by the scripts that touch the waiters (included after clock.lua):
-- purge(now_ms) drops fair-queue entries whose waiter stopped refreshing them and returns how
-- many it dropped; wake(linger) wakes exactly one waiter, the head of the fair queue or else
-- whoever blocks first on the shared wake list, with a wake-up that lingers `linger` ms;
-- enqueue(me, now_us, entry) puts a waiter in the queue (keeping its place if there) and keeps
-- it there `entry` ms unless refreshed; dequeue(me) takes it out, drops its own wake list, and
-- takes it out of the registry of
-- waiters. waiting(me, now_ms, lifetime) records in that registry (KEYS[10], any kind of lock,
-- --fair or not) that `me` was turned away and counts as waiting for `lifetime` ms, which
-- covers its longest sleep before its next attempt (each attempt refreshes it), and drops
-- entries that lapsed; `redlock status` counts the live ones.
--
-- KEYS are always [lock, fence, wake, queue, alive, holder, done, kind, holders, waiting]
-- (see keys.rs). A waiter's own wake list is KEYS[3] .. ':' .. token: not declared in KEYS,
-- but it carries the same hash tag and so lives in the same Cluster slot.
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
local function enqueue(me, now_us, entry)
  if not redis.call('ZSCORE', KEYS[4], me) then
    redis.call('ZADD', KEYS[4], now_us, me)
  end
  redis.call('ZADD', KEYS[5], math.floor(now_us / 1000) + entry, me)
  for i = 4, 5 do
    if redis.call('PTTL', KEYS[i]) < entry then redis.call('PEXPIRE', KEYS[i], entry) end
  end
end
local function dequeue(me)
  redis.call('ZREM', KEYS[4], me)
  redis.call('ZREM', KEYS[5], me)
  redis.call('ZREM', KEYS[10], me)
  redis.call('DEL', KEYS[3] .. ':' .. me)
end
local function waiting(me, now_ms, lifetime)
  redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now_ms)
  redis.call('ZADD', KEYS[10], now_ms + lifetime, me)
  if redis.call('PTTL', KEYS[10]) < lifetime then redis.call('PEXPIRE', KEYS[10], lifetime) end
end
