-- Prepended to every script: what a lock is, in one place.
-- A lock is a hash with the marker field '' = 'locker' and one field per owner token (never more
-- than one owner at a time: an owner can only be added to a free key) whose value is its hold
-- count; the key's TTL is the lease. Owner tokens are never empty, so no owner is the marker.
local MARK = 'locker'
-- lockState returns 'free' when key does not exist, 'lock' when it holds a lock, and otherwise
-- an error reply to return. The scripts ask it before they write anything, so that a key of
-- another type, or a hash of somebody else's, is left exactly as it is.
local function lockState(key)
  local mark = redis.pcall('hget', key, '')
  if mark == MARK then
    return 'lock'
  end
  if type(mark) == 'table' then
    return redis.error_reply('NOTALOCK the key holds a value of another type')
  end
  if redis.call('exists', key) == 0 then
    return 'free'
  end
  return redis.error_reply('NOTALOCK the key holds a hash without the lock marker')
end
