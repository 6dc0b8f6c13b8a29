-- The registry of waiters (`waiting`: token -> until when it counts as waiting, server time in
-- ms), where every waiter turned away, any kind of lock, is recorded for `redlock status`, and
-- which a release looks at to know whether anyone may wait (pass_on.lua).
-- register(who, now, lifetime_ms) records that `who` was turned away and counts as waiting for
-- `lifetime_ms`, which covers its longest sleep before its next attempt (each attempt
-- refreshes it), and drops entries that lapsed.
local function register(who, now, lifetime_ms)
  redis.call('ZREMRANGEBYSCORE', waiting, '-inf', now)
  redis.call('ZADD', waiting, now + lifetime_ms, who)
  if redis.call('PTTL', waiting) < lifetime_ms then redis.call('PEXPIRE', waiting, lifetime_ms) end
end
