-- Extend the lease, and the holder's details with it, only while the key holds our token. A
-- set (held by several since our lease ended) is another owner's: GET fails on it.
-- KEYS and ARGV: `Extend` in calls.rs.
-- Returns 1 extended, 0 the key is gone, -1 held by another owner.
local v = redis.pcall('GET', lock)
if v == token then
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', holder, ttl)
  return 1
end
if v then return -1 end
return 0
