-- The server's clock: now_us() and now_ms() (Redis TIME, read once per script run).
-- TIME makes a script non-deterministic, hence effects replication (the default since
-- Redis 5, asked for explicitly for older servers).
redis.replicate_commands()
local clock_us
local function now_us()
  if not clock_us then
    local t = redis.call('TIME')
    clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
