-- The fencing counter, for a quorum's read phase.
-- KEYS and ARGV: `FenceRead` in calls.rs.
-- Returns the counter (0 when never taken).
return counter()
