-- Extend the lease (and the holder's details with it) only while the key still holds our
-- token. A set (held by several since our lease ended) is another owner's: GET fails on it
-- (an error reply, a table). Lost, the run's record ends as `lost_outcome` (the command is
-- stopped, and the release that follows never comes).
-- KEYS and ARGV: `Extend` in calls.rs.
-- Returns 1 extended, 0 key gone, -1 held by another owner.
local v = redis.pcall('GET', lock)
if v == token then
  prolong(ttl)
  return 1
end
record_end(token, now_ms(), lost_outcome, lost_status)
if v then return -1 end
return 0
