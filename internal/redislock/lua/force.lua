-- Delete a reentrant hash lock whoever holds it, and send a release notice.
-- KEYS[1]  the lock
-- ARGV[1]  the lock's notice channel (in the lock's cluster slot)
-- Returns 1 when there was a lock to delete, 0 otherwise.
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
local sent = redis.pcall('spublish', ARGV[1], KEYS[1])
if type(sent) == 'table' and sent.err then
  redis.pcall('publish', ARGV[1], KEYS[1])
end
return 1
