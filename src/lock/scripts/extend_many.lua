-- Extend our place among several holders (acquire_many.lua) while we still have it: our lease
-- has not ended (by the server's clock) and nobody removed us.
-- KEYS and ARGV: `ExtendMany` in calls.rs.
-- Returns 1 extended, 0 gone (our lease ended, or we were removed), -1 held by an exclusive
-- holder.
local t = lock_type()
if t == 'string' then return -1 end
if t ~= 'zset' then return 0 end
local now = now_ms()
local ends = tonumber(redis.call('ZSCORE', lock, token) or '')
if not ends or ends <= now then return 0 end
redis.call('ZADD', lock, now + tonumber(ttl), token)
settle()
return 1
