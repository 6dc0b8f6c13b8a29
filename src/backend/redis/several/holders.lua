-- Several holders at once: a semaphore (--limit N) or shared holders (--shared). The lock key
-- is then a sorted set, each holder's token scored by when its lease ends (server time, ms);
-- `kind` says how it is held ('limit N' or 'shared'); `holders` keeps each holder's details
-- (a hash: token -> JSON). The set and its kind expire with the last lease, the details a day
-- later. Included after clock.lua.
--
-- purge_holders(now) drops the holders whose lease ended (by the server's clock), keeps their
-- details in `purged_holders`, and returns how many: a crashed holder's place frees when its
-- lease ends, not later.
-- settle() sets those expiries, or deletes the kind and the details when nobody holds.
-- soonest(now) is the ms until the first lease ends (-1: nobody holds).
-- holders_now(now) purges, then returns how many hold the lock and how they hold it ('' when
-- not recorded; nil when nobody holds, the leftovers of the last holder deleted).
-- leave_place(who, now) takes a holder out, purges and settles.
-- details(who) is a holder's recorded details as a table ({} when none or unreadable), and
-- text(x) one of its fields as a string ('' when missing).
-- ended_places(now), which changes nothing, is the holders whose lease ended unreleased, their
-- details, and when each lease had ended at the latest (server ms): the set's members scored
-- before now; or, the set expired with the last lease, the details left over (a release takes
-- its own out), which ended by that expiry, told by theirs (DETAILS_OUTLIVE_MS later).
local DETAILS_OUTLIVE_MS = 86400000
-- The details of the holders purged by this script, by token (their lease ended unreleased).
local purged_holders = {}
-- The details are bookkeeping: a `holders` key of another kind (not redlock's) must not turn
-- a release into an error after its place is given up, so their reads and deletes are
-- pcalls (the acquire refuses such a key: FOREIGNKEY).
local function purge_holders(now)
  local ended = redis.call('ZRANGEBYSCORE', lock, '-inf', now)
  if #ended > 0 then
    local gone = redis.pcall('HMGET', holders, unpack(ended))
    if gone.err then gone = {} end
    for i, who in ipairs(ended) do
      if gone[i] then purged_holders[who] = gone[i] end
    end
    redis.call('ZREMRANGEBYSCORE', lock, '-inf', now)
    redis.pcall('HDEL', holders, unpack(ended))
  end
  return #ended
end
local function settle()
  local last = redis.call('ZRANGE', lock, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', kind, holders)
    return
  end
  redis.call('PEXPIREAT', lock, last[2])
  redis.call('PEXPIREAT', kind, last[2])
  -- The details outlive the last lease by a day: should its holder vanish, the next place
  -- taken finds them (acquire_many.lua) and its run is recorded so.
  redis.call('PEXPIREAT', holders, tonumber(last[2]) + DETAILS_OUTLIVE_MS)
end
local function soonest(now)
  local first = redis.call('ZRANGE', lock, 0, 0, 'WITHSCORES')
  if #first == 0 then return -1 end
  return math.max(tonumber(first[2]) - now, 1)
end
local function holders_now(now)
  purge_holders(now)
  local held = redis.call('ZCARD', lock)
  if held == 0 then
    settle()
    return 0, nil
  end
  return held, redis.call('GET', kind) or ''
end
local function leave_place(who, now)
  redis.call('ZREM', lock, who)
  redis.pcall('HDEL', holders, who)
  purge_holders(now)
  settle()
end
local function ended_places(now)
  local ended, got, by = {}, {}, {}
  local t = redis.call('TYPE', lock).ok
  if t == 'zset' then
    local scored = redis.call('ZRANGEBYSCORE', lock, '-inf', now, 'WITHSCORES')
    if #scored == 0 then return ended, got, by end
    for i = 1, #scored, 2 do
      ended[#ended + 1], by[#by + 1] = scored[i], tonumber(scored[i + 1])
    end
    got = redis.pcall('HMGET', holders, unpack(ended))
    if got.err then got = {} end
  elseif t == 'none' then
    local left = redis.pcall('HGETALL', holders)
    if left.err or #left == 0 then return ended, got, by end
    local pttl = redis.call('PTTL', holders)
    for i = 1, #left, 2 do
      ended[#ended + 1], got[#got + 1] = left[i], left[i + 1]
      if pttl > 0 then by[#by + 1] = now + pttl - DETAILS_OUTLIVE_MS end
    end
  end
  return ended, got, by
end
local function details(who)
  local raw = redis.call('HGET', holders, who)
  if not raw then return {} end
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then return decoded end
  return {}
end
local function text(x)
  if type(x) == 'string' or type(x) == 'number' then return tostring(x) end
  return ''
end
