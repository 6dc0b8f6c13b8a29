-- The server's clock: now_us() and now_ms() as numbers, time() as TIME's reply (read once per
-- script run). Where a time goes into a string, its digits are cut from TIME's own (the
-- seconds, then the microseconds padded to six digits): Lua writes a number with sprintf,
-- which costs more than any other step of a plain take (about 3k instructions, a redis.call's
-- worth). The two scripts that do so cut them where they need them, since each function a
-- script defines costs every call of it.
-- TIME makes a script non-deterministic; Redis 7 and Valkey replicate a script's effects, not
-- the script, so its writes reach replicas as they were made.
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
