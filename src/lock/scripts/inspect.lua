-- Read a lock's state without changing anything (redlock status and list). Entries that lapsed
-- by the server's clock (holders whose lease ended, waiters that stopped coming back) are
-- skipped, not purged: purging is for the scripts that write.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: none.
-- Returns {fencing counter, ms since the last recorded success (-1 none), ms left of that
-- record, lock PTTL (-2 free), live waiters in the queue, ms the oldest of them has waited (-1
-- none), live waiters in the registry of waiters, how the lock is held}, then:
-- - held by one ('lock'): token, holder host, pid, command line, start time;
-- - held by several ('limit N', 'shared', or 'set' when the kind is not recorded): for each
--   live holder, soonest lease end first, token, ms of lease left, host, pid, command line,
--   start time, ms since it took its place by the server clock (-1 unknown);
-- - free (''): nothing more (also a set whose leases all ended).
-- A key of another type is an error reply.
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
local waiting = redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf')
local head = {fence, ago, left, -2, queued, oldest, waiting, ''}
local t = lock_type()
if t == 'none' then return head end
if t == 'string' then
  local v = redis.call('GET', KEYS[1])
  local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
  if h[1] ~= v then h = {} end
  head[4], head[8] = redis.call('PTTL', KEYS[1]), 'lock'
  for _, x in ipairs({v, h[2] or '', h[3] or '', h[4] or '', h[5] or ''}) do
    head[#head + 1] = x
  end
  return head
end
if t ~= 'zset' then return foreign(t) end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
if #live == 0 then return head end
head[4], head[8] = redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[8]) or 'set'
for i = 1, #live, 2 do
  local token = live[i]
  local d = details(token)
  local since = tonumber(d.since)
  local age = -1
  if since then age = math.max(now - since, 0) end
  for _, x in ipairs({token, tonumber(live[i + 1]) - now, text(d.host), text(d.pid),
      text(d.argv), text(d.started), age}) do
    head[#head + 1] = x
  end
end
return head
