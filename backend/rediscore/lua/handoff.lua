-- Pass an exclusive hold, or a semaphore's permit, from one owner to another in one step
-- (locker.HandOffRequest; lib.lua has the layout): the key stays held, no notice is sent, and the
-- wait queue is not consulted.
-- KEYS[1]  the lock
-- KEYS[2]  the lock's wait queue (To's entry, if any, ends)
-- KEYS[3]  with 'f': the lock's fencing counter
-- ARGV[1]  From, the owner that holds the lock exclusively, or one permit of the semaphore, with
--          one hold
-- ARGV[2]  To, a fresh owner token
-- ARGV[3]  lease in whole milliseconds
-- ARGV[4]  flags: 'f' draw a new fencing token for To
-- Returns {holds, token, queued}: {1, the new token (0 without 'f')} when handed off (a permit
-- keeps the semaphore's limit, and its new token: lib.lua); when To holds the lock already (the
-- hand-off sent again), its hold count and the latest token (a permit's holder: its permit's
-- token; 0 without 'f'), its lease reset; queued counts the live queue entries of other owners
-- than To.
-- Errors: NOTHELD when From does not hold the lock exclusively, nor one permit, with exactly one
-- hold (nothing changes); NOTALOCK when the key, the queue or the counter is not what the scripts
-- write (nothing is written).
local lock, from, to = KEYS[1], ARGV[1], ARGV[2]
-- others counts q's live entries of other owners than owner.
local function others(q, owner)
  local n = 0
  for _, e in ipairs(q.entries) do
    if e.owner ~= owner then
      n = n + 1
    end
  end
  return n
end
local fence = ARGV[4]:find('f', 1, true) and KEYS[3]
-- Every key is checked before anything is written (lib.lua: prepare).
local state, mine, _, q, latest = prepare(lock, to, false, nil, KEYS[2], fence)
if type(state) == 'table' then
  return state
end
if state == 'shared' then
  local rs = readReaders(lock)
  local r = rs.holds[to]
  if r then -- To is a reader, or a permit's holder: its own lease alone is reset
    local token = latest
    if rs.limit > 0 then
      token = fence and permitToken(rs, to) or 0
    end
    writeReaders(rs, to, r, ARGV[3])
    return {r, token, others(q, to)}
  end
  if rs.limit > 0 and rs.holds[from] == 1 then
    -- From's permit, held once, passes to To: its field goes, To's comes with a lease of its own
    -- (and a new token), and no other holder changes.
    dropReader(rs, from)
    local token = fence and drawToken(fence, latest)
    writeReaders(rs, to, 1, ARGV[3], token and string.format('%d', token))
    dequeue(q, to)
    return {1, token or 0, #q.entries}
  end
elseif mine then
  local w, r = holdsOf(mine)
  redis.call('pexpire', lock, ARGV[3])
  return {w + r, latest, others(q, to)}
end
if state ~= 'exclusive' or redis.call('hget', lock, from) ~= '1' then
  return redis.error_reply('NOTHELD the owner does not hold the lock exclusively, once')
end
redis.call('hdel', lock, from)
redis.call('hset', lock, to, 1)
redis.call('pexpire', lock, ARGV[3])
local token = latest
if fence then
  token = drawToken(fence, latest)
end
dequeue(q, to)
return {1, token, #q.entries}
