-- Break-glass release: delete the lock whoever holds it (or only while it holds ARGV[2],
-- when not ''), advance the fencing counter past the old holder's token, and wake one waiter.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: wake-up linger ms, expected token or ''.
-- Returns {0, fencing counter, --fair waiters dropped} when the lock was free (its fair queue,
-- if any, is cleared: live waiters join it again at their next attempt; a dead one no longer
-- holds up the others), {-1, fencing counter, token} when it holds another token than expected
-- (left alone), or {1, new fencing counter, removed token, holder host, pid, command line,
-- start time} ('' when unknown).
local v = redis.call('GET', KEYS[1])
if not v then
  local queued = redis.call('ZRANGE', KEYS[4], 0, -1)
  for _, w in ipairs(queued) do redis.call('DEL', KEYS[3] .. ':' .. w) end
  redis.call('DEL', KEYS[4], KEYS[5])
  if #queued > 0 then wake(ARGV[1]) end
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), #queued}
end
if ARGV[2] ~= '' and v ~= ARGV[2] then
  return {-1, tonumber(redis.call('GET', KEYS[2]) or '0'), v}
end
local h = redis.call('HMGET', KEYS[6], 'token', 'host', 'pid', 'argv', 'started')
if h[1] ~= v then h = {} end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[6])
local fence = redis.call('INCR', KEYS[2])
purge(now_ms())
wake(ARGV[1])
return {1, fence, v, h[2] or '', h[3] or '', h[4] or '', h[5] or ''}
