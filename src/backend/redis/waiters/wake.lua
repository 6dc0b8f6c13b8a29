-- Wake lists: a release wakes a plain waiter with a push onto `wake`, which every plain waiter's
-- BLPOP watches; own_list(who) is a waiter's own list (wake .. ':' .. its token: not declared in
-- KEYS, but it carries the same hash tag and so lives in the same Cluster slot), where a --fair
-- waiter's turn and an interrupt's marker arrive. push(list, marker, linger_ms) pushes a marker
-- that lingers that long if no BLPOP takes it.
local function own_list(who)
  return wake .. ':' .. who
end
local function push(list, marker, linger_ms)
  redis.call('RPUSH', list, marker)
  redis.call('PEXPIRE', list, linger_ms)
end
