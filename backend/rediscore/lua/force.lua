-- Delete a reentrant hash lock whoever holds it, and send a release notice.
-- KEYS[1]  the lock
-- ARGV[1]  the lock's notice channel (in the lock's cluster slot)
-- Returns 1 when there was a lock to delete, 0 otherwise. Error NOTALOCK when the key is not a
-- lock: it is left as it is.
local state = lockState(KEYS[1])
if type(state) == 'table' then
  return state
end
if state == 'free' then
  return 0
end
redis.call('del', KEYS[1])
local sent = redis.pcall('spublish', ARGV[1], KEYS[1])
if type(sent) == 'table' and sent.err then
  redis.pcall('publish', ARGV[1], KEYS[1])
end
return 1
