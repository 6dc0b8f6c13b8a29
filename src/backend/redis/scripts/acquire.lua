-- Take the lock alone (no --limit or --shared): SET NX PX when it is free, advance the fencing
-- counter, record the holder's details beside it and the run in the record of runs (see
-- record/ring.lua), all in one step. A retry of our own
-- acquire whose reply was lost finds our token and succeeds again. With a min-interval, a run
-- that succeeded within it wins over all that.
-- With --fair the lock goes only to the head of the waiters' queue (or to anyone when nobody
-- waits); a waiter that cannot take it joins the queue, or refreshes its entry there, which
-- lives `entry` ms unless refreshed. Purging a dead head of a free lock wakes the next one.
-- Behind shared holders (--shared) an exclusive waiter joins the queue too: no new shared
-- holder gets in ahead of a queued exclusive waiter, so a stream of them cannot starve it.
-- KEYS and ARGV: `Acquire` in calls.rs.
-- Returns {'acquired', fencing counter, server time (ms), the run's N in the record ('' none)}, {'skipped', ms since that success}, {'busy', ms until
-- worth trying again (the holder's PTTL; -1 no expiry, -2 free), 'held' | 'turn' (free, but
-- promised to waiters ahead) | 'behind' (queued behind shared holders)}, {'held_as', how its
-- several holders hold it: 'limit N', or '' when not recorded} or {'foreign', the key's type}.
local function take()
  if not redis.call('SET', lock, token, 'NX', 'PX', ttl) then return nil end
  -- Should one of the keys below hold what redlock does not keep there, the lock is not left
  -- taken (guard.lua).
  undo = function()
    redis.call('DEL', lock)
    -- The details, when they are ours (a hash that HSET wrote); another kind of key is not.
    if redis.call('TYPE', holder).ok == 'hash' then redis.call('DEL', holder) end
  end
  if waited == '1' then dequeue(token) end
  redis.call('HSET', holder, 'token', token, 'host', host, 'pid', pid, 'argv', command,
    'started', started)
  redis.call('PEXPIRE', holder, ttl)
  local fenced = advance()
  local recorded, n = pcall(record_start, token, run, fenced, true)
  if not recorded then n = '' end
  return {'acquired', fenced, now_ms(), tostring(n)}
end
-- A key of type `t` that is neither free nor one holder's: nil when it was a set whose leases
-- all ended (purged, it is gone), else the reply.
local function held_by_several(t)
  if t ~= 'zset' then return {'foreign', t} end
  local now_u = now_us()
  local now = math.floor(now_u / 1000)
  local held, used = holders_now(now)
  if held == 0 then return nil end
  if used ~= 'shared' then return {'held_as', used} end
  enqueue(token, now_u, tonumber(entry))
  return turned_away({'busy', soonest(now), 'behind'})
end
local ago = done_ago()
if ago then return {'skipped', ago} end
if fair == '0' then
  local taken = take()
  if taken then return taken end
end
-- The holder's token; false when free; an error reply when the key is not one holder's.
local v = redis.pcall('GET', lock)
if type(v) == 'table' then
  local several = held_by_several(lock_type())
  if several then return several end
  v = false
end
if v == token then
  -- Let in (our own take, its reply lost): this waiter leaves the waiters' records, as take()
  -- does.
  if waited == '1' then dequeue(token) end
  prolong(ttl)
  local read, n, open = pcall(ring().head)
  if not (read and n and open == token) then n = '' end
  return {'acquired', redis.call('GET', fence) or '0', now_ms(), tostring(n)}
end
local free = not v
local why = 'held'
if fair == '1' then
  local now_u = now_us()
  local purged = purge_queue(math.floor(now_u / 1000))
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if free and (head == nil or head == token) then return take() end
  enqueue(token, now_u, tonumber(entry))
  if free then
    why = 'turn'
    if purged > 0 then wake_one(linger) end
  end
elseif free then
  return take()
end
return turned_away({'busy', redis.call('PTTL', lock), why})
