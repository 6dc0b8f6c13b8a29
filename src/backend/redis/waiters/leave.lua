-- A waiter gives up: drop its queue entry, its entry in the registry of waiters and its own
-- wake list, and unless one exclusive holder has the lock (free, or a semaphore that may have
-- room) pass on a wake-up it may have taken, if anyone else may be waiting. A run that gives
-- up on a busy lock (`busy`) is counted so in the record of runs, once.
-- KEYS and ARGV: `Leave` in calls.rs.
-- Returns 1.
dequeue(token)
if lock_type() ~= 'string' then pass_on(linger) end
if busy == '1' then pcall(ring().count, 'busy', 1) end
return 1
