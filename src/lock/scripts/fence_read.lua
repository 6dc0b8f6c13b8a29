-- The fencing counter, for a quorum's read phase: the counter, or this server's clock in
-- microseconds when that is larger (as advance() would take it), so that the token a majority
-- agrees on is above both.
-- KEYS and ARGV: `FenceRead` in calls.rs.
-- Returns that number.
return math.max(counter(), now_us())
