-- The fair queue (included after wake.lua): `queue`, tokens scored by arrival (server time in
-- µs), and `alive`, when each entry lapses unless refreshed (ms); used by --fair waiters and by
-- exclusive waiters behind shared holders (pass_on.lua wakes its head).
-- enqueue(who, now_us, entry_ms) puts a waiter in the queue (keeping its place if there) and
-- keeps it there `entry_ms` unless refreshed; dequeue(who) takes it out of the queue and the
-- registry of waiters and drops its own wake list.
local function enqueue(who, now_u, entry_ms)
  if not redis.call('ZSCORE', queue, who) then
    redis.call('ZADD', queue, now_u, who)
  end
  redis.call('ZADD', alive, math.floor(now_u / 1000) + entry_ms, who)
  for _, key in ipairs({queue, alive}) do
    if redis.call('PTTL', key) < entry_ms then redis.call('PEXPIRE', key, entry_ms) end
  end
end
local function dequeue(who)
  redis.call('ZREM', queue, who)
  redis.call('ZREM', alive, who)
  redis.call('ZREM', waiting, who)
  redis.call('DEL', own_list(who))
end
