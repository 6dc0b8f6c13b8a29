-- Read a lock's state without changing anything (redlock status and list).
--
-- KEYS: lock, fence, wake, queue, alive, holder, done.
-- ARGV: none.
-- Returns {fencing counter, ms since the last recorded success (-1 none), ms left of that
-- record, lock PTTL (-2 free), token, holder host, pid, command line, start time}; only the
-- first four when the lock is free.
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local now = now_ms()
local at = tonumber(redis.call('GET', KEYS[7]) or '')
local ago, left = -1, -2
if at then ago = math.max(now - at, 0); left = redis.call('PTTL', KEYS[7]) end
local v = redis.call('GET', KEYS[1])
if not v then return {fence, ago, left, -2} end
local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
if h[1] ~= v then h = {} end
return {fence, ago, left, redis.call('PTTL', KEYS[1]), v, h[2] or '', h[3] or '', h[4] or '', h[5] or ''}
