-- After take.lua: a waiter turned away is recorded in the registry of waiters (registry.lua);
-- one let in after it was turned away leaves it, and its own wake list goes; so does its place
-- in the queue, should it have queued behind shared holders before the lock went to one holder
-- (else the next release would wake it, not the waiters on the shared list).
if reply[1] == 'busy' then
  register(token, now_ms(), tonumber(lifetime))
elseif reply[1] == 'acquired' and waited == '1' then
  redis.call('ZREM', waiting, token)
  redis.call('DEL', own_list(token))
  redis.call('ZREM', queue, token)
  redis.call('ZREM', alive, token)
end
