-- After give_back.lua: this client leaves the registry of waiters (it was turned away before
-- it got in), and one waiter is woken, if any may be waiting (pass_on.lua).
if waited == '1' then redis.call('ZREM', waiting, token) end
if reply ~= -1 then pass_on(linger) end
