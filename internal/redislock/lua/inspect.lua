-- Inspect a reentrant hash lock.
-- KEYS[1]  the lock
-- Returns {holds, remaining lease in ms}: {0, 0} when the lock is free.
local left = redis.call('pttl', KEYS[1])
if left == -2 then
  return {0, 0}
end
local holds = redis.call('hvals', KEYS[1])
if left == -1 then
  left = 0 -- no lease (someone made the key persistent)
elseif left == 0 then
  left = 1 -- PTTL is 0 in the lease's last millisecond
end
return {tonumber(holds[1]) or 0, left}
