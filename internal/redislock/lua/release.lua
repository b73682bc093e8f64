-- Release one hold of a reentrant hash lock; at zero, delete it and send a release notice.
-- KEYS[1]  the lock
-- KEYS[2]  with a request ID: the marker of this call, or, for a take-back, of the acquire
-- ARGV[1]  owner token
-- ARGV[2]  the lock's notice channel (in the lock's cluster slot)
-- ARGV[3]  how long a marker lives, in ms; '0' when the call has no request ID
-- ARGV[4]  '1' for a take-back: release the hold that the acquire with this ID added, if any
-- Returns the holds left (>= 0), or -1 when there is nothing to release: the owner holds no lock
-- on the key, or (take-back) the acquire did not take effect. The lease is left as it is while
-- holds remain. A call whose marker exists was sent before: it changes nothing but the marker's
-- lifetime (a write, for a WAIT after it: see acquire.lua) and reports the first outcome.
local lock, owner = KEYS[1], ARGV[1]
local marker = ARGV[3] ~= '0' and KEYS[2]
local undo = ARGV[4] == '1'
if marker then
  local done = redis.call('get', marker)
  if undo then
    -- Mark the acquire as taken back: if it has not arrived yet, it will be refused.
    redis.call('set', marker, 0, 'px', ARGV[3])
    if not done or done == '0' then
      return -1
    end
  elseif done then
    redis.call('pexpire', marker, ARGV[3])
    return tonumber(done)
  end
end
if redis.call('hexists', lock, owner) == 0 then
  return -1
end
local left = redis.call('hincrby', lock, owner, -1)
if marker and not undo then
  redis.call('set', marker, left, 'px', ARGV[3])
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
