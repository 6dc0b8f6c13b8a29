-- What both releases do first (included after clock.lua): finish_run() takes this client out of
-- the registry of waiters when an attempt of its may have been turned away (on a quorum a node
-- may have turned it away while a majority let it in), and with a --min-interval records the
-- run's success, for that long, before anyone is woken, so that the woken waiter sees it.
local function finish_run()
  -- A registry that is not redlock's (a key of another kind there) must not keep a release
  -- from deleting the lock: leaving it is bookkeeping, and its entries lapse by themselves.
  if waited == '1' then redis.pcall('ZREM', waiting, token) end
  if success_for ~= '0' then redis.call('SET', done, now_ms(), 'PX', success_for) end
end
