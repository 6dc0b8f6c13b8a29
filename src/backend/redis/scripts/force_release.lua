-- Break-glass release: delete the lock whoever holds it (or only while it holds `expected`,
-- when not ''), advance the fencing counter past the old holder's token, and wake one waiter.
-- Held by several (a semaphore's slots, shared holders), it removes one holder: the one whose
-- token is `expected`, or the only one when `expected` is '' (several and no token: refused,
-- so that nobody removes holders they did not name). Holders whose lease ended are purged
-- first. A key of a type redlock does not make is deleted the same way (when no token is
-- expected: it holds none).
-- KEYS and ARGV: `ForceRelease` in calls.rs.
-- Returns, the fencing counter second in each:
-- {'free', counter, --fair waiters dropped} when the lock was free (its fair queue, if any, is
-- cleared: live waiters join it again at their next attempt; a dead one no longer holds up
-- the others);
-- {'other', counter, token} when one holder has it with another token than expected;
-- {'not_a_holder', counter, how it is held ('limit N', 'shared', '' not recorded), holders}
-- when held by several, none with that token; {'several', counter, how, holders} when held
-- by several and no token was given (each left alone);
-- {'removed', new counter, removed token, holder host, pid, command line, start time (''
-- when unknown), how it was held ('lock' for one holder), holders left};
-- {'foreign', counter (new when deleted), the key's type, 1 deleted | 0 left alone}.
-- The lock key and the holder's details deleted, the counter advanced, a waiter woken.
-- The counter as this script answers it: its digits when it is a whole number that Redis's
-- 64-bit integers hold (a Lua number is exact only to 2^53, and past 2^63 it would come back
-- wrapped), else as counter() reads it (0 for what is not a number).
local function counter_now()
  local v = redis.call('GET', fence)
  if v and string.find(v, '^[1-9]%d*$')
    and (#v < 19 or (#v == 19 and v <= '9223372036854775807')) then
    return v
  end
  return counter()
end
local function break_lock()
  drop()
  local fenced = advance()
  pass_on(linger)
  return fenced
end
local t = lock_type()
local now = now_ms()
if t ~= 'none' and t ~= 'string' and t ~= 'zset' then
  if expected ~= '' then return {'foreign', counter_now(), t, 0} end
  return {'foreign', break_lock(), t, 1}
end
if t == 'zset' then
  local n, used = holders_now(now)
  if n == 0 then
    t = 'none'
  else
    local me = expected
    if me == '' then
      if n > 1 then return {'several', counter_now(), used, n} end
      me = redis.call('ZRANGE', lock, 0, 0)[1]
    elseif not redis.call('ZSCORE', lock, me) then
      return {'not_a_holder', counter_now(), used, n}
    end
    local d = details(me)
    leave_place(me, now)
    local fenced = advance()
    -- A semaphore's slot is free; shared holders let a waiter in only when the last one goes.
    if used ~= 'shared' or redis.call('EXISTS', lock) == 0 then pass_on(linger) end
    return {'removed', fenced, me, text(d.host), text(d.pid), text(d.argv), text(d.started),
      used, n - 1}
  end
end
if t == 'none' then
  local queued = redis.call('ZRANGE', queue, 0, -1)
  for _, w in ipairs(queued) do redis.call('DEL', own_list(w)) end
  redis.call('DEL', queue, alive)
  if #queued > 0 then wake_one(linger) end
  return {'free', counter_now(), #queued}
end
local v, h_host, h_pid, h_command, h_started = exclusive_holder()
if expected ~= '' and v ~= expected then return {'other', counter_now(), v} end
return {'removed', break_lock(), v, h_host, h_pid, h_command, h_started, 'lock', 0}
