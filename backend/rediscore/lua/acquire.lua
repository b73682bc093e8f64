-- Acquire or re-enter a reentrant hash lock, exclusive or shared, or a permit of a semaphore
-- (lib.lua has the layout).
-- KEYS[1]      the lock: a hash of owner token -> hold count, with the lease as its TTL
-- KEYS[2]      with a request ID: this call's marker (its outcome, or 0 once taken back)
-- KEYS[2|3]    with 'q': the lock's wait queue (after the marker, if any)
-- KEYS[#KEYS]  with fencing: the lock's fencing counter (the latest token)
-- ARGV[1]      owner token
-- ARGV[2]      lease in whole milliseconds
-- ARGV[3]      flags: 'm' the call has a request ID (KEYS[2]), 'f' report a fencing token,
--              'n' the owner is fresh: it held nothing on the lock before this request,
--              'r' re-entry only: never create the lock, 's' a shared hold (else exclusive),
--              'o' fair: respect the wait queue's order, 'q' the queue is passed,
--              'p' a permit of a semaphore (with 's' and 'q': a permit is a shared hold)
-- ARGV[4]      with 'q': how long a refused request waits in the queue, in ms ('0': it does not)
-- ARGV[5]      with 'q': the lock's notice channel (in the lock's cluster slot)
-- ARGV[6]      with 'q': the lease in ms of a grant that a refused fresh exclusive request that
--              waits asks for (locker.AcquireRequest.Grant; absent or '0': none)
-- ARGV[7]      with ARGV[6]: the request's ID (locker.AcquireRequest.ID; may be empty)
--              With 'p', ARGV[6] is the semaphore's number of permits n, a positive integer, and
--              ARGV[7] and ARGV[8] are the grant's lease and the ID: of a permit of n.
-- A marker lives 20000 ms (locker.RequestWindow).
-- Returns holds: the owner's hold count after the call, exclusive and shared together (>= 1),
-- when acquired or re-entered; or, when refused, minus the holder's remaining lease in ms (the
-- longest reader's; < 0; 0 if unknown, or when the key is free but the queue refused). With fencing ('f') the reply is
-- {holds, token}, token the fencing token (a shared hold reports the latest token and never
-- advances it; 0 when refused); without, a bare integer, which a driver reads without
-- allocating an array. A permit request ('p') always gets {holds, token, taken}: token its
-- permit's own (0 without 'f'), and when refused, minus the soonest of the holders' remaining
-- leases (when a permit may be free) and taken the number of holders whose lease runs (0 and 0
-- when the key is free but the queue refused).
-- Errors: NOTHELD for a re-entry ('r') when the owner holds nothing on the lock; UPGRADE for an
-- exclusive request of an owner that holds the lock in shared mode; WRONGLIMIT for a request
-- whose limit (a permit's n, 0 for a lock) is not the one the key is held with (a semaphore of
-- another n, a lock where a permit is asked, a semaphore where a lock is: checked before
-- NOTHELD and UPGRADE, after a request sent again found its marker); NOTALOCK when the key is not
-- a lock, or the marker or the fencing counter is not a number, or the queue is not a queue
-- (lib.lua): nothing is written then.
-- An owner that holds the lock re-enters it whatever the queue: an exclusive holder takes one
-- more exclusive hold, or a shared one (a downgrade); a reader one more shared hold. Either sets
-- the owner's lease, and no other reader's (lib.lua: readers). A new hold is granted, exclusive
-- on a free key (or one whose readers' leases have all ended), shared on a free key or one in
-- shared mode, when the queue admits it (lib.lua: admits); the owner's entry then leaves the queue, and when that lets readers
-- at the head of the queue in, a notice wakes them. A refused request with a wait takes its
-- place at the queue's tail (kind 'x' or 's' when fair, 'w' or 'r' when not), or keeps the one it
-- has and refreshes its deadline; a fresh exclusive one may ask for a grant (ARGV[6]: lib.lua,
-- grant). Without 'q' (a plain exclusive request that does not wait) the queue is not read:
-- such a request passes it.
-- A permit is a shared hold of a semaphore: a new one is granted on a free key (which then
-- stores n) or a semaphore of n with fewer than n holders whose lease runs; a fair request then
-- passes no live entry of the queue ahead of its owner's, a plain one passes the queue. With
-- fencing, every new permit draws a new token, kept with its holder's field: its re-entries, and
-- the request sent again, report it. When a granted permit request leaves the queue with
-- entries behind it and a permit is still free, a notice wakes them. A refused one that waits
-- queues as a shared request ('s' or 'r'); a fresh one may ask for a grant of a permit of n
-- (lib.lua, grant: the release that ends a permit, or frees the key, gives it).
-- A fresh owner that finds itself holding the key was granted it by a release (or this is its
-- request sent again): the lease is reset and its grant record ends.
-- A request sent again changes nothing: a fresh owner's is recognised by its hold (no marker is
-- written: the common case costs nothing), another owner's by its marker. Either reports the
-- first outcome while the hold is there; a request taken back (marker 0) is refused with 0.
-- Either still writes (the lease, or the marker's lifetime): a WAIT after this call, on this
-- call's connection, then also covers the first call's writes, made on another (replica acks).
-- The fast path, before the library (lib.go: libHere): a fresh owner's new exclusive hold,
-- without fencing, on a free key whose marker and queue (those passed) do not exist, which one
-- EXISTS answers: the lock is written QUIET ('locker:quiet', lib.lua), and nothing else is read
-- or written.
local flags = ARGV[3]
if flags:find('n', 1, true) and not flags:find('[rsf]') and redis.call('exists', unpack(KEYS)) == 0 then
  redis.call('hset', KEYS[1], '', 'locker:quiet', ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
-- lib.lua: the definitions used below come here.
local lock, owner = KEYS[1], ARGV[1]
local n = 2
local marker, queue, fence
if flags:find('m', 1, true) then
  marker, n = KEYS[n], n + 1
end
if flags:find('q', 1, true) then
  queue, n = KEYS[n], n + 1
end
if flags:find('f', 1, true) then
  fence = KEYS[n]
end
local fresh = flags:find('n', 1, true)
local reentry = flags:find('r', 1, true)
local shared = flags:find('[sp]') ~= nil
local fair = flags:find('o', 1, true) ~= nil
local limit = 0 -- a permit request's: the semaphore's number of permits; 0 for a lock
if flags:find('p', 1, true) then
  if not (queue and ARGV[6] and ARGV[6]:find('^[1-9]%d*$')) then
    return redis.error_reply('ERR a permit request needs the queue and a limit of at least 1')
  end
  limit = tonumber(ARGV[6])
end
local function reply(holds, token, taken)
  if limit > 0 then
    return {holds, token, taken or 0}
  end
  if fence then
    return {holds, token}
  end
  return holds
end
-- Every key is checked before anything is written (lib.lua: prepare): an error leaves everything
-- as it was. latest is the latest token; 0 without fencing or a counter yet.
local state, value, done, q, latest, quiet = prepare(lock, owner, true, marker, queue, fence)
if type(state) == 'table' then
  return state
end
local rs -- in shared mode: the lock's readers, or the semaphore's holders (lib.lua: readReaders)
local token = latest -- the token a hold of the owner's reports: the latest, or its permit's own
if state == 'shared' then
  rs = readReaders(lock)
  if rs.live == 0 then
    redis.call('del', lock) -- every reader's lease has ended: the key is free
    state, rs = 'free', nil
  else
    value = rs.holds[owner]
    if rs.limit > 0 then
      token = fence and permitToken(rs, owner) or 0
    end
  end
end
if done then
  redis.call('pexpire', marker, 20000)
  if done ~= '0' and value then
    return reply(tonumber(done), token)
  end
  return reply(0, 0)
end
local held = rs and rs.limit or 0 -- the key's limit: a semaphore's permits, 0 for a lock
if state ~= 'free' and held ~= limit then
  if held == 0 then
    return redis.error_reply(string.format('WRONGLIMIT the key is held as a lock, not a semaphore of %d', limit))
  elseif limit == 0 then
    return redis.error_reply(string.format('WRONGLIMIT the key is held as a semaphore of %d, not a lock', held))
  end
  return redis.error_reply(string.format('WRONGLIMIT the key is held as a semaphore of %d, not %d', held, limit))
end
if value then
  local w, r = 0, 0 -- the owner's exclusive and shared holds
  if state == 'exclusive' then
    w, r = holdsOf(value)
  else
    r = value
  end
  if fresh then
    -- This very request sent again, or a grant confirmed: the owner's lease is reset.
    if rs then
      writeReaders(rs, owner, r, ARGV[2])
    else
      redis.call('pexpire', lock, ARGV[2])
    end
    if q then
      dequeue(q, owner)
    end
    return reply(w + r, token)
  end
  if state == 'shared' and not shared then
    return redis.error_reply('UPGRADE') -- locker.ErrUpgrade says it all
  end
  if shared then
    r = r + 1
  else
    w = w + 1
  end
  if rs then
    writeReaders(rs, owner, r, ARGV[2]) -- the owner's lease, no other reader's
  elseif r == 0 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, ARGV[2])
  else
    redis.call('hset', lock, owner, exclusiveValue(w, r))
    redis.call('pexpire', lock, ARGV[2])
  end
  if marker then
    redis.call('set', marker, w + r, 'px', 20000)
  end
  return reply(w + r, token)
end
if reentry then
  return redis.error_reply('NOTHELD the owner holds no lock on the key')
end
local admitted = state == 'free' or (shared and state == 'shared')
local live = rs and rs.live or 0 -- the readers, or the permits taken
if admitted and limit > 0 then
  -- A permit is free, and a fair request passes no live entry of the queue (a plain one passes
  -- them all).
  local head = q.entries[1]
  admitted = live < limit and not (fair and head and head.owner ~= owner)
elseif admitted and q then
  admitted = admits(q, owner, shared, fair)
end
if admitted then
  token = latest
  if fence and (not shared or limit > 0) then
    token = drawToken(fence, latest) -- a new exclusive hold's, or a new permit's
  end
  local own = limit > 0 and fence and string.format('%d', token) or nil -- the permit's token, kept with it
  if state == 'free' and limit > 0 then
    redis.call('hset', lock, '', PERMITS .. ARGV[6]) -- a semaphore's first permit
    writeReaders(newReaders(lock, limit), owner, 1, ARGV[2], own)
  elseif state == 'free' then
    redis.call('hset', lock, '', shared and SHARED or MARK, owner, 1)
    redis.call('pexpire', lock, ARGV[2])
  else
    writeReaders(rs, owner, 1, ARGV[2], own) -- a new reader, or permit, with its own lease
  end
  if q then
    local _, behind = dequeue(q, owner)
    if behind and shared and reader(q.entries[1]) and (limit == 0 or live + 1 < limit) then
      notify(ARGV[5], lock) -- readers at the head may join, or take a permit still free
    end
  end
  if marker and not fresh then
    redis.call('set', marker, 1, 'px', 20000)
  end
  return reply(1, token)
end
if quiet then
  redis.call('hset', lock, '', MARK) -- refused: its release must read the queue and send a notice
end
local wait = q and tonumber(ARGV[4]) or 0
if wait > 0 then
  local kind = shared and 'r' or 'w'
  if fair then
    kind = shared and 's' or 'x'
  end
  local at = limit > 0 and 7 or 6 -- the grant's arguments
  local grant = (limit > 0 or not shared) and tonumber(ARGV[at] or '0') or 0
  if grant == 0 or not fresh then
    grant = nil
  end
  enqueue(q, owner, kind, wait, grant, fence ~= nil, ARGV[at + 1] or '', limit > 0 and limit or nil)
end
if state == 'free' then
  return reply(0, 0) -- free, but others are ahead in the queue
end
if rs and limit > 0 then
  return reply(-soonestLeft(rs), 0, live) -- every permit is taken (or others are ahead)
end
if rs then
  return reply(-longestLeft(rs), 0) -- the lease of the reader whose lease ends last
end
local left = redis.call('pttl', lock)
if left < 0 then
  return reply(0, 0) -- no lease (someone made the key persistent): unknown
end
return reply(-math.max(left, 1), 0) -- PTTL is 0 in the lease's last millisecond
