-- Undo a quorum's partial acquire: delete the lock (and the holder's details) only while it
-- holds our token, waking nobody (the lock was never ours to hand over).
--
-- KEYS: lock, fence, wake, queue, alive, holder, done, kind, holders, waiting (uses lock and holder).
-- ARGV: token.
-- Returns 1 deleted, 0 not ours.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[6])
  return 1
end
return 0
