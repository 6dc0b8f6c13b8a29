-- The server clock, for every script that reads it: now_us() and now_ms() (Redis TIME).
-- Included first by the scripts that need it; takes no KEYS or ARGV of its own.
-- TIME makes a script non-deterministic, hence effects replication (the default since
-- Redis 5, asked for explicitly for older servers).
redis.replicate_commands()
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
