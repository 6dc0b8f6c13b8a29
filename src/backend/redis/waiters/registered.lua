-- After take.lua: a waiter turned away is recorded in the registry of waiters (registry.lua);
-- one let in after it was turned away leaves it, and its own wake list goes.
if reply[1] == 'busy' then
  register(token, now_ms(), tonumber(lifetime))
elseif reply[1] == 'acquired' and waited == '1' then
  redis.call('ZREM', waiting, token)
  redis.call('DEL', own_list(token))
end
