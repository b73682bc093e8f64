-- Acquire or re-enter a reentrant hash lock.
-- KEYS[1]      the lock: a hash of owner token -> hold count, with the lease as its TTL
-- KEYS[2]      with a request ID: this call's marker, which remembers its outcome
-- KEYS[#KEYS]  with fencing: the lock's fencing counter
-- ARGV[1]      owner token
-- ARGV[2]      lease in whole milliseconds
-- ARGV[3]      how long the marker lives, in ms; '0' when the call has no request ID
-- ARGV[4]      '1' to report a fencing token
-- Returns {holds, token}: the owner's hold count after the call (>= 1) when acquired or
-- re-entered, with the fencing token (0 without fencing); or, when another owner holds the lock,
-- {minus the holder's remaining lease in ms (< 0; 0 if unknown), 0}.
-- A call whose marker exists was sent before: it changes nothing but the marker's lifetime and
-- reports the first outcome while the owner still holds the lock, {0, 0} once the hold is gone
-- or was taken back (marker 0). (Resetting the lifetime is a write: a WAIT after this call, on
-- this call's connection, then also covers the first call's writes, made on another.)
local lock, owner = KEYS[1], ARGV[1]
local marker = ARGV[3] ~= '0' and KEYS[2]
local fence = ARGV[4] == '1' and KEYS[#KEYS]
local function current()
  if not fence then
    return 0
  end
  return tonumber(redis.call('get', fence)) or 0
end
if marker then
  local done = redis.call('get', marker)
  if done then
    redis.call('pexpire', marker, ARGV[3])
    if done ~= '0' and redis.call('hexists', lock, owner) == 1 then
      return {tonumber(done), current()}
    end
    return {0, 0}
  end
end
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
  local holds = redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, ARGV[2])
  local token = 0
  if fence then
    if holds == 1 then
      token = redis.call('incr', fence)
    else
      token = current()
    end
  end
  if marker then
    redis.call('set', marker, holds, 'px', ARGV[3])
  end
  return {holds, token}
end
local left = redis.call('pttl', lock)
if left < 0 then
  return {0, 0} -- no lease (someone made the key persistent): unknown
end
return {-math.max(left, 1), 0} -- PTTL is 0 in the lease's last millisecond
