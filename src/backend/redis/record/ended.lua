-- After give_back.lua: the run ends as this client says (`ended_run`: its JSON, written by the
-- client, for run `slot`), or, when the lock was not ours any more, as `lost_outcome`. A
-- release whose reply was lost, retried, finds its own ending and answers 1 again. A take given
-- back `unused` (too few replicas acknowledged it, and the wait tries again) leaves the record
-- instead, counted nowhere.
if unused == '1' then
  ring().drop(tonumber(slot), token)
  return
end
if reply == 1 and (slot == '' or ended_run == '') then
  -- Given back without the acquire's answer (it was lost): the run is looked for.
  ring().record_end(nil, token, outcome, status)
  return
end
if reply == 1 then
  local fields = {string.format('run:%d', slot % runs_kept), ended_run,
    'head', slot .. ' ', 'last_ended', ended_run}
  if outcome == 'success' then
    fields[7], fields[8] = 'last_success', ended_run
  end
  redis.call('HSET', counts, unpack(fields))
  local c = redis.pcall('HINCRBY', counts, outcome, '1')
  if type(c) == 'table' then
    -- A count redlock did not write (not a whole number): it starts over from this run.
    redis.call('HSET', counts, outcome, '1')
    c = 1
  end
  if c == 1 then redis.call('PEXPIRE', counts, record_ttl) end
  return
end
local R = ring()
local key, r = R.run_at(tonumber(slot), token)
if r and r.outcome == outcome and r.ended then
  -- This same release, retried after its reply was lost, ended the run: the lock was ours
  -- then, whoever took it since.
  reply = 1
  return
end
if r then
  R.put_end(key, r, lost_outcome, lost_status, lost_by)
else
  R.record_end(tonumber(slot), token, lost_outcome, lost_status, ended_run, lost_by)
end
