-- Acquire or re-enter a reentrant hash lock.
-- KEYS[1]  the lock: a hash of owner token -> hold count, with the lease as its TTL
-- ARGV[1]  owner token
-- ARGV[2]  lease in whole milliseconds
-- Returns the owner's hold count after the call (>= 1) when acquired or re-entered, or, when
-- another owner holds the lock, minus the holder's remaining lease in ms (< 0; 0 if unknown).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local holds = redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return holds
end
local left = redis.call('pttl', KEYS[1])
if left < 0 then
  return 0 -- no lease (someone made the key persistent): unknown
end
return -math.max(left, 1) -- PTTL is 0 in the lease's last millisecond
