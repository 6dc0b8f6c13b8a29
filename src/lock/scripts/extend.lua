-- Extend the lease (and the holder's details with it) only while the key still holds our
-- token. A set (held by several since our lease ended) is another owner's: GET fails on it.
-- KEYS and ARGV: `Extend` in calls.rs.
-- Returns 1 extended, 0 key gone, -1 held by another owner.
local v = redis.pcall('GET', lock)
if type(v) == 'table' then return -1 end
if v == token then
  prolong(ttl)
  return 1
end
if v then return -1 end
return 0
