-- Read a lock's state without changing anything (redlock status and list). Entries that lapsed
-- by the server's clock (holders whose lease ended, waiters that stopped coming back) are
-- skipped, not purged: purging is for the scripts that write.
-- KEYS and ARGV: `Inspect` in calls.rs.
-- Returns {'foreign', the lock key, its type} for a key of a type redlock does not make, else
-- {state, the lock key, fencing counter, ms since the last recorded success (-1 none), ms left
-- of that record, lock PTTL (-2 free), live waiters in the queue, ms the oldest of them has
-- waited (-1 none), live waiters in the registry of waiters, the record of runs' summary (see
-- record/read.lua; without `summary`, one of no runs)}, then by state:
-- - 'free': nothing more (also a set whose leases all ended);
-- - 'lock' (one exclusive holder): token, holder host, pid, command line, start time;
-- - 'several': how they hold it ('limit N', 'shared', '' when not recorded), then for each
--   live holder, soonest lease end first, token, ms of lease left, host, pid, command line,
--   start time, ms since it took its place by the server clock (-1 unknown).
local t = lock_type()
if t ~= 'none' and t ~= 'string' and t ~= 'zset' then return {'foreign', lock, t} end
local now = now_ms()
local at = tonumber(redis.call('GET', done) or '')
local ago, left = -1, -2
if at then ago = math.max(now - at, 0); left = redis.call('PTTL', done) end
local queued, oldest = #redis.call('ZRANGEBYSCORE', alive, '(' .. now, '+inf'), -1
-- The first live entry in arrival order (dead ones ahead of it are not yet purged).
for _, w in ipairs(redis.call('ZRANGE', queue, 0, 15)) do
  if tonumber(redis.call('ZSCORE', alive, w) or '0') > now then
    local arrived = tonumber(redis.call('ZSCORE', queue, w))
    oldest = math.max(now - math.floor(arrived / 1000), 0)
    break
  end
end
local registered = redis.call('ZCOUNT', waiting, '(' .. now, '+inf')
local runs_said = {tostring(now), false, false, false, {}}
if summary == '1' then runs_said = (record(now, false)) end
-- The counter as its digits (a Lua number is exact only to 2^53); '0' when it is not a 64-bit
-- whole number (the client then says what the key holds).
local fenced = redis.call('GET', fence) or '0'
local digits = string.match(fenced, '^%-?(%d+)$')
local largest = '9223372036854775807'
if string.sub(fenced, 1, 1) == '-' then largest = '9223372036854775808' end
if not digits or #digits > 19 or (#digits == 19 and digits > largest) then fenced = '0' end
local reply = {'free', lock, fenced, ago, left, -2, queued, oldest, registered, runs_said}
local function add(items)
  for _, x in ipairs(items) do reply[#reply + 1] = x end
end
if t == 'string' then
  reply[1], reply[6] = 'lock', redis.call('PTTL', lock)
  add({exclusive_holder()})
  return reply
end
if t == 'none' then return reply end
local live = redis.call('ZRANGEBYSCORE', lock, '(' .. now, '+inf', 'WITHSCORES')
if #live == 0 then return reply end
reply[1], reply[6] = 'several', redis.call('PTTL', lock)
add({redis.call('GET', kind) or ''})
for i = 1, #live, 2 do
  local who = live[i]
  local d = details(who)
  local since = tonumber(d.since)
  local age = -1
  if since then age = math.max(now - since, 0) end
  add({who, tonumber(live[i + 1]) - now, text(d.host), text(d.pid), text(d.argv),
    text(d.started), age})
end
return reply
