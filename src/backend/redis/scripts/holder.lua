-- One exclusive holder: its token is the lock key's value, its details (token, host, pid,
-- argv, started) a hash beside it with the same expiry. prolong(ms) extends both; drop()
-- deletes both; exclusive_holder() is the token and the recorded host, pid, command line and
-- start time ('' each when not recorded, or recorded for another token).
local function prolong(ms)
  redis.call('PEXPIRE', lock, ms)
  redis.call('PEXPIRE', holder, ms)
end
local function drop()
  redis.call('DEL', lock, holder)
end
local function exclusive_holder()
  local v = redis.call('GET', lock)
  local h = redis.call('HMGET', holder, 'token', 'host', 'pid', 'argv', 'started')
  if h[1] ~= v then h = {} end
  return v, h[2] or '', h[3] or '', h[4] or '', h[5] or ''
end
