-- Take an owner's entry out of a lock's wait queue (a waiter that gives up; lib.lua has the
-- layout), and send a release notice when live entries were behind it: they may be let in now.
-- When the entry is a grant record (a release granted the owner the key, or a permit of it, and
-- the owner did not confirm it) and the owner still holds the key exclusively, or one permit of
-- it, once, that hold is released as release.lua would: the key, or the permit, passes to the
-- next in the queue.
-- KEYS[1]  the lock's wait queue
-- KEYS[2]  the lock
-- KEYS[3]  the lock's fencing counter
-- ARGV[1]  owner token
-- ARGV[2]  the lock's notice channel (in the lock's cluster slot)
-- Returns 1 when the owner had a live entry, 0 otherwise (no entry is no error). Error NOTALOCK
-- when the key or the queue is not what the scripts write, or the counter is not when a grant
-- would draw from it: nothing is written.
local lock, owner, channel = KEYS[2], ARGV[1], ARGV[2]
-- Every key is checked before anything is written (lib.lua: prepare; the counter only when a
-- grant would draw from it).
local state, _, _, q, latest = prepare(lock, nil, false, nil, KEYS[1], KEYS[3], true)
if type(state) == 'table' then
  return state
end
local live, behind, granted = dequeue(q, owner)
if granted then
  if state == 'exclusive' and redis.call('hget', lock, owner) == '1' then
    free(lock, channel, q, KEYS[3], latest)
  elseif state == 'shared' then
    local rs = readReaders(lock)
    if rs.limit > 0 and rs.holds[owner] == 1 and rs.live > 1 then
      leavePermit(rs, owner, q, lock, channel, KEYS[3], latest) -- the permit granted, given back
    elseif rs.limit > 0 and rs.holds[owner] == 1 then
      free(lock, channel, q, KEYS[3], latest) -- the last permit
    end
  end
  return 1
end
if behind then
  notify(channel, lock)
end
if live then
  return 1
end
return 0
