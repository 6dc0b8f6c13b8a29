-- What both acquires do (included after clock.lua and waiters.lua): done_ago() is the ms since
-- a run succeeded within the --min-interval (nil when none, or no --min-interval);
-- turned_away(reply) records this waiter in the registry of waiters and returns the reply.
-- Uses: done, min_interval, token, lifetime.
local function done_ago()
  if min_interval == '0' then return nil end
  local at = tonumber(redis.call('GET', done) or '')
  if not at then return nil end
  local ago = now_ms() - at
  if ago < tonumber(min_interval) then return math.max(ago, 0) end
  return nil
end
local function turned_away(reply)
  register(token, now_ms(), tonumber(lifetime))
  return reply
end
