-- The server's clock: now_us() and now_ms() as numbers, now_us_text() and now_ms_text() as
-- their digits (Redis TIME, read once per script run). Where a time goes into a string, the
-- digits are cut from TIME's own: Lua writes a number with sprintf, which costs more than any
-- other step of a plain take (about 3k instructions, a redis.call's worth).
-- TIME makes a script non-deterministic, hence effects replication (the default since
-- Redis 5, asked for explicitly for older servers).
redis.replicate_commands()
local clock, clock_us
local function time()
  if not clock then clock = redis.call('TIME') end
  return clock
end
local function now_us()
  if not clock_us then
    local t = time()
    clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
local function now_us_text()
  local t = time()
  return t[1] .. string.sub('00000' .. t[2], -6)
end
local function now_ms_text()
  local t = time()
  return t[1] .. string.sub('00000' .. t[2], -6, -4)
end
