-- Read a lock's state without changing anything (redlock status and list).
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: none.
-- Returns {fencing counter, ms since the last recorded success (-1 none), ms left of that
-- record, lock PTTL (-2 free), live --fair waiters, ms the oldest of them has waited (-1 none),
-- token, holder host, pid, command line, start time}; only the first six when the lock is free.
-- A waiter whose entry lapsed (it stopped refreshing it: dead) is not counted.
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local now = now_ms()
local at = tonumber(redis.call('GET', KEYS[7]) or '')
local ago, left = -1, -2
if at then ago = math.max(now - at, 0); left = redis.call('PTTL', KEYS[7]) end
local queued, oldest = #redis.call('ZRANGEBYSCORE', KEYS[5], '(' .. now, '+inf'), -1
-- The first live entry in arrival order (dead ones ahead of it are not yet purged).
for _, w in ipairs(redis.call('ZRANGE', KEYS[4], 0, 15)) do
  if tonumber(redis.call('ZSCORE', KEYS[5], w) or '0') > now then
    local arrived = tonumber(redis.call('ZSCORE', KEYS[4], w))
    oldest = math.max(now - math.floor(arrived / 1000), 0)
    break
  end
end
local v = redis.call('GET', KEYS[1])
if not v then return {fence, ago, left, -2, queued, oldest} end
local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
if h[1] ~= v then h = {} end
return {fence, ago, left, redis.call('PTTL', KEYS[1]), queued, oldest, v, h[2] or '', h[3] or '',
  h[4] or '', h[5] or ''}
