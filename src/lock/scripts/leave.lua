-- A waiter gives up: drop its queue entry, its entry in the registry of waiters and its own
-- wake list, and unless one exclusive holder has the lock pass on a wake-up it may have taken.
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting.
-- ARGV: token, wake-up linger ms.
-- Returns 1.
dequeue(ARGV[1])
-- Free, or held by several (a semaphore may have room): pass it on.
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then
  purge(now_ms())
  wake(ARGV[2])
end
return 1
