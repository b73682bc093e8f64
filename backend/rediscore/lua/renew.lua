-- Renew the leases of many reentrant hash locks, each only if its owner still holds it (in any
-- way: exclusive, shared, or both).
-- KEYS[i]        a lock
-- ARGV[2i-1]     the owner token expected for KEYS[i]
-- ARGV[2i]       the new lease of KEYS[i] in whole milliseconds
-- Returns an array with, for each key, 1 when renewed and 0 when the owner holds no lock on it
-- (also when the key is not a lock: it is left as it is).
-- Every key of one call must hash to one cluster slot.
local renewed = {}
for i, key in ipairs(KEYS) do
  local mark = redis.pcall('hget', key, '')
  if (mark == MARK or mark == SHARED) and redis.call('hexists', key, ARGV[2 * i - 1]) == 1 then
    redis.call('pexpire', key, ARGV[2 * i])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
