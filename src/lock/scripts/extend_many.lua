-- Extend our place among several holders (acquire_many.lua) while we still have it: our lease
-- has not ended (by the server's clock) and nobody removed us.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: token, ttl ms.
-- Returns 1 extended, 0 gone (our lease ended, or we were removed), -1 held by an exclusive
-- holder.
local t = lock_type()
if t == 'string' then return -1 end
if t ~= 'zset' then return 0 end
local now = now_ms()
local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '')
if not ends or ends <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
settle()
return 1
