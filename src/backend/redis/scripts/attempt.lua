-- What both acquires do (included after clock.lua, registry.lua and record/ring.lua):
-- done_ago() is the ms since a run succeeded within the --min-interval (nil when none, or no
-- --min-interval), and counts the skip (the run ends there); turned_away(reply) records this
-- waiter in the registry of waiters and returns the reply. A run is counted busy only when it
-- gives up (leave.lua), not for each attempt turned away.
-- Every success counts, whether its run had --min-interval or not: the later of `done` (what a
-- --min-interval run, and 0.2.0, records) and the record of runs' last success (its `ended`).
local function done_ago()
  if min_interval == '0' then return nil end
  local at = tonumber(redis.call('GET', done) or '')
  local read, last = pcall(cjson.decode, redis.pcall('HGET', counts, 'last_success') or '')
  local ended = read and type(last) == 'table' and tonumber(last.ended)
  if ended and (not at or ended > at) then at = ended end
  if not at then return nil end
  local ago = now_ms() - at
  if ago < tonumber(min_interval) then
    pcall(ring().count, 'skipped', 1)
    return math.max(ago, 0)
  end
  return nil
end
local function turned_away(reply)
  register(token, now_ms(), tonumber(lifetime))
  return reply
end
