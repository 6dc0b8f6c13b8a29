-- Raise the fencing counter to at least `at_least`, for a quorum's write-back phase; never
-- lowers it.
-- KEYS and ARGV: `FenceRaise` in calls.rs.
-- Returns the counter afterwards.
local c = counter()
local floor = tonumber(at_least)
if c < floor then
  redis.call('SET', fence, at_least)
  return floor
end
return c
