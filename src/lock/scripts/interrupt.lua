-- Cut a waiter's BLPOP short: push a marker onto its own wake list (KEYS[3] .. ':' .. token,
-- the first list its BLPOP watches), which the server hands to that BLPOP at once. The marker
-- lingers ARGV[2] ms if no BLPOP takes it; leave.lua deletes it with the list.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting (uses wake).
-- ARGV: token, linger ms.
-- Returns 1.
local own = KEYS[3] .. ':' .. ARGV[1]
redis.call('RPUSH', own, 'stop')
redis.call('PEXPIRE', own, ARGV[2])
return 1
