-- Reading the record of runs (ring.lua writes it; builds before 0.2 wrote the list `runs`,
-- which is read too while hosts of both run). A run is a JSON object of strings: token, host,
-- pid, started (server time, ms), fence, n when taken; ended, outcome (the metrics file's
-- label, or 'vanished') and status (redlock's exit status; none for a vanished run) once it
-- ended. A run of the ring that never ended and whose holder no longer holds the lock is
-- marked vanished (and counted) when first seen, here as by the next acquire.
--
-- decode(raw) is a run's table (nil when unreadable: not JSON, no token, or a number redlock
-- cannot read back, such as a start that is not digits or a fence past 64 bits; such an entry
-- is left out rather than make the whole record unreadable). shown(r, now) is a run as the
-- replies give it: {token, host, pid, started, fence, ended ('-1' none), outcome, status ('-1'
-- none)}, 'running' while its holder holds the lock. record(now, whole) is every run kept,
-- newest first (and the run that ended last, should it be older than those), and the summary `status` shows: {server time (ms), the newest run, the last success,
-- the last run that ended (each as shown, false when none), the counters as {name, value,
-- ...}}.
-- Needs clock.lua, several/holders.lua and ring.lua before it.
-- Whether `x`, a number of a run, reads back in Rust: absent, or decimal digits no larger
-- than `most` (written out: I64 for a time or a fencing token, I32 for an exit status), a
-- '-' first only when `signed`.
local I64, I32 = '9223372036854775807', '2147483647'
local function readable(x, signed, most)
  if type(x) ~= 'string' and type(x) ~= 'number' then return true end
  local s = tostring(x)
  if signed and string.sub(s, 1, 1) == '-' then s = string.sub(s, 2) end
  s = string.gsub(s, '^0+(%d)', '%1')
  if #s < 1 or not string.find(s, '^%d+$') then return false end
  -- Of as many digits, the larger number is the later string.
  return #s < #most or (#s == #most and s <= most)
