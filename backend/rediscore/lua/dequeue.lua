-- Take an owner's entry out of a lock's wait queue (a waiter that gives up; lib.lua has the
-- layout), and send a release notice when live entries were behind it: they may be let in now.
-- KEYS[1]  the lock's wait queue
-- ARGV[1]  owner token
-- ARGV[2]  the lock's notice channel (in the lock's cluster slot)
-- ARGV[3]  the lock's key (the notice's message)
-- Returns 1 when the owner had a live entry, 0 otherwise (no entry is no error). Error NOTALOCK
-- when the key is not a queue: it is left as it is.
local q = loadQueue(KEYS[1])
if q.err then
  return q
end
local live, behind = dequeue(q, ARGV[1])
if behind then
  notify(ARGV[2], ARGV[3])
end
if live then
  return 1
end
return 0
