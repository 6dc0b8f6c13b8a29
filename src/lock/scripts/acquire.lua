-- Take the lock if free (SET NX PX), advance the fencing counter and record the holder's
-- details, all in one step. A retry of our own acquire whose reply was lost finds our token
-- and succeeds again. With a min-interval, a run that succeeded within it wins over all that.
-- Shared holders (--shared) keep it out until the last leaves, and it queues behind them.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: token, ttl ms, min-interval ms ('0' = off), host, pid, command line, start time,
-- queue entry lifetime ms, wake-up linger ms, waiting lifetime ms (a waiter turned away is
-- recorded as waiting that long, see waiters.lua).
-- Returns {1, fencing counter}, {0, holder's PTTL in ms}, {2, ms since that success},
-- {0, ms until a shared holder's lease ends, 2} (queued behind shared holders) or
-- {3, how the key is used instead: 'limit N', 'type T'}.
local ago = done_ago()
if ago then return {2, ago} end
local several = held_by_several(ARGV[1])
if several then return turned_away(several) end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  dequeue(ARGV[1])
  holder()
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return turned_away({0, redis.call('PTTL', KEYS[1])})
