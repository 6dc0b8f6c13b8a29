-- Take one place among several holders: a slot of a semaphore (--limit N: at most N at once)
-- or a shared hold (--shared: any number at once, but never beside an exclusive holder, and
-- not ahead of a queued exclusive waiter). The lock key is then a sorted set of the holders'
-- tokens scored by when each lease ends (see holders.lua). Holders whose lease ended are
-- purged first, by the server's clock. Each place advances the lock's one fencing counter.
-- A retry of our own acquire whose reply was lost finds our token and succeeds again, with
-- the fencing token it was given (kept in the holder's details).
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: as acquire.lua (ten), then how it is held ('limit N' or 'shared'), N (0 for shared),
-- fair ('1' = first come, first served among waiters), waited ('1' when this waiter was
-- turned away before: let in with room left, it passes a wake-up on to the next waiter).
-- Returns {1, fencing counter}, {2, ms since a success within the min-interval},
-- {3, how the lock is held instead: 'lock' (an exclusive holder), 'limit N', 'shared',
-- 'type T'}, or {0, ms until worth trying again (-1 unknown), 0 full / 1 room left but
-- promised to waiters ahead}.
local ago = done_ago()
if ago then return {2, ago} end
local me, kind, limit, fair = ARGV[1], ARGV[11], tonumber(ARGV[12]), ARGV[13] == '1'
local shared = limit == 0
local t = lock_type()
if t == 'string' then
  -- An exclusive holder: shared holders wait for it; a semaphore never meets one.
  if shared then return turned_away({0, redis.call('PTTL', KEYS[1]), 0}) end
  return {3, 'lock'}
end
if t ~= 'zset' and t ~= 'none' then return {3, 'type ' .. t} end
local now_u = now_us()
local now = math.floor(now_u / 1000)
local held, used = holders_now(now)
if held > 0 and used ~= kind then return {3, used} end
local ttl = tonumber(ARGV[2])
if redis.call('ZSCORE', KEYS[1], me) then
  -- Our own token, from the details recorded with it: the counter has moved on if another
  -- holder came in since, and its value is that holder's token.
  local mine = tonumber(details(me).fence)
  if mine then
    redis.call('ZADD', KEYS[1], now + ttl, me)
    settle()
    return {1, mine}
  end
  -- Recorded without it (by an older redlock): take the place again, with a new token.
  redis.call('ZREM', KEYS[1], me)
  held = held - 1
end
local dropped = purge(now)
local room
if shared then
  -- Every live queue entry is an exclusive waiter (--shared is never --fair).
  room = redis.call('ZCARD', KEYS[5]) == 0
elseif fair then
  local ahead = redis.call('ZRANK', KEYS[4], me) or redis.call('ZCARD', KEYS[4])
  room = ahead < limit - held
else
  room = held < limit
end
if room then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('ZADD', KEYS[1], now + ttl, me)
  redis.call('SET', KEYS[8], kind)
  redis.call('HSET', KEYS[9], me, cjson.encode({
    host = ARGV[4], pid = ARGV[5], argv = ARGV[6], started = ARGV[7], since = now,
    fence = fence }))
  settle()
  dequeue(me)
  -- A release wakes one waiter; room enough for more: wake the next, and so on.
  if ARGV[14] == '1' and (shared or held + 1 < limit) then wake(ARGV[9]) end
  return {1, fence}
end
if fair then
  enqueue(me, now_u, tonumber(ARGV[8]))
  if dropped > 0 and held < limit then wake(ARGV[9]) end
end
if shared then
  -- Behind a queued exclusive waiter: it is let in, or its entry lapses, by then.
  local last = redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')
  return turned_away({0, math.max(tonumber(last[2]) - now, 1), 1})
end
if held < limit then return turned_away({0, -1, 1}) end
return turned_away({0, soonest(now), 0})
