-- Extend the lease (and the holder's details with it) only while the key still holds our
-- token.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting (uses lock and holder).
-- ARGV: token, ttl ms.
-- Returns 1 extended, 0 key gone, -1 held by another owner.
-- A set (held by several since our lease ended) is another owner's: GET fails on it.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return -1 end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
  return 1
end
if v then return -1 end
return 0
