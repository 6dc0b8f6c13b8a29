-- Helpers of the acquire scripts (included after clock.lua, waiters.lua and holders.lua):
-- done_ago() is the ms since a run succeeded within the --min-interval (nil when none or
-- off); holder() records an exclusive holder's details beside the lock, with the lock's
-- expiry; turned_away(reply) records a waiter turned away ({0, ...}) in the registry of
-- waiters (see waiters.lua) and returns the reply; held_by_several(me) is below.
--
-- ARGV of every acquire script starts: token, ttl ms, min-interval ms ('0' = off), host, pid,
-- command line, start time (unix seconds), queue entry lifetime ms, wake-up linger ms, how
-- long a waiter turned away counts as waiting ms.
local function done_ago()
  if ARGV[3] == '0' then return nil end
  local at = tonumber(redis.call('GET', KEYS[7]) or '')
  if not at then return nil end
  local ago = now_ms() - at
  if ago < tonumber(ARGV[3]) then return math.max(ago, 0) end
  return nil
end
local function turned_away(reply)
  if reply[1] == 0 then waiting(ARGV[1], now_ms(), tonumber(ARGV[10])) end
  return reply
end
local function holder()
  redis.call('DEL', KEYS[6])
  redis.call('HSET', KEYS[6], 'token', ARGV[1], 'host', ARGV[4], 'pid', ARGV[5],
    'argv', ARGV[6], 'started', ARGV[7])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
end
-- For the exclusive acquires (included after waiters.lua and holders.lua), when the lock may
-- be held by several: nil when it is not (the key is free, or one exclusive holder's), else
-- the reply. {3, how it is used} for a semaphore's holders or a key of another type. Behind
-- shared holders, {0, ms until the first of their leases ends, 2}, having joined the
-- waiters' queue (ARGV[8]: how long the entry lives unless refreshed): no new shared holder
-- gets in ahead of a queued exclusive waiter, so a stream of them cannot starve it.
local function held_by_several(me)
  local t = lock_type()
  if t == 'none' or t == 'string' then return nil end
  if t ~= 'zset' then return {3, 'type ' .. t} end
  local now_u = now_us()
  local now = math.floor(now_u / 1000)
  local held, used = holders_now(now)
  if held == 0 then return nil end
  if used ~= 'shared' then return {3, used} end
  enqueue(me, now_u, tonumber(ARGV[8]))
  return {0, soonest(now), 2}
end
