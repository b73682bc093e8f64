-- Inspect a reentrant hash lock.
-- KEYS[1]  the lock
-- Returns {holds, remaining lease in ms, owner}: {0, 0} when the lock is free. Error NOTALOCK
-- when the key is not a lock.
local state = lockState(KEYS[1])
if type(state) == 'table' then
  return state
end
if state == 'free' then
  return {0, 0}
end
local left = redis.call('pttl', KEYS[1])
if left == -1 then
  left = 0 -- no lease (someone made the key persistent)
elseif left == 0 then
  left = 1 -- PTTL is 0 in the lease's last millisecond
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] ~= '' then
    return {tonumber(fields[i + 1]) or 0, left, fields[i]}
  end
end
return {0, 0} -- a marker without an owner: not held
