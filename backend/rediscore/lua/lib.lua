-- Prepended to every script: what a lock is, in one place.
-- A lock is a hash with the marker field '' = 'locker' and one field per owner token (never more
-- than one owner at a time: an owner can only be added to a free key) whose value is its hold
-- count; the key's TTL is the lease. Owner tokens are never empty, so no owner is the marker.
-- A lock's companion keys (its request markers, its fencing counter: see redislock.FenceKey)
-- hold decimal integers.
local MARK = 'locker'
-- wrongType reports whether a reply of redis.pcall is the error of a key of another type (any
-- other error, NOPERM say, is returned as it is).
local function wrongType(reply)
  return type(reply) == 'table' and type(reply.err) == 'string' and reply.err:find('WRONGTYPE', 1, true) == 1
end
-- lockState returns 'free' when key does not exist, 'lock' when it holds a lock, and otherwise
-- an error reply to return. The scripts ask it before they write anything, so that a key of
-- another type, or a hash of somebody else's, is left exactly as it is.
local function lockState(key)
  local mark = redis.pcall('hget', key, '')
  if mark == MARK then
    return 'lock'
  end
  if wrongType(mark) then
    return redis.error_reply('NOTALOCK the key holds a value of another type')
  end
  if type(mark) == 'table' then
    return mark
  end
  if redis.call('exists', key) == 0 then
    return 'free'
  end
  return redis.error_reply('NOTALOCK the key holds a hash without the lock marker')
end
-- counter returns the value of one of the lock's companion keys (role names it: 'request
-- marker', 'fencing counter'): a decimal integer string, false when the key does not exist, and
-- otherwise an error reply to return. A user's key may be named like a companion; the scripts
-- ask counter for every companion before they write anything, so that such a key is left
-- exactly as it is, and so is the lock.
local function counter(key, role)
  local value = redis.pcall('get', key)
  if value == false or (type(value) == 'string' and value:find('^%d+$')) then
    return value
  end
  if wrongType(value) then
    return redis.error_reply('NOTALOCK the ' .. role .. ' of the key is a value of another type')
  end
  if type(value) == 'table' then
    return value
  end
  return redis.error_reply('NOTALOCK the ' .. role .. ' of the key is a string that is not a number')
end
