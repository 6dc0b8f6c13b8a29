-- Cut a waiter's BLPOP short: push a marker onto its own wake list, the first list its BLPOP
-- watches, which the server hands to that BLPOP at once. The marker lingers `linger` ms if no
-- BLPOP takes it; leave.lua deletes it with the list.
-- KEYS and ARGV: `Interrupt` in calls.rs.
-- Returns 1.
push(own_list(token), 'stop', linger)
return 1
