-- Raise the fencing counter to at least `at_least`, for a quorum's write-back phase; never
-- lowers it, and renews its lifetime.
-- KEYS and ARGV: `FenceRaise` in calls.rs.
-- Returns the counter afterwards.
return raise_to(tonumber(at_least))
