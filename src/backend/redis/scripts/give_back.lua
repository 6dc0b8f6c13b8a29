-- Give the lock back: delete it, and the holder's details, only while it holds our token. A
-- set (held by several since our lease ended) is another owner's: GET fails on it.
-- KEYS and ARGV: `GiveBack` in calls.rs.
-- Returns 1 released, 0 the key is gone, -1 held by another owner (left untouched).
local v = redis.pcall('GET', lock)
if v == token then
  redis.call('DEL', lock, holder)
  return 1
end
if v then return -1 end
return 0
