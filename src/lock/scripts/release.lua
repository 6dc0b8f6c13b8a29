-- Delete the key (and the holder's details) only while it holds our token, and wake one
-- waiter: the head of the fair queue, or else whoever blocks first on the shared wake list.
-- With a min-interval the run succeeded: record when, for that long, before waking anyone,
-- so the woken waiter sees it.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: token, wake-up linger ms, min-interval ms ('0' = none).
-- Returns 1 released, 0 key already gone, -1 held by another owner (left untouched).
local now = now_ms()
-- On a quorum a node may have turned us away while a majority let us in: we wait no more.
redis.call('ZREM', KEYS[10], ARGV[1])
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[7], now, 'PX', ARGV[3])
end
-- A set (held by several since our lease ended) is another owner's: GET fails on it.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return -1 end
if v and v ~= ARGV[1] then return -1 end
if v then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[6])
end
purge(now)
wake(ARGV[2])
if v then return 1 end
return 0
