-- The fencing counter: counter() is its value (0 when never taken); advance() moves it on for
-- a new holder (or past a removed one) and returns the new value, the holder's fencing token.
-- Uses: fence.
local function counter()
  return tonumber(redis.call('GET', fence) or '0') or 0
end
local function advance()
  return redis.call('INCR', fence)
end
