-- Waking a waiter (included after clock.lua and wake.lua): wake_one(linger_ms) wakes exactly
-- one: the head of the fair queue (`queue`: tokens scored by arrival, server time in µs;
-- `alive`: when each entry lapses unless refreshed, ms), or else whoever blocks first on the
-- shared wake list. purge_queue(now) drops queue entries whose waiter stopped refreshing them
-- and returns how many. pass_on(linger_ms) wakes one waiter, after purging, when any may be
-- waiting (in the registry of waiters, or queued): with nobody waiting it touches nothing
-- more than one EXISTS.
local function wake_one(linger_ms)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  local list = wake
  if head then list = own_list(head) end
  redis.call('DEL', list)
  push(list, '1', linger_ms)
end
local function purge_queue(now)
  local stale = redis.call('ZRANGEBYSCORE', alive, '-inf', now)
  if #stale == 0 then return 0 end
  for _, w in ipairs(stale) do
    redis.call('ZREM', queue, w)
    redis.call('DEL', own_list(w))
  end
  redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
  return #stale
end
local function pass_on(linger_ms)
  if redis.call('EXISTS', waiting, queue) == 0 then return end
  purge_queue(now_ms())
  wake_one(linger_ms)
end
