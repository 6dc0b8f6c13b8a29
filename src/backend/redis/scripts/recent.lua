-- Read the record of a lock's runs (redlock history and check); a run found vanished is
-- marked so (read.lua).
-- KEYS and ARGV: `ReadRuns` in calls.rs.
-- Returns {summary, then each run kept as shown, newest first} (see read.lua).
local summary, list = record(now_ms(), true)
local reply = {summary}
for _, r in ipairs(list) do reply[#reply + 1] = r end
return reply
