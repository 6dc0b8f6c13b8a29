-- Read the record of a lock's runs without changing anything (redlock history and check). A
-- run whose holder no longer holds the lock and that never ended is shown as vanished, not
-- marked: marking is for the scripts that write.
-- KEYS and ARGV: `ReadRuns` in calls.rs.
-- Returns {summary (see runs.lua), then each run of the list as shown, newest first}.
local now = now_ms()
local reply = {summary(now)}
for _, raw in ipairs(redis.call('LRANGE', runs, 0, -1)) do
  local r = decode(raw)
  if r then reply[#reply + 1] = shown(r, now) end
end
return reply
