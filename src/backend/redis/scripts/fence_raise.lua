-- Raise the fencing counter to at least `at_least` (its digits, as Rust wrote the i64), for a
-- quorum's write-back phase; never lowers it, and renews its lifetime. Compared digit by
-- digit: a Lua number is exact only to 2^53. A counter that is no whole number is replaced.
-- KEYS and ARGV: `FenceRaise` in calls.rs.
-- Returns the counter afterwards, as its digits.
local c = redis.call('GET', fence)
local digits = c and string.match(c, '^0*(%d+)$')
if digits and (#digits > #at_least or (#digits == #at_least and digits >= at_least)) then
  redis.call('PEXPIRE', fence, FENCE_LIFETIME_MS)
  return digits
end
redis.call('SET', fence, at_least, 'PX', FENCE_LIFETIME_MS)
return at_least