end
local function decode(raw)
  -- A run is a few hundred bytes: one far larger was not written by redlock, and would make
  -- the reply too large to read (the lock's own state with it).
  if type(raw) ~= 'string' or #raw > 65536 then return nil end
  local ok, r = pcall(cjson.decode, raw)
  if not (ok and type(r) == 'table' and type(r.token) == 'string' and r.started ~= nil) then
    return nil
  end
  if readable(r.pid, false, I64) and readable(r.started, false, I64)
    and readable(r.fence, true, I64) and readable(r.ended, true, I64)
    and readable(r.status, true, I32) then
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
  if not r then return false end
  local outcome = r.outcome
  if type(outcome) ~= 'string' then
    outcome = 'vanished'
    if holds(r.token, now) then outcome = 'running' end
  end
  return {r.token, field(r.host, ''), field(r.pid, '0'), field(r.started, '0'),
    field(r.fence, '0'), field(r.ended, '-1'), outcome, field(r.status, '-1')}
end
-- Holders of several (a semaphore's places, shared holds) whose lease ended unreleased
-- vanished: each is marked so and counted when first seen, here as by the next acquire, even
-- when more runs began since than the ring keeps. Their details, which outlive the lease by a
-- day, then say `counted`, and the acquire that purges them counts them no more (ring.lua).
local function lapsed_holders(now)
  local ended, got, by = ended_places(now)
  for i, who in ipairs(ended) do
    local ok, held = pcall(cjson.decode, got[i] or '')
    if ok and type(held) == 'table' and not held.counted then
      pcall(ring().vanish, tonumber(held.n), who, held, by[i])
      held.counted = '1'
      redis.call('HSET', holders, who, cjson.encode(held))
    end
  end
end
-- The counters a summary shows: every outcome label (src/exit.rs, and record/mod.rs's own;
-- a test holds this list to them), busy and skipped.
local COUNTERS = {'success', 'failed', 'cut_short', 'busy', 'skipped', 'interrupted', 'not_run',
  'lock_lost', 'vanished', 'max_runtime', 'usage', 'unavailable', 'error'}
-- What status and list show of the record, per lock: the newest run (marked vanished if so),
-- the last success, the last run to end and the counters, in two reads of the hash.
local function brief(now)
  pcall(lapsed_holders, now)
  local got = redis.call('HMGET', counts, 'head', 'last_success', 'last_ended', unpack(COUNTERS))
  local tally, last_ended = {}, decode(got[3])
  for i, name in ipairs(COUNTERS) do
    local value = got[i + 3]
    if value and string.find(value, '^%-?%d+$') then tally[#tally + 1] = {name, value} end
  end
  local n = tonumber(string.match(got[1] or '', '^(%d+) '))
  local newest = nil
  if n then
    local key = 'run:' .. (n % tonumber(runs_kept))
    newest = decode(redis.call('HGET', counts, key))
    if newest and type(newest.outcome) ~= 'string' and not holds(newest.token, now)
      and pcall(ring().put_end, key, newest, 'vanished') then
      last_ended = newest
      local counted = false
      for _, pair in ipairs(tally) do
        if pair[1] == 'vanished' then
          pair[2], counted = tostring(tonumber(pair[2]) + 1), true
        end
      end
      if not counted then tally[#tally + 1] = {'vanished', '1'} end
    end
  end
  -- The newest run of a 0.1 host, when it started later.
  local older = decode(redis.call('LRANGE', runs, 0, 0)[1])
  if older and (not newest or (tonumber(older.started) or 0) > (tonumber(newest.started) or 0)) then
    newest = older
  end
  local counters = {}
  for _, pair in ipairs(tally) do
    counters[#counters + 1] = pair[1]
    counters[#counters + 1] = pair[2]
  end
  return {tostring(now), shown(newest, now), shown(decode(got[2]), now), shown(last_ended, now),
    counters}
end
-- `whole`: every run, decoded and sorted (history, check); else only what the summary needs
-- (status and list, once per lock; see brief()).
local function record(now, whole)
  if not whole then return brief(now), {} end
  pcall(lapsed_holders, now)
  local list, last, tally = {}, {}, {}
  local newest = tonumber(string.match(redis.call('HGET', counts, 'head') or '', '^(%d+)'))
  local all = redis.call('HGETALL', counts)
  for i = 1, #all, 2 do
    local name, value = all[i], all[i + 1]
    if string.sub(name, 1, 4) == 'run:' then
      local open = not string.find(value, '"outcome"', 1, true)
      local r = nil
      if whole or open or name == 'run:' .. tostring((newest or -1) % tonumber(runs_kept)) then
        r = decode(value)
      end
      if r then
        if open and type(r.outcome) ~= 'string' and not holds(r.token, now)
          and pcall(ring().put_end, name, r, 'vanished') then
          tally.vanished = (tally.vanished or 0) + 1
          last.last_ended = r
        end
        if whole or tonumber(r.n) == newest then list[#list + 1] = r end
      end
    elseif name == 'last_success' or name == 'last_ended' then
      last[name] = last[name] or decode(value)
    elseif string.find(value, '^%-?%d+$') then
      tally[name] = (tally[name] or 0) + tonumber(value)
    end
  end
  -- The list of runs of builds before 0.2, while hosts of those run.
  local older, of_older = redis.call('LRANGE', runs, 0, whole and -1 or 0), {}
  for _, raw in ipairs(older) do
    local r = decode(raw)
    if r then
      list[#list + 1] = r
      of_older[#of_older + 1] = r
    end
  end
  table.sort(list, function(a, b)
    local sa, sb = tonumber(a.started) or 0, tonumber(b.started) or 0
    if sa ~= sb then return sa > sb end
    return (tonumber(a.fence) or 0) > (tonumber(b.fence) or 0)
  end)
  local counters = {}
  for name, value in pairs(tally) do
    counters[#counters + 1] = name
    counters[#counters + 1] = string.format('%d', value)
  end
  -- The run that ended last: the ring's, or a 0.1 host's (0.1 keeps no last_ended). Only a
  -- 0.1 run is weighed against it: the ring's is the last to end as its writers saw it, and
  -- a vanished one, which has no end time, must not lose to an earlier success.
  local function ended_at(r) return r and tonumber(r.ended) or -1 end
  for _, r in ipairs(of_older) do
    if type(r.outcome) == 'string' and ended_at(r) > ended_at(last.last_ended) then
      last.last_ended = r
    end
  end
  local shown_runs, listed = {}, {}
  for i = 1, math.min(#list, tonumber(runs_kept)) do
    shown_runs[i] = shown(list[i], now)
    listed[list[i].token] = true
  end
  -- The run that ended last stays in sight after runs_kept later ones (a long run under
  -- --limit that failed after many short successes), last.
  if whole and last.last_ended and not listed[last.last_ended.token] then
    shown_runs[#shown_runs + 1] = shown(last.last_ended, now)
  end
  local summary = {tostring(now), shown_runs[1] or false, shown(last.last_success, now),
    shown(last.last_ended, now), counters}
  return summary, shown_runs
end
