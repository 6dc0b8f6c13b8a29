-- Raise the fencing counter to at least ARGV[1], for a quorum's write-back phase; never
-- lowers it.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting (uses fence).
-- ARGV: the counter's new floor.
-- Returns the counter afterwards.
local c = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local t = tonumber(ARGV[1])
if c < t then
  redis.call('SET', KEYS[2], ARGV[1])
  return t
end
return c
