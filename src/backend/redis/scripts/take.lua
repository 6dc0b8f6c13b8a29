-- Take the lock alone: SET NX PX with our token; then the fencing token, the server's clock in
-- µs or one past the counter when that is larger (so tokens never go back, even after the
-- counter was lost), and the holder's details beside the lock, with its expiry. A retry of
-- our own acquire whose reply was lost finds our token and succeeds again.
-- --fair, --min-interval, --limit and --shared take the lock with acquire.lua and
-- acquire_many.lua; a key this script cannot take (several holders, or not redlock's) is
-- answered 'several', and the client asks acquire.lua.
-- KEYS and ARGV: `Take` in calls.rs.
-- Returns {'acquired', fencing token (as a string), server time (ms)} ('again' after them for
-- a retry),
-- {'busy', the holder's PTTL, 'held'} or {'several', the key's type}.
local FENCE_LIFETIME_MS = '3456000000'
if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
  undo = function() redis.call('DEL', lock) end
  -- The clock first, in one command that also reads the counter it replaces; where the clock is
  -- behind the counter (stepped back, or tokens taken faster than a microsecond), one past it.
  local t = time()
  local given = t[1] .. string.sub('00000' .. t[2], -6)
  local counter = redis.call('SET', fence, given, 'PX', FENCE_LIFETIME_MS, 'GET')
  -- As a rule the counter is the clock of the last take: as many digits, all of them digits,
  -- and less. Anything else is looked at closely.
  if counter and not (#counter == #given and counter < given and not string.find(counter, '%D'))
  then
    if not string.find(counter, '^%-?%d+$') then
      -- Not a counter (a whole number, as INCRBY takes it): put it back and fail, so the
      -- client says what the key holds; the guard gives the lock back.
      redis.call('SET', fence, counter, 'KEEPTTL')
      error({err = 'ERR value is not an integer or out of range'})
    end
    if tonumber(counter) >= tonumber(given) then
      -- One past it, in Redis's 64-bit integers (a Lua number is exact only to 2^53); past
      -- the last one INCRBY fails, and the lock is given back.
      redis.call('SET', fence, counter, 'PX', FENCE_LIFETIME_MS)
      redis.call('INCRBY', fence, '1')
      given = redis.call('GET', fence)
    end
  end
  redis.call('HSET', holder, 'token', token, 'host', host, 'pid', pid, 'argv', command,
    'started', started)
  redis.call('PEXPIRE', holder, ttl)
  return {'acquired', given, now_ms()}
end
local v = redis.pcall('GET', lock)
if v == token then
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', holder, ttl)
  -- The counter as its digits: past 2^53 a Lua number would round the token it gave us.
  return {'acquired', redis.call('GET', fence) or '0', now_ms(), 'again'}
end
if type(v) == 'table' then return {'several', redis.call('TYPE', lock).ok} end
return {'busy', redis.call('PTTL', lock), 'held'}
