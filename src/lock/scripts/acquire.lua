-- Take the lock if free (SET NX PX), advance the fencing counter and record the holder's
-- details, all in one step. A retry of our own acquire whose reply was lost finds our token
-- and succeeds again. With a min-interval, a run that succeeded within it wins over all that.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done.
-- ARGV: token, ttl ms, min-interval ms ('0' = off), host, pid, command line, start time.
-- Returns {1, fencing counter}, {0, holder's PTTL in ms} or {2, ms since that success}.
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
