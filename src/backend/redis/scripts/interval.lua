-- After give_back.lua, with --min-interval: a run that succeeded is recorded for that long
-- (`done`, server time in ms), before anyone is woken, so that the woken waiter sees it.
if success_for ~= '0' then redis.call('SET', done, now_ms(), 'PX', success_for) end
