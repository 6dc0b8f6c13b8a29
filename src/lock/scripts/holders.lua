-- Helpers of the scripts that meet a lock held by several at once (included after clock.lua):
-- a semaphore (--limit N) or shared holders (--shared). The lock key (KEYS[1]) is then a
-- sorted set, each holder's token scored by when its lease ends (server time, ms); KEYS[8]
-- says how it is used ('limit N' or 'shared'); KEYS[9] keeps each holder's details (a hash:
-- token -> JSON). All three expire with the last lease.
--
-- lock_type() is the lock key's type: 'none', 'string' (one exclusive holder's token), 'zset'.
-- purge_holders(now) drops the holders whose lease ended (by the server's clock) and returns
-- how many: a crashed holder's place frees when its lease ends, not later.
-- settle() makes the set, its kind and the details expire with the last lease, or deletes
-- them when nobody holds.
-- soonest(now) is the ms until the first lease ends (-1: nobody holds).
-- holders_now(now) purges, then returns how many hold the lock and how they hold it (nil when
-- nobody does, the leftovers of the last holder deleted).
-- details(token) is a holder's recorded details as a table ({} when none or unreadable), and
-- text(x) one of its fields as a string ('' when missing).
-- foreign(t) is the error reply for a lock key of a type redlock does not make.
local function lock_type()
  return redis.call('TYPE', KEYS[1]).ok
end
local function purge_holders(now)
  local ended = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if #ended > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    redis.call('HDEL', KEYS[9], unpack(ended))
  end
  return #ended
end
local function settle()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', KEYS[8], KEYS[9])
    return
  end
  for _, key in ipairs({KEYS[1], KEYS[8], KEYS[9]}) do
    redis.call('PEXPIREAT', key, last[2])
  end
end
local function soonest(now)
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #first == 0 then return -1 end
  return math.max(tonumber(first[2]) - now, 1)
end
local function holders_now(now)
  purge_holders(now)
  local held = redis.call('ZCARD', KEYS[1])
  if held == 0 then
    settle()
    return 0, nil
  end
  return held, redis.call('GET', KEYS[8]) or ''
end
local function details(token)
  local raw = redis.call('HGET', KEYS[9], token)
  if not raw then return {} end
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then return decoded end
  return {}
end
local function text(x)
  if type(x) == 'string' or type(x) == 'number' then return tostring(x) end
  return ''
end
local function foreign(t)
  return redis.error_reply('the lock key is a Redis ' .. t .. ' that redlock did not make')
end
