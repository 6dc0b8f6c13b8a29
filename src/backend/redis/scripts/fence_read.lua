-- The fencing counter, for a quorum's read phase: the counter, or this server's clock in
-- microseconds when that is larger (as advance() would take it), so that the token a majority
-- agrees on is above both.
-- KEYS and ARGV: `FenceRead` in calls.rs.
-- Returns that number; a counter past 2^53 as its digits, which a Lua number would round (the
-- quorum's token, one past the largest read, would then repeat).
local v = redis.call('GET', fence)
local digits = v and string.match(v, '^0*([1-9]%d*)$')
if digits and tonumber(digits) >= 9007199254740992 then return digits end
return math.max(counter(), now_us())
