-- Inspect a reentrant hash lock and its wait queue (lib.lua has the layout).
-- KEYS[1]  the lock
-- KEYS[2]  optional: the lock's wait queue
-- Returns {holds, remaining lease in ms, shared, readers, queued, owner}: exclusive: shared 0,
-- readers 0, the holder and its holds of both kinds; shared: shared 1, the number of readers,
-- their holds together, and the reader whose token sorts first; queued counts the live entries
-- of the queue (0 without KEYS[2]). A free lock gives {0, 0, 0, 0, queued}. Error NOTALOCK when
-- the key is not a lock, or the queue not a queue.
local state = lockState(KEYS[1])
if type(state) == 'table' then
  return state
end
local queued = 0
if KEYS[2] then
  local q = loadQueue(KEYS[2])
  if q.err then
    return q
  end
  queued = #q.entries
end
if state == 'free' then
  return {0, 0, 0, 0, queued}
end
local left = redis.call('pttl', KEYS[1])
if left == -1 then
  left = 0 -- no lease (someone made the key persistent)
elseif left == 0 then
  left = 1 -- PTTL is 0 in the lease's last millisecond
end
local fields = redis.call('hgetall', KEYS[1])
local holds, readers, first = 0, 0, nil
for i = 1, #fields, 2 do
  if fields[i] ~= '' then
    if state == 'exclusive' then
      local w, r = holdsOf(fields[i + 1])
      return {w + r, left, 0, 0, queued, fields[i]}
    end
    holds, readers = holds + (tonumber(fields[i + 1]) or 0), readers + 1
    if not first or fields[i] < first then
      first = fields[i]
    end
  end
end
if not first then
  return {0, 0, 0, 0, queued} -- a marker without an owner: not held
end
return {holds, left, 1, readers, queued, first}
