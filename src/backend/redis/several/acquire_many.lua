-- Take one place among several holders: a slot of a semaphore (--limit N: at most N at once)
-- or a shared hold (--shared: any number at once, but never beside an exclusive holder, and
-- not ahead of a queued exclusive waiter). The lock key is then a sorted set of the holders'
-- tokens scored by when each lease ends (see holders.lua). Holders whose lease ended are
-- purged first, by the server's clock. Each place advances the lock's one fencing counter.
-- A retry of our own acquire whose reply was lost finds our token and succeeds again, with
-- the fencing token it was given (kept in the holder's details). A waiter let in with room
-- left passes a wake-up on to the next one. A place taken is a run in the record of runs
-- (record/ring.lua).
-- KEYS and ARGV: `AcquireMany` in calls.rs (`held_as`: 'limit N' or 'shared').
-- Returns {'acquired', fencing counter, server time (ms), the run's N in the record}, {'skipped', ms since a success within the
-- min-interval}, {'held_as', how the lock is held instead: 'lock' (an exclusive holder),
-- 'limit N', 'shared', '' (not recorded)}, {'foreign', the key's type}, or {'busy', ms until
-- worth trying again (-1 unknown), 'held' (full, or an exclusive holder) | 'turn' (room left,
-- but promised to waiters ahead)}.
local ago = done_ago()
if ago then return {'skipped', ago} end
local limit = tonumber(string.match(held_as, '^limit (%d+)$')) or 0
local shared = limit == 0
local t = lock_type()
if t == 'string' then
  -- An exclusive holder: shared holders wait for it; a semaphore never meets one.
  if shared then return turned_away({'busy', redis.call('PTTL', lock), 'held'}) end
  return {'held_as', 'lock'}
end
if t ~= 'zset' and t ~= 'none' then return {'foreign', t} end
local now_u = now_us()
local now = math.floor(now_u / 1000)
local held, used = 0, nil
if t == 'zset' then held, used = holders_now(now) end
-- Holders whose lease ended unreleased vanished: purged just now, or, the set gone with the
-- last of them, their details left over. Their runs say so.
-- A holder purged just now ended by now; one left over, by the set's expiry (ended_places).
local lapsed_by = {}
if t == 'none' then
  local left, raws, by = ended_places(now)
  for i, who in ipairs(left) do purged_holders[who], lapsed_by[who] = raws[i], by[i] end
  if #left > 0 then redis.call('DEL', holders) end
end
for who, raw in pairs(purged_holders) do
  pcall(function()
    local held = cjson.decode(raw)
    ring().vanish(tonumber(held.n), who, held, lapsed_by[who] or now)
  end)
end
if held > 0 and used ~= held_as then return {'held_as', used} end
if held > 0 and redis.call('ZSCORE', lock, token) then
  -- Our own token, from the details recorded with it: the counter has moved on if another
  -- holder came in since, and its value is that holder's token.
  local mine = details(token).fence
  if type(mine) == 'string' and string.find(mine, '^%d+$') then
    redis.call('ZADD', lock, now + tonumber(ttl), token)
    settle()
    return {'acquired', mine, now, text(details(token).n)}
  end
  -- Recorded without it (by an older redlock): take the place again, with a new token.
  redis.call('ZREM', lock, token)
  held = held - 1
end
local dropped = purge_queue(now)
local room
if shared then
  -- Every live queue entry is an exclusive waiter (--shared is never --fair).
  room = redis.call('ZCARD', alive) == 0
elseif fair == '1' then
  local ahead = redis.call('ZRANK', queue, token) or redis.call('ZCARD', queue)
  room = ahead < limit - held
else
  room = held < limit
end
if room then
  local given = advance()
  redis.call('ZADD', lock, now + tonumber(ttl), token)
  -- Should one of the keys below hold what redlock does not keep there, the place is not left
  -- taken (guard.lua).
  undo = function()
    redis.call('ZREM', lock, token)
    pcall(redis.call, 'HDEL', holders, token)
  end
  redis.call('SET', kind, held_as)
  local recorded, n = pcall(record_start, token, run, given, false)
  if not recorded then n = '' end
  -- The token as a string: cjson writes numbers with 14 digits, and tokens have 16. `n`: the
  -- run's place in the record, for marking it vanished should its lease end unreleased.
  redis.call('HSET', holders, token, cjson.encode({
    host = host, pid = pid, argv = command, started = started, since = now,
    fence = given, n = tostring(n) }))
  settle()
  if waited == '1' then
    dequeue(token)
    -- A release wakes one waiter; room enough for more: wake the next, and so on.
    if shared or held + 1 < limit then pass_on(linger) end
  end
  return {'acquired', given, now, tostring(n)}
end
if fair == '1' then
  enqueue(token, now_u, tonumber(entry))
  if dropped > 0 and held < limit then wake_one(linger) end
end
if shared then
  -- Behind a queued exclusive waiter: it is let in, or its entry lapses, by then.
  local last = redis.call('ZRANGE', alive, -1, -1, 'WITHSCORES')
  return turned_away({'busy', math.max(tonumber(last[2]) - now, 1), 'turn'})
end
if held < limit then return turned_away({'busy', -1, 'turn'}) end
return turned_away({'busy', soonest(now), 'held'})
