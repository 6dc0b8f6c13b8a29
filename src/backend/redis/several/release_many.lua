-- Give up our place among several holders (acquire_many.lua) and wake one waiter, if any may
-- be waiting: for a semaphore at every release (a slot is free), for shared holders when the
-- last one leaves (only an exclusive waiter waits for them). The run's record ends as
-- `outcome`, or as `lost_outcome` when the place was not ours any more; a place given back
-- `unused` takes its run out of the record.
-- KEYS and ARGV: `ReleaseMany` in calls.rs.
-- Returns 1 released (now, or by this same release before its reply was lost), 0 gone (our
-- lease had ended, or we were removed), -1 held by an exclusive holder (left untouched).
finish_run()
local t = lock_type()
if t == 'string' then return -1 end
local ours = 0
if t == 'zset' then
  local now = now_ms()
  local ends = tonumber(redis.call('ZSCORE', lock, token) or '')
  if ends and ends > now then ours = 1 end
  leave_place(token, now)
end
if unused == '1' then
  -- Given back unused (too few replicas acknowledged it; the wait tries again): never ran.
  pcall(ring().drop, tonumber(slot), token)
elseif ours == 1 then
  pcall(ring().record_end, tonumber(slot), token, outcome, status, ended_run)
else
  local read, _, r = pcall(ring().run_at, tonumber(slot), token)
  -- A retry of this release, whose reply was lost: the first one gave the place up (and woke).
  if read and r and r.outcome == outcome and r.ended then return 1 end
  pcall(ring().record_end, tonumber(slot), token, lost_outcome, lost_status, ended_run, lost_by)
end
if redis.call('GET', kind) ~= 'shared' or redis.call('EXISTS', lock) == 0 then
  -- Waking is bookkeeping: a queue or wake list that is not redlock's (a key of another kind)
  -- must not turn a release already done into an error; waiters then retry on their own.
  pcall(pass_on, linger)
end
return ours
