-- Undo a quorum's partial acquire: delete the lock (and the holder's details) only while it
-- holds our token, waking nobody (the lock was never ours to hand over), and take its run out
-- of the record of runs (it never ran). When the attempt ended turned away, the waiter is
-- recorded as waiting (for `lifetime` ms; '0': it does not wait), here as on the nodes that
-- turned it away: it may block on this node, and a release here then knows to wake it.
-- KEYS and ARGV: `Undo` in calls.rs.
-- Returns 1 deleted, 0 not ours.
local deleted = 0
if redis.pcall('GET', lock) == token then
  drop()
  -- Its run, never run, leaves the record of this node.
  pcall(ring().drop, tonumber(slot), token)
  deleted = 1
end
if lifetime ~= '0' then register(token, now_ms(), tonumber(lifetime)) end
return deleted
