-- Release one hold of a reentrant hash lock; at zero, delete it and send a release notice.
-- KEYS[1]  the lock
-- KEYS[2]  with a request ID: the marker of this call, or, for a take-back, of the acquire
-- ARGV[1]  owner token
-- ARGV[2]  the lock's notice channel (in the lock's cluster slot)
-- ARGV[3]  flags: 'm' the call has a request ID (KEYS[2]); 'u' a take-back: undo the acquire
--          with this ID, if it took effect; 'n' that acquire was a fresh owner's (no marker)
-- A marker lives 20000 ms (locker.RequestWindow).
-- Returns the holds left (>= 0), or -1 when there is nothing to release: the owner holds no lock
-- on the key, or (take-back) the acquire did not take effect. Error NOTALOCK when the key is
-- not a lock, or the marker is not a number (lib.lua): nothing is written then. The lease is
-- left as it is while holds remain.
-- A release sent again changes nothing but its marker's lifetime (a write, for a WAIT after it:
-- see acquire.lua); the marker reports the first outcome.
-- A take-back leaves the acquire's marker at 0, so that the acquire, if it arrives later, is
-- refused; it removes the hold the acquire added: one hold, or a fresh owner's every hold.
local lock, owner = KEYS[1], ARGV[1]
local flags = ARGV[3]
local marker = flags:find('m', 1, true) and KEYS[2]
local undo = marker and flags:find('u', 1, true)
local fresh = flags:find('n', 1, true)
-- Every key is checked before anything is written: an error leaves everything as it was.
local state = lockState(lock)
if type(state) == 'table' then
  return state
end
local done = marker and counter(marker, 'request marker')
if type(done) == 'table' then
  return done
end
if marker then
  if undo then
    redis.call('set', marker, 0, 'px', 20000)
    if done == '0' or (not done and not fresh) then
      return -1
    end
  elseif done then
    redis.call('pexpire', marker, 20000)
    return tonumber(done)
  end
end
if redis.call('hexists', lock, owner) == 0 then
  return -1
end
local left = 0
if undo and fresh then
  redis.call('hdel', lock, owner)
else
  left = redis.call('hincrby', lock, owner, -1)
end
if marker and not undo then
  redis.call('set', marker, left, 'px', 20000)
end
if left > 0 then
  return left
end
redis.call('del', lock)
-- Sharded pub/sub where the server has it (Redis >= 7), plain pub/sub otherwise; subscribers
-- make the same choice. A notice is an optimisation: waiters also wake on timers.
local sent = redis.pcall('spublish', ARGV[2], lock)
if type(sent) == 'table' and sent.err then
  redis.pcall('publish', ARGV[2], lock)
end
return 0
