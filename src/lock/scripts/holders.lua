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
