-- Helpers of the two acquire scripts (included after clock.lua): done_ago() is the ms since a
-- run succeeded within the --min-interval (nil when none or off); holder() records the
-- holder's details beside the lock, with the lock's expiry.
--
-- ARGV of both acquire scripts starts: token, ttl ms, min-interval ms ('0' = off), host, pid,
-- command line, start time (unix seconds).
local function done_ago()
  if ARGV[3] == '0' then return nil end
  local at = tonumber(redis.call('GET', KEYS[7]) or '')
  if not at then return nil end
  local ago = now_ms() - at
  if ago < tonumber(ARGV[3]) then return math.max(ago, 0) end
  return nil
end
local function holder()
  redis.call('DEL', KEYS[6])
  redis.call('HSET', KEYS[6], 'token', ARGV[1], 'host', ARGV[4], 'pid', ARGV[5],
    'argv', ARGV[6], 'started', ARGV[7])
  redis.call('PEXPIRE', KEYS[6], ARGV[2])
end
