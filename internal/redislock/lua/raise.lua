-- Raise a lock's fencing counter to at least a token (a quorum of servers keeps its tokens
-- increasing this way: see backend/quorum).
-- KEYS[1]  the lock's fencing counter (FenceKey)
-- ARGV[1]  the token, a decimal integer
-- Returns the counter after the call.
local current = tonumber(redis.call('get', KEYS[1])) or 0
local token = tonumber(ARGV[1])
if current < token then
  redis.call('set', KEYS[1], ARGV[1])
  return token
end
return current
