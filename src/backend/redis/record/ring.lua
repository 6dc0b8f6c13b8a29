-- The record of runs as the scripts write it (record/mod.rs says what it keeps): a ring of the
-- last `runs_kept` runs in the `counts` hash, beside the counters. 'run:S' is the JSON of run
-- N (S = N mod runs_kept); 'head' is 'N TOKEN', the newest run's N and, while an exclusive run
-- holds the lock, its token ('' after it). 'last_success' and 'last_ended' are the JSON of the
-- last run that succeeded and of the last run that ended. 'kept' is '@' and the server time
-- (ms) when the hash was last given `record_ttl` ms more: a run's start does so when that was
-- a day ago or more, so the record lives `record_ttl` less a day at least after the last run.
-- A counter that comes into being gives it `record_ttl` too.
-- The callers run these under pcall: a record that is not redlock's never stops the lock.
-- ring() makes these functions the first time a script needs one (a run found vanished or
-- lost, a counter of a feature), since each function a script defines costs every call of
-- it; record_start, which every take calls, is new_run.lua's. Needs clock.lua before it.
local ring_made
local function ring()
  if ring_made then return ring_made end
  local R = {}
  function R.slot_key(n)
    return 'run:' .. (n % tonumber(runs_kept))
  end
  function R.count(name, by)
    local c = redis.pcall('HINCRBY', counts, name, by)
    if type(c) == 'table' then
      -- A count redlock did not write (not a whole number): it starts over from here.
      c = math.max(by, 0)
      redis.call('HSET', counts, name, c)
    end
    if c == by then redis.call('PEXPIRE', counts, record_ttl) end
  end
  -- The N of the run of `who`, found by looking through the ring (nil when not there): for a
  -- client that never heard its acquire's answer (lost) and gives the lock back.
  function R.find(who)
    local all = redis.call('HGETALL', counts)
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 4) == 'run:' and string.find(all[i + 1], who, 1, true) then
        local ok, r = pcall(cjson.decode, all[i + 1])
        if ok and type(r) == 'table' and r.token == who then return tonumber(r.n) end
      end
    end
    return nil
  end
  -- Run n's field and table, when it is `who`'s (nil otherwise; n nil: looked for).
  function R.run_at(n, who)
    n = n or R.find(who)
    if not n then return nil end
    local key = R.slot_key(n)
    local ok, r = pcall(cjson.decode, redis.call('HGET', counts, key) or '')
    if ok and type(r) == 'table' and r.token == who then return key, r end
    return nil
  end
  -- The newest run's N (nil when none) and the token of the exclusive run holding the lock.
  function R.head()
    local n, open = string.match(redis.call('HGET', counts, 'head') or '', '^(%d+) (.*)$')
    return tonumber(n), open or ''
  end
  -- End the run of field `key` (table r) as `outcome`, its count moved from any earlier
  -- ending (a run found vanished, then released after all). A vanished run has no status or
  -- end time. Its end is now, or `by` (server ms) if earlier: a run found lost held the lock
  -- to the end of its lease at the latest, however late its client found out.
  function R.put_end(key, r, outcome, status, by)
    if r.outcome == outcome then return end
    if type(r.outcome) == 'string' then R.count(r.outcome, -1) end
    r.outcome = outcome
    if status then
      r.status = tostring(status)
      local t = now_ms()
      by = tonumber(by)
      if by and by > 0 and by < t then t = by end
      r.ended = string.format('%.0f', t)
    end
    local encoded = cjson.encode(r)
    local fields = {key, encoded, 'last_ended', encoded}
    if outcome == 'success' then
      fields[5], fields[6] = 'last_success', encoded
    end
    redis.call('HSET', counts, unpack(fields))
    R.count(outcome, 1)
  end
  -- A run that the ring no longer holds (more runs began beside it since than it keeps) ends
  -- all the same: counted, and the last to end, from `r` (its table as far as known).
  function R.end_unkept(r, outcome)
    R.count(outcome, 1)
    local encoded = cjson.encode(r)
    redis.call('HSET', counts, 'last_ended', encoded)
    if outcome == 'success' then redis.call('HSET', counts, 'last_success', encoded) end
  end
  -- Run n of `who`, if it never ended, vanished; `held`, its holder's details (a place of
  -- several holders), stand for it should the ring no longer hold it, unless a reader counted
  -- it already (`held.counted`: read.lua). `by`: when its lease had ended at the latest
  -- (server ms), where known, kept as its `ended` so that `check` can order it against the
  -- runs that came after (a vanished run shows no end time).
  function R.vanish(n, who, held, by)
    local key, r = R.run_at(n, who)
    if r then
      if not r.outcome then
        if by then r.ended = string.format('%d', by) end
        R.put_end(key, r, 'vanished')
      end
    elseif n and held and not held.counted then
      local ended = nil
      if by then ended = string.format('%d', by) end
      R.end_unkept({token = who, host = held.host, pid = held.pid, started = held.since,
        fence = held.fence, n = tostring(n), ended = ended, outcome = 'vanished'}, 'vanished')
    end
  end
  -- How the run of `who` (run n; nil when its client does not know) ended, by `by` at the
  -- latest where known (see put_end). Not found in the
  -- ring: a run the client knows (n, or `as_sent`, its JSON as the client wrote it) that more
  -- runs have pushed out is counted all the same, and the last to end; one the client does
  -- not know was never taken here (a quorum node that did not grant it): nothing to record.
  function R.record_end(n, who, outcome, status, as_sent, by)
    local key, r = R.run_at(n, who)
    if r then
      R.put_end(key, r, outcome, status, by)
      return
    end
    local ok, sent = pcall(cjson.decode, as_sent or '')
    if ok and type(sent) == 'table' then
      sent.outcome, sent.status = outcome, tostring(status)
      R.end_unkept(sent, outcome)
    elseif n then
      R.count(outcome, 1)
    end
  end
  -- Take run n of `who` out of the ring: a take given back unused (undone on a quorum node,
  -- or too few replicas acknowledged it and the wait tries again) never ran. Its N is given
  -- back when it is still the newest, so that the next run takes its place: however many takes
  -- a wait gives back, they push one run out of the ring at most, as the run itself does.
  function R.drop(n, who)
    local key, r = R.run_at(n, who)
    if not r then return end
    redis.call('HDEL', counts, key)
    local head, open = R.head()
    if head and head == tonumber(r.n) then
      redis.call('HSET', counts, 'head', string.format('%d', head - 1) .. ' ')
    elseif head and open == who then
      redis.call('HSET', counts, 'head', string.format('%d', head) .. ' ')
    end
  end
  ring_made = R
  return R
end
