-- Extend our place among several holders (acquire_many.lua) while we still have it: our lease
-- has not ended (by the server's clock) and nobody removed us. Lost, the run's record ends as
-- `lost_outcome`.
-- KEYS and ARGV: `ExtendMany` in calls.rs.
-- Returns 1 extended, 0 gone (our lease ended, or we were removed), -1 held by an exclusive
-- holder.
local t = lock_type()
local now = now_ms()
local ends = nil
if t == 'zset' then ends = tonumber(redis.call('ZSCORE', lock, token) or '') end
if ends and ends > now then
  redis.call('ZADD', lock, now + tonumber(ttl), token)
  settle()
  return 1
end
pcall(ring().record_end, tonumber(slot), token, lost_outcome, lost_status, nil, lost_by)
if t == 'string' then return -1 end
return 0
