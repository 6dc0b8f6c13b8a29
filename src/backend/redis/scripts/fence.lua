-- The fencing counter: counter() is its value (0 when never taken, or expired); advance() moves
-- it on for a new holder (or past a removed one) and returns the new value, the holder's
-- fencing token: one past the counter, or the server's clock in microseconds when that is
-- larger. So tokens go on increasing across a counter that was lost (a restart without
-- persistence, FLUSHALL, a failover to a replica that missed the last acquisitions, or the
-- counter expiring after the lock was idle), as long as the server's clock does not step back
-- by more than the time between two acquisitions. The counter expires FENCE_LIFETIME_MS after
-- the last acquisition (`FENCE_LIFETIME` in lock/mod.rs says the same): a lock used once a month
-- still shows it, and none lives forever.
-- Needs clock.lua before it.
local FENCE_LIFETIME_MS = '3456000000'
local function counter()
  return tonumber(redis.call('GET', fence) or '0') or 0
end
-- The token as its digits: INCRBY counts in 64-bit integers, a Lua number only to 2^53.
local function advance()
  local c = counter()
  local step = math.max(1, now_us() - c)
  local token = redis.call('INCRBY', fence, string.format('%.0f', step))
  redis.call('PEXPIRE', fence, FENCE_LIFETIME_MS)
  if token < 9007199254740992 then return string.format('%.0f', token) end
  return redis.call('GET', fence)
end
