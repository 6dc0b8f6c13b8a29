-- Writing the record of runs (included after clock.lua and runs.lua, which says what it holds):
-- each run's acquire keeps the list for `record_ttl` ms more, each count the counters, and the
-- list is cut to `runs_kept` runs, so a lock's record is bounded by construction.
--
-- count(field, by) moves one of `counts`' counters. record_start(who, host, pid, fence, now)
-- first marks every run without an end whose holder no longer holds the lock as vanished
-- (counted), then puts the new run first. record_end(who, now, outcome, status) ends the run of
-- token `who` and counts its outcome; a run recorded as ended before (taken for vanished, or
-- found lost on one node of a quorum whose majority went on) takes the new ending and its
-- count moves; a success is kept as 'last_success' too. A run that fell off the list (more
-- than `runs_kept` began since) is counted all the same. record_forget(who) takes the run of
-- `who` out of the list (a quorum's attempt undone on this node). ended_as(who, outcome) tells
-- a release retried after its reply was lost that the first one went through.
--
-- The record serves the operator, the lock serves the job: should `runs` or `counts` hold what
-- redlock does not keep there, the record is not written (each of these runs under pcall) and
-- the lock's own step goes on.
-- Uses: runs, counts, runs_kept, record_ttl.
local function int(x)
  return string.format('%d', tonumber(x) or 0)
end
local function count_now(name, by)
  redis.call('HINCRBY', counts, name, by)
  redis.call('PEXPIRE', counts, record_ttl)
end
-- The run of `who` in the list: its place (0-based), its raw JSON and its table; nil if none.
-- An exclusive lock's run is the newest one, read alone first.
local function find(who)
  local newest = redis.call('LINDEX', runs, 0)
  if newest and string.find(newest, who, 1, true) then
    local r = decode(newest)
    if r and r.token == who then return 0, newest, r end
  end
  for i, raw in ipairs(redis.call('LRANGE', runs, 1, -1)) do
    if string.find(raw, who, 1, true) then
      local r = decode(raw)
      if r and r.token == who then return i, raw, r end
    end
  end
  return nil
end
local function start_now(who, host, pid, fence, now)
  for i, raw in ipairs(redis.call('LRANGE', runs, 0, -1)) do
    if not string.find(raw, '"outcome"', 1, true) then
      local r = decode(raw)
      if r and not holds(r.token, now) then
        r.outcome = 'vanished'
        redis.call('LSET', runs, i - 1, cjson.encode(r))
        count_now('vanished', 1)
      end
    end
  end
  redis.call('LPUSH', runs, cjson.encode({
    token = who, host = host, pid = int(pid), started = int(now), fence = int(fence) }))
  redis.call('LTRIM', runs, 0, tonumber(runs_kept) - 1)
  redis.call('PEXPIRE', runs, record_ttl)
end
local function end_now(who, now, outcome, status)
  local at, _, r = find(who)
  if not at then
    count_now(outcome, 1)
    return
  end
  if r.outcome == outcome then return end
  if type(r.outcome) == 'string' then count_now(r.outcome, -1) end
  r.ended, r.outcome, r.status = int(now), outcome, int(status)
  local encoded = cjson.encode(r)
  -- The list was kept record_ttl from this run's start, by its acquire: not again.
  redis.call('LSET', runs, at, encoded)
  count_now(outcome, 1)
  if outcome == 'success' then redis.call('HSET', counts, 'last_success', encoded) end
end
local function forget_now(who)
  local at, raw = find(who)
  if at then redis.call('LREM', runs, 1, raw) end
end
-- Whether the run of `who` was ended as `outcome` already: by this same release, whose reply
-- was lost and which is now retried (false when the record cannot tell).
local function ended_as(who, outcome)
  local ok, at, _, r = pcall(find, who)
  return ok and at ~= nil and r.outcome == outcome and r.ended ~= nil
end
local function count(name, by) pcall(count_now, name, by) end
local function record_start(who, host, pid, fence, now) pcall(start_now, who, host, pid, fence, now) end
local function record_end(who, now, outcome, status) pcall(end_now, who, now, outcome, status) end
local function record_forget(who) pcall(forget_now, who) end
