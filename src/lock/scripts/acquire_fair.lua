-- acquire.lua for --fair: the lock goes only to the head of the queue of waiters (or to
-- anyone when nobody waits). A waiter that cannot take it joins the queue, or refreshes its
-- entry there, which lives ARGV[8] ms unless refreshed. Purging a dead head of a free lock
-- wakes the next one.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done.
-- ARGV: as acquire.lua, then entry lifetime ms, wake-up linger ms.
-- Returns {1, fencing counter}, {0, holder's PTTL in ms (-2 when free but not our turn)} or
-- {2, ms since a success within the min-interval}.
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
