-- Delete the key (and the holder's details) only while it holds our token, and wake one
-- waiter, if any may be waiting: the head of the fair queue, or else whoever blocks first on
-- the shared wake list. A set (held by several since our lease ended) is another owner's: GET
-- fails on it. The run's record ends as `outcome` (with `status`), or as `lost_outcome` when
-- the key was not ours any more.
-- KEYS and ARGV: `Release` in calls.rs.
-- Returns 1 released (now, or by this same release before its reply was lost), 0 key already
-- gone, -1 held by another owner (left untouched).
finish_run()
local v = redis.pcall('GET', lock)
if type(v) == 'table' or (v and v ~= token) then
  record_end(token, now_ms(), lost_outcome, lost_status)
  return -1
end
if v then
  drop()
  record_end(token, now_ms(), outcome, status)
elseif ended_as(token, outcome) then
  -- A retry of this release, whose reply was lost: the first one released the lock (and woke).
  return 1
else
  record_end(token, now_ms(), lost_outcome, lost_status)
end
-- Waking is bookkeeping: a queue or wake list that is not redlock's (a key of another kind)
-- must not turn a release already done into an error; waiters then retry on their own.
pcall(pass_on, linger)
if v then return 1 end
return 0
