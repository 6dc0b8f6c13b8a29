-- After ring.lua, in the scripts that take the lock: the run that took it goes into the ring.
-- A new run, the newest in the ring, as its client wrote it (`sent`: the JSON object of its
-- token, host and pid, without its closing brace) with its fencing token (`fence`, its digits);
-- the exclusive run before it that never ended vanished. `alone`: an exclusive holder's. Its N.
-- Its N comes back as a string: Lua writes each number it joins to a string anew (see
-- clock.lua), and the N is written three times.
local function record_start(who, sent, fence, alone)
  local got = redis.call('HMGET', counts, 'head', 'kept')
  local n, open = string.match(got[1] or '', '^(%d+) (.*)$')
  n = tonumber(n)
  -- A head redlock did not write (past what a Lua number counts exactly) starts over.
  if n and n >= 1e14 then n = nil end
  -- The lock was free, so the exclusive run that held it last never gave it back: it
  -- vanished, even one of this same token (an attempt that took the lock for a waiter frozen
  -- behind its block, whose lease ran out before it woke: the same client takes it anew).
  if open and open ~= '' then ring().vanish(n, open) end
  n = string.format('%d', (n or 0) + 1)
  local holding = ''
  if alone then holding = who end
  local t = time()
  local now = t[1] .. string.sub('00000' .. t[2], -6, -4)
  local run = sent .. ',"started":"' .. now .. '","fence":"' .. fence .. '","n":"' .. n .. '"}'
  local key = string.format('run:%d', n % runs_kept)
  local kept = tonumber(string.sub(got[2] or '', 2))
  local ms = now_ms()
  if kept and ms - kept < 86400000 and ms >= kept then
    redis.call('HSET', counts, 'head', n .. ' ' .. holding, key, run)
  else
    redis.call('HSET', counts, 'head', n .. ' ' .. holding, key, run, 'kept', '@' .. now)
    redis.call('PEXPIRE', counts, record_ttl)
  end
  return n
end
