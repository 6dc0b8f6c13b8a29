-- A waiter gives up: drop its queue entry and its own wake list, and if the lock is free
-- pass on a wake-up it may have taken.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done.
-- ARGV: token, wake-up linger ms.
-- Returns 1.
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[3] .. ':' .. ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  purge(now_ms())
  wake(ARGV[2])
end
return 1
