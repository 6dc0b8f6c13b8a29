-- What both acquires do (included after clock.lua, waiters.lua and history.lua): done_ago() is
-- the ms since a run succeeded within the --min-interval (nil when none, or no
-- --min-interval), and counts the skip; turned_away(reply) records this waiter in the registry
-- of waiters, counts it as busy the first time (one count per run, however long it waits) and
-- returns the reply.
-- Uses: done, min_interval, token, lifetime, waited.
local function done_ago()
  if min_interval == '0' then return nil end
  local at = tonumber(redis.call('GET', done) or '')
  if not at then return nil end
  local ago = now_ms() - at
  if ago < tonumber(min_interval) then
    count('skipped', 1)
    return math.max(ago, 0)
  end
  return nil
end
local function turned_away(reply)
  register(token, now_ms(), tonumber(lifetime))
  if waited == '0' then count('busy', 1) end
  return reply
end
