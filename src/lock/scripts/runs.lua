-- The record of a lock's runs, as read (history.lua writes it): `runs`, a list of its most
-- recent runs, newest first, each a JSON object of strings: token, host, pid, started (server
-- time, ms) and fence when taken; ended (server time, ms), outcome (the metrics file's label,
-- or 'vanished') and status (redlock's exit status; none for a vanished run) once it ended.
-- `counts`, a hash: a counter per outcome label, 'busy' and 'skipped', and 'last_success', the
-- JSON of the last run that succeeded (kept when it falls off the list).
--
-- decode(raw) is a run's table (nil when unreadable: not JSON, no token, or a number redlock
-- cannot read back, such as a start that is not digits or a fence past 64 bits; such an entry
-- is left out, as one that is not JSON is, rather than make the whole record unreadable). holds(who, now) says whether `who`
-- holds the lock now, by the server's clock. shown(r, now) is a run as the replies give it:
-- {token, host, pid, started, fence, ended ('-1' none), outcome, status ('-1' none)}, where a
-- run without an end is 'running' while its holder holds the lock, and 'vanished' once it
-- does not (its lease ended without a release: SIGKILLed, its machine gone). tally() is
-- `counts` as {field, value, ...}, without 'last_success'; last_success(now) that run as shown
-- (false when none). summary(now) is what `status` shows of the record: {server time (ms),
-- the newest run that reads, as shown (false when none), last_success(now), tally()}.
-- Uses: lock, runs, counts.
-- Whether `x`, a number of a run, reads back in Rust: absent (shown as its default), or at
-- most `digits` decimal digits, a '-' first only when `signed` (18 digits fit any i64; 9 an
-- i32, redlock's exit status).
local function readable(x, signed, digits)
  if type(x) ~= 'string' and type(x) ~= 'number' then return true end
  local s = tostring(x)
  if signed and string.sub(s, 1, 1) == '-' then s = string.sub(s, 2) end
  return #s >= 1 and #s <= digits and string.find(s, '^%d+$') ~= nil
end
local function decode(raw)
  if type(raw) ~= 'string' then return nil end
  local ok, r = pcall(cjson.decode, raw)
  if not (ok and type(r) == 'table' and type(r.token) == 'string') then return nil end
  if readable(r.pid, false, 18) and readable(r.started, false, 18)
    and readable(r.fence, true, 18) and readable(r.ended, true, 18)
    and readable(r.status, true, 9) then
    return r
  end
  return nil
end
local function holds(who, now)
  local t = redis.call('TYPE', lock).ok
  if t == 'string' then return redis.call('GET', lock) == who end
  if t == 'zset' then
    local ends = tonumber(redis.call('ZSCORE', lock, who) or '')
    return ends ~= nil and ends > now
  end
  return false
end
local function field(x, none)
  if type(x) == 'string' or type(x) == 'number' then return tostring(x) end
  return none
end
local function shown(r, now)
  local outcome = r.outcome
  if type(outcome) ~= 'string' then
    outcome = 'vanished'
    if holds(r.token, now) then outcome = 'running' end
  end
  return {r.token, field(r.host, ''), field(r.pid, '0'), field(r.started, '0'),
    field(r.fence, '0'), field(r.ended, '-1'), outcome, field(r.status, '-1')}
end
local function tally()
  local all = redis.call('HGETALL', counts)
  local out = {}
  for i = 1, #all, 2 do
    if all[i] ~= 'last_success' then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end
local function last_success(now)
  local r = decode(redis.call('HGET', counts, 'last_success'))
  if r then return shown(r, now) end
  return false
end
local function summary(now)
  local last = false
  -- The newest run that reads (the list is cut to runs_kept entries; LRANGE, which the
  -- documented ACL user has, rather than LLEN, which it has not).
  for _, raw in ipairs(redis.call('LRANGE', runs, 0, -1)) do
    local r = decode(raw)
    if r then
      last = shown(r, now)
      break
    end
  end
  return {tostring(now), last, last_success(now), tally()}
end
