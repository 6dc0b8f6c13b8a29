-- Give up our place among several holders (acquire_many.lua) and wake one waiter: for a
-- semaphore at every release (a slot is free), for shared holders when the last one leaves
-- (only an exclusive waiter waits for them). With a min-interval the run succeeded: record
-- when, for that long, before waking anyone.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: token, wake-up linger ms, min-interval ms ('0' = none).
-- Returns 1 released, 0 gone (our lease had ended, or we were removed), -1 held by an
-- exclusive holder (left untouched).
local now = now_ms()
-- On a quorum a node may have turned us away while a majority let us in: we wait no more.
redis.call('ZREM', KEYS[10], ARGV[1])
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[7], now, 'PX', ARGV[3])
end
local t = lock_type()
if t == 'string' then return -1 end
local ours = 0
if t == 'zset' then
  local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '')
  if ends and ends > now then ours = 1 end
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[9], ARGV[1])
  purge_holders(now)
  settle()
end
purge(now)
if redis.call('GET', KEYS[8]) ~= 'shared' or redis.call('EXISTS', KEYS[1]) == 0 then
  wake(ARGV[2])
end
return ours
