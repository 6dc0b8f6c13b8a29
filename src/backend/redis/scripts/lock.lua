-- The lock key: lock_type() is its Redis type, 'none' (free), 'string' (one exclusive
-- holder's token), 'zset' (several holders, see holders.lua) or another type, which redlock
-- does not make.
local function lock_type()
  return redis.call('TYPE', lock).ok
end
