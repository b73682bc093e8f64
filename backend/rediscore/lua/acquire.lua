-- Acquire or re-enter a reentrant hash lock.
-- KEYS[1]      the lock: a hash of owner token -> hold count, with the lease as its TTL
-- KEYS[2]      with a request ID: this call's marker (its outcome, or 0 once taken back)
-- KEYS[#KEYS]  with fencing: the lock's fencing counter (the latest token)
-- ARGV[1]      owner token
-- ARGV[2]      lease in whole milliseconds
-- ARGV[3]      flags: 'm' the call has a request ID (KEYS[2]), 'f' report a fencing token,
--              'n' the owner is fresh: it held nothing on the lock before this request,
--              'r' re-entry only: never create the lock
-- A marker lives 20000 ms (locker.RequestWindow).
-- Returns {holds, token}: the owner's hold count after the call (>= 1) when acquired or
-- re-entered, with the fencing token (0 without fencing); or, when another owner holds the lock,
-- {minus the holder's remaining lease in ms (< 0; 0 if unknown), 0}. Errors: NOTHELD for a
-- re-entry ('r') when the owner holds no lock; NOTALOCK when the key is not a lock, or the
-- marker or the fencing counter is not a number (lib.lua): nothing is written then.
-- A request sent again changes nothing: a fresh owner's is recognised by its hold (no marker is
-- written: the common case costs nothing), another owner's by its marker. Either reports the
-- first outcome while the hold is there; a request taken back (marker 0) is refused with {0, 0}.
-- Either still writes (the lease, or the marker's lifetime): a WAIT after this call, on this
-- call's connection, then also covers the first call's writes, made on another (replica acks).
local lock, owner = KEYS[1], ARGV[1]
local flags = ARGV[3]
local marker = flags:find('m', 1, true) and KEYS[2]
local fence = flags:find('f', 1, true) and KEYS[#KEYS]
local fresh = flags:find('n', 1, true)
local reentry = flags:find('r', 1, true)
-- Every key is checked before anything is written: an error leaves everything as it was.
local state = lockState(lock)
if type(state) == 'table' then
  return state
end
local done = marker and counter(marker, 'request marker')
if type(done) == 'table' then
  return done
end
local latest = fence and counter(fence, 'fencing counter')
if type(latest) == 'table' then
  return latest
end
latest = tonumber(latest) or 0 -- the latest token; 0 without fencing or a counter yet
if done then
  redis.call('pexpire', marker, 20000)
  if done ~= '0' and redis.call('hexists', lock, owner) == 1 then
    return {tonumber(done), latest}
  end
  return {0, 0}
end
local held = state == 'lock' and tonumber(redis.call('hget', lock, owner))
if fresh and held then
  redis.call('pexpire', lock, ARGV[2]) -- this very request, sent again
  return {held, latest}
end
if reentry and not held then
  return redis.error_reply('NOTHELD the owner holds no lock on the key')
end
if held or state == 'free' then
  local holds = 1
  if held then
    holds = redis.call('hincrby', lock, owner, 1)
  else
    redis.call('hset', lock, '', MARK, owner, 1)
  end
  redis.call('pexpire', lock, ARGV[2])
  local token = 0
  if fence then
    if holds == 1 then
      -- The next token is the counter plus one, or the server's clock in microseconds if that is
      -- more: tokens keep growing after the server lost the counter (a restart without
      -- persistence, a failover to a replica that missed it), unless its clock went back.
      local now = redis.call('time')
      token = math.max(latest + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
      redis.call('set', fence, string.format('%d', token))
    else
      token = latest
    end
  end
  if marker and not fresh then
    redis.call('set', marker, holds, 'px', 20000)
  end
  return {holds, token}
end
local left = redis.call('pttl', lock)
if left < 0 then
  return {0, 0} -- no lease (someone made the key persistent): unknown
end
return {-math.max(left, 1), 0} -- PTTL is 0 in the lease's last millisecond
