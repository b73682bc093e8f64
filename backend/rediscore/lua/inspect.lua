-- Inspect a reentrant hash lock and its wait queue (lib.lua has the layout).
-- KEYS[1]  the lock
-- KEYS[2]  optional: the lock's wait queue
-- Returns {holds, remaining lease in ms, shared, readers, queued, limit, then for each holder its
-- holds and its remaining lease in ms, then the holders' owner tokens}: exclusive: shared 0,
-- readers 0, limit 0, the holder's holds of both kinds and the key's lease; shared: shared 1, the
-- number of readers whose lease has not ended, their holds together, and the longest of their
-- leases; a semaphore: shared 0, readers 0, its limit, and as for readers its holders' holds and
-- the longest lease. Each holder's holds are of both kinds, and its lease its own (lib.lua:
-- readReaders). The tokens come in one string, in the holders' order, each as "<length>:<token>"
-- (a token may hold any byte); the caller sorts them. queued counts the live entries of the queue
-- (0 without KEYS[2]). A free lock gives {0, 0, 0, 0, queued, 0}. Error NOTALOCK when the key is
-- not a lock, or the queue not a queue.
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
local none = {0, 0, 0, 0, queued, 0} -- not held
if state == 'free' then
  return none
end
local reply, owners = {0, 0, 0, 0, queued, 0}, {}
-- holder adds a holder with its holds and its remaining lease to the reply.
local function holder(owner, holds, left)
  reply[#reply + 1] = holds
  reply[#reply + 1] = left
  owners[#owners + 1] = #owner .. ':' .. owner
end
if state == 'shared' then
  local rs = readReaders(KEYS[1])
  if rs.live == 0 then
    return none -- every reader's lease has ended: not held
  end
  for owner, r in pairs(rs.holds) do
    reply[1] = reply[1] + r
    holder(owner, r, leaseLeft(rs, owner))
  end
  reply[2], reply[6] = longestLeft(rs), rs.limit
  if rs.limit == 0 then
    reply[3], reply[4] = 1, rs.live
  end
else
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
      reply[1], reply[2] = w + r, left
      holder(fields[i], w + r, left)
      break
    end
  end
  if #owners == 0 then
    return none -- a marker without an owner: not held
  end
end
reply[#reply + 1] = table.concat(owners)
return reply
