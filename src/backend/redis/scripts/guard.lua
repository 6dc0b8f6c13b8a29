-- A script that fails half-way (a key where redlock keeps one of its own holds something else:
-- a WRONGTYPE error from Redis) must not leave the lock taken: Redis keeps every write made
-- before the error. The script runs as main() under pcall (see scripts.rs); once it has made a
-- write that must not outlive such a failure it sets `undo` (declared before main), which then
-- runs. The failure is answered FOREIGNKEY TYPE KEY for the first of KEYS that holds what
-- redlock does not keep there (`kept_as`, from keys.rs), else with Redis's own error.
-- This is defined only when main() failed: each function a script defines costs every call.
local function failed(err)
  if undo then pcall(undo) end
  local kept = kept_as()
  for i, key in ipairs(KEYS) do
    local t = redis.call('TYPE', key).ok
    if t ~= 'none' and not string.find(' ' .. kept[i] .. ' ', ' ' .. t .. ' ', 1, true) then
      return redis.error_reply('FOREIGNKEY ' .. t .. ' ' .. key)
    end
  end
  if type(err) == 'table' and err.err then return redis.error_reply(err.err) end
  return redis.error_reply(tostring(err))
end
