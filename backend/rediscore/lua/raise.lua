-- Raise a lock's fencing counter to at least a token (a quorum of servers keeps its tokens
-- increasing this way: see backend/quorum).
-- KEYS[1]  the lock's fencing counter (FenceKey)
-- ARGV[1]  the token, a decimal integer
-- Returns the counter after the call. Error NOTALOCK when the counter's key holds something
-- that is not a number (lib.lua): it is left as it is.
local current = counter(KEYS[1], 'fencing counter')
if type(current) == 'table' then
  return current
end
current = tonumber(current) or 0
local token = tonumber(ARGV[1])
if current < token then
  redis.call('set', KEYS[1], ARGV[1])
  return token
end
return current
