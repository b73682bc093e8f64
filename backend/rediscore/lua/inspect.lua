-- Inspect a reentrant hash lock and its wait queue (lib.lua has the layout).
-- KEYS[1]  the lock
-- KEYS[2]  optional: the lock's wait queue
-- Returns {holds, remaining lease in ms, shared, readers, queued, owner}: exclusive: shared 0,
-- readers 0, the holder and its holds of both kinds; shared: shared 1, the number of readers
-- whose lease has not ended, their holds together, the reader whose token sorts first, and the
-- longest of their leases; queued counts the live entries of the queue (0 without KEYS[2]). A
-- free lock gives {0, 0, 0, 0, queued}. Error NOTALOCK when the key is not a lock, or the queue
-- not a queue.
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
if state == 'shared' then
  local rs = readReaders(KEYS[1])
  if rs.live == 0 then
    return {0, 0, 0, 0, queued} -- every reader's lease has ended: not held
  end
  local holds, first = 0, nil
  for owner, r in pairs(rs.holds) do
    holds = holds + r
    if not first or owner < first then
      first = owner
    end
  end
  -- The lease of the reader whose lease ends last.
  local left = rs.withKey and redis.call('pttl', KEYS[1]) or math.ceil((rs.last - rs.now) / 1000)
  return {holds, math.max(left, 1), 1, rs.live, queued, first}
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
    local w, r = holdsOf(fields[i + 1])
    return {w + r, left, 0, 0, queued, fields[i]}
  end
end
return {0, 0, 0, 0, queued} -- a marker without an owner: not held
