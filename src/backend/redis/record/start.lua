-- After take.lua: the run that took the lock is recorded (ring.lua); its N goes fourth in the
-- reply ('' when not recorded). A retry that found our token again finds our run.
if reply[1] ~= 'acquired' then return end
if reply[4] == 'again' then
  local n, open = ring().head()
  reply[4] = ''
  if n and open == token then reply[4] = tostring(n) end
  return
end
reply[4] = record_start(token, run, reply[2], true)
