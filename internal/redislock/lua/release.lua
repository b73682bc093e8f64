-- Release one hold of a reentrant hash lock; at zero, delete it and send a release notice.
-- KEYS[1]  the lock
-- ARGV[1]  owner token
-- ARGV[2]  the lock's notice channel (in the lock's cluster slot)
-- Returns the holds left (>= 0), or -1 when the owner holds no lock on the key. The lease is
-- left as it is while holds remain.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local left = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if left > 0 then
  return left
end
redis.call('del', KEYS[1])
-- Sharded pub/sub where the server has it (Redis >= 7), plain pub/sub otherwise; subscribers
-- make the same choice. A notice is an optimisation: waiters also wake on timers.
local sent = redis.pcall('spublish', ARGV[2], KEYS[1])
if type(sent) == 'table' and sent.err then
  redis.pcall('publish', ARGV[2], KEYS[1])
end
return 0
