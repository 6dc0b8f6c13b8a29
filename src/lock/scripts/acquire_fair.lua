-- acquire.lua for --fair: the lock goes only to the head of the queue of waiters (or to
-- anyone when nobody waits). A waiter that cannot take it joins the queue, or refreshes its
-- entry there, which lives ARGV[8] ms unless refreshed. Purging a dead head of a free lock
-- wakes the next one.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: as acquire.lua.
-- Returns {1, fencing counter}, {0, holder's PTTL in ms (-2 when free but not our turn)},
-- {2, ms since a success within the min-interval}, or as acquire.lua behind shared holders
-- or on a semaphore's key.
local ago = done_ago()
if ago then return {2, ago} end
local me = ARGV[1]
local several = held_by_several(me)
if several then return turned_away(several) end
local now = now_us()
local purged = purge(math.floor(now / 1000))
local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
if (head == nil or head == me) and redis.call('SET', KEYS[1], me, 'NX', 'PX', ARGV[2]) then
  dequeue(me)
  holder()
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == me then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
enqueue(me, now, tonumber(ARGV[8]))
if purged > 0 and redis.call('EXISTS', KEYS[1]) == 0 then wake(ARGV[9]) end
return turned_away({0, redis.call('PTTL', KEYS[1])})
