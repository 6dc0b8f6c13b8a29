-- The fencing counter, for a quorum's read phase.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting (uses fence).
-- ARGV: none.
-- Returns the counter (0 when never taken).
return tonumber(redis.call('GET', KEYS[2]) or '0') or 0
