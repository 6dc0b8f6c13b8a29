-- The record of runs as the scripts write it (record/mod.rs says what it keeps): a ring of the
-- last `runs_kept` runs in the `counts` hash, beside the counters. 'run:S' is the JSON of run
-- N (S = N mod runs_kept); 'head' is 'N TOKEN', the newest run's N and, while an exclusive run
-- holds the lock, its token ('' after it). 'last_success' and 'last_ended' are the JSON of the
-- last run that succeeded and of the last run that ended. A run's start keeps the hash
-- `record_ttl` ms more; a counter that comes into being does too.
-- The callers run these under pcall: a record that is not redlock's never stops the lock.
-- Needs clock.lua before it.
local function slot_key(n)
  return 'run:' .. (n % tonumber(runs_kept))
end
local function count(name, by)
  if redis.call('HINCRBY', counts, name, by) == by then
    redis.call('PEXPIRE', counts, record_ttl)
  end
end
-- Run n's field and table, when it is `who`'s (nil otherwise).
local function run_at(n, who)
  if not n then return nil end
  local key = slot_key(n)
  local ok, r = pcall(cjson.decode, redis.call('HGET', counts, key) or '')
  if ok and type(r) == 'table' and r.token == who then return key, r end
  return nil
end
-- The newest run's N (nil when none) and the token of the exclusive run that holds the lock.
local function head()
  local n, open = string.match(redis.call('HGET', counts, 'head') or '', '^(%d+) (.*)$')
  return tonumber(n), open or ''
end
-- End the run of field `key` (table r) as `outcome`, its count moved from any earlier ending
-- (a run found vanished, then released after all). A vanished run has no status or end time.
local function put_end(key, r, outcome, status)
  if r.outcome == outcome then return end
  if type(r.outcome) == 'string' then count(r.outcome, -1) end
  r.outcome = outcome
  if status then
    r.status = tostring(status)
    r.ended = string.format('%.0f', now_ms())
  end
  local encoded = cjson.encode(r)
  local fields = {key, encoded, 'last_ended', encoded}
  if outcome == 'success' then
    fields[5], fields[6] = 'last_success', encoded
  end
  redis.call('HSET', counts, unpack(fields))
  count(outcome, 1)
end
-- A new run, the newest in the ring; the exclusive run before it that never ended vanished.
-- `alone`: an exclusive holder's. Its N.
local function record_start(who, host, pid, fence, alone)
  local n, open = head()
  if open ~= '' and open ~= who then
    local key, r = run_at(n, open)
    if r and not r.outcome then put_end(key, r, 'vanished') end
  end
  n = (n or 0) + 1
  local holding = ''
  if alone then holding = who end
  redis.call('HSET', counts, 'head', n .. ' ' .. holding, slot_key(n), cjson.encode({
    token = who, host = host, pid = tostring(pid), started = string.format('%.0f', now_ms()),
    fence = string.format('%.0f', fence), n = tostring(n) }))
  redis.call('PEXPIRE', counts, record_ttl)
  return n
end
-- How the run of `who` (run n; nil when unknown) ended. Not found in the ring (more runs began
-- since than it keeps, beside it under --limit, or never recorded), it is counted all the same,
-- and `as_sent` (the run's JSON as its client wrote it; '' none) is the last run to end.
local function record_end(n, who, outcome, status, as_sent)
  local key, r = run_at(n, who)
  if r then
    put_end(key, r, outcome, status)
    return
  end
  count(outcome, 1)
  if as_sent and as_sent ~= '' then
    redis.call('HSET', counts, 'last_ended', as_sent)
    if outcome == 'success' then redis.call('HSET', counts, 'last_success', as_sent) end
  end
end
