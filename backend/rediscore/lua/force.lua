-- Delete a reentrant hash lock whoever holds it (exclusive, shared, or a semaphore's permits), and
-- send a release notice. Its wait queue stays: its waiters are woken by the notice.
-- KEYS[1]  the lock
-- ARGV[1]  the lock's notice channel (in the lock's cluster slot)
-- Returns 1 when there was a lock to delete (a hold whose lease has not ended), 0 otherwise.
-- Error NOTALOCK when the key is not a lock: it is left as it is.
local state = lockState(KEYS[1])
if type(state) == 'table' then
  return state
end
if state == 'free' then
  return 0
end
if state == 'shared' and readReaders(KEYS[1]).live == 0 then
  redis.call('del', KEYS[1]) -- what is left of readers whose leases have all ended
  return 0
end
redis.call('del', KEYS[1])
notify(ARGV[1], KEYS[1])
return 1
