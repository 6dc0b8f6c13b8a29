-- After extend.lua: a lease found lost ends the run as `lost_outcome` (the command is stopped,
-- and a release may never come).
if reply == 1 then return end
ring().record_end(tonumber(slot), token, lost_outcome, lost_status, nil, lost_by)
