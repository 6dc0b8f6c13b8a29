-- Break-glass release: delete the lock whoever holds it (or only while it holds ARGV[2],
-- when not ''), advance the fencing counter past the old holder's token, and wake one waiter.
-- Held by several (a semaphore's slots, shared holders), it removes one holder: the one whose
-- token is ARGV[2], or the only one when ARGV[2] is '' (several and no token: refused, so that
-- nobody removes holders they did not name). Holders whose lease ended are purged first.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: wake-up linger ms, expected token or ''.
-- Returns {0, fencing counter, --fair waiters dropped} when the lock was free (its fair queue,
-- if any, is cleared: live waiters join it again at their next attempt; a dead one no longer
-- holds up the others); {-1, fencing counter, token} when one holder has it with another token
-- than expected (left alone); {-1, fencing counter, '', how it is held ('limit N', 'shared'),
-- holders} when held by several, none with that token (left alone); {-2, fencing counter, how
-- it is held, holders} when held by several and no token was given (left alone); or {1, new
-- fencing counter, removed token, holder host, pid, command line, start time ('' when
-- unknown), how it was held ('lock' for one holder), holders left}.
-- A key of another type is an error reply.
local t = lock_type()
if t ~= 'none' and t ~= 'string' and t ~= 'zset' then return foreign(t) end
local now = now_ms()
local function counter() return tonumber(redis.call('GET', KEYS[2]) or '0') end
if t == 'zset' then
  local n, used = holders_now(now)
  if n == 0 then
    t = 'none'
  else
    local kind = used ~= '' and used or 'set'
    local me = ARGV[2]
    if me == '' then
      if n > 1 then return {-2, counter(), kind, n} end
      me = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
    elseif not redis.call('ZSCORE', KEYS[1], me) then
      return {-1, counter(), '', kind, n}
    end
    local d = details(me)
    redis.call('ZREM', KEYS[1], me)
    redis.call('HDEL', KEYS[9], me)
    local fence = redis.call('INCR', KEYS[2])
    settle()
    purge(now)
    -- A semaphore's slot is free; shared holders let a waiter in only when the last one goes.
    if kind ~= 'shared' or redis.call('EXISTS', KEYS[1]) == 0 then wake(ARGV[1]) end
    return {1, fence, me, text(d.host), text(d.pid), text(d.argv), text(d.started), kind, n - 1}
  end
end
if t == 'none' then
  local queued = redis.call('ZRANGE', KEYS[4], 0, -1)
  for _, w in ipairs(queued) do redis.call('DEL', KEYS[3] .. ':' .. w) end
  redis.call('DEL', KEYS[4], KEYS[5])
  if #queued > 0 then wake(ARGV[1]) end
  return {0, counter(), #queued}
end
local v = redis.call('GET', KEYS[1])
if ARGV[2] ~= '' and v ~= ARGV[2] then
  return {-1, counter(), v}
end
local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
if h[1] ~= v then h = {} end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[6])
local fence = redis.call('INCR', KEYS[2])
purge(now)
wake(ARGV[1])
return {1, fence, v, h[2] or '', h[3] or '', h[4] or '', h[5] or '', 'lock', 0}
