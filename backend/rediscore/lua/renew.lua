-- Renew the leases of many reentrant hash locks, each only if its owner still holds it (in any
-- way: exclusive, shared, both, or a semaphore's permit), and each the owner's lease alone
-- (lib.lua: readReaders).
-- KEYS[i]        a lock
-- ARGV[2i-1]     the owner token expected for KEYS[i]
-- ARGV[2i]       the new lease of KEYS[i] in whole milliseconds
-- Returns an array with, for each key, 1 when renewed and 0 when the owner holds no lock on it
-- (also when the key is not a lock: it is left as it is, or when the owner's lease has ended).
-- Every key of one call must hash to one cluster slot.
local renewed = {}
for i, key in ipairs(KEYS) do
  local owner, lease = ARGV[2 * i - 1], ARGV[2 * i]
  local mark = redis.pcall('hget', key, '')
  renewed[i] = 0
  if (mark == MARK or mark == QUIET) and redis.call('hexists', key, owner) == 1 then
    redis.call('pexpire', key, lease)
    renewed[i] = 1
  elseif mark == SHARED or limitOf(mark) then -- readers, or a semaphore's holders
    local rs = readReaders(key)
    local r = rs.holds[owner]
    if r then
      writeReaders(rs, owner, r, lease)
      renewed[i] = 1
    end
  end
end
return renewed
