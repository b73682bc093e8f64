-- Release one hold of a reentrant hash lock, exclusive or shared, or of a semaphore's permit (a
-- shared hold: lib.lua has the layout); when no hold is left, delete it and send a release
-- notice.
-- KEYS[1]  the lock
-- KEYS[2]  with a request ID: the marker of this call, or, for a take-back, of the acquire
-- KEYS[2|3], KEYS[3|4]  with 'q': the lock's wait queue and its fencing counter
-- ARGV[1]  owner token
-- ARGV[2]  the lock's notice channel (in the lock's cluster slot)
-- ARGV[3]  flags: 'm' the call has a request ID (KEYS[2]); 'u' a take-back: undo the acquire
--          with this ID, if it took effect; 'n' the owner is fresh (locker.ReleaseRequest.Fresh:
--          for a take-back, that acquire wrote no marker; for a release, no marker is needed
--          when no hold of the owner's is left); 's' the hold to release is a shared one (else
--          exclusive); 'q' the queue and the counter are passed: a release that frees the
--          key, or a permit of it, grants it to the head of the queue if it asked for that
--          (lib.lua: grant)
-- ARGV[4]  with 'n' and without 'u': how long, in ms, the marker of a release that leaves the
--          owner no hold lives (locker.ReleaseRequest.ReplyWindow); absent or 0: no marker
-- A marker lives 20000 ms (locker.RequestWindow), but for ARGV[4].
-- Returns the owner's holds left, exclusive and shared together (>= 0), or -1 when there is
-- nothing to release: the owner holds no hold of that kind on the key, or (take-back) the
-- acquire did not take effect. Error NOTALOCK when the key is not a lock, or the marker, or the
-- queue, or (when the release would grant a token) the fencing counter is not what the scripts
-- write (lib.lua): nothing is written then. The owner's lease is left as it is while its holds
-- remain. When the exclusive holder releases its last exclusive hold but has shared ones, the key
-- passes to shared mode with it as the only reader, its lease unchanged, and a notice wakes the
-- readers that wait. A reader that releases its last hold leaves, and the key's TTL runs to the
-- end of the longest lease left; the last one deletes the key. A reader whose lease has ended
-- has nothing to release. A semaphore's holder that releases its last hold frees its permit: the
-- head of the queue takes it when it asked for a permit of the semaphore's limit (its notice wakes
-- it alone), else a notice wakes the waiters, even while other permits hold the key.
-- A release sent again changes nothing but its marker's lifetime (a write, for a WAIT after it:
-- see acquire.lua); the marker reports the first outcome. A fresh owner's release that leaves it
-- no hold writes a marker that lives ARGV[4] ms, or none: sent again later, it finds the owner
-- holding nothing and returns -1, and a fresh owner never holds the key again.
-- A take-back leaves the acquire's marker at 0, so that the acquire, if it arrives later, is
-- refused; it removes the hold the acquire added: one hold of the kind named, or a fresh
-- owner's every hold.
-- The fast path, before the library (lib.go: libHere): a fresh owner's release of an exclusive
-- hold that finds the lock QUIET ('locker:quiet', lib.lua) with the owner's one exclusive hold is
-- the first send of the release of its last hold, and nobody waits, when no key is at its marker
-- (else the path below reads what is there: this release applied before, and a copy of the
-- owner's fresh acquire, sent again, gave it a hold after its lease ended): it writes the marker
-- of ARGV[4] ms (if any), deletes the lock, and sends no notice nor reads the queue.
local flags = ARGV[3]
if flags:find('n', 1, true) and not flags:find('[us]') then
  local f = redis.pcall('hgetall', KEYS[1]) -- a key of another type: the path below says so
  if #f == 4 and ((f[1] == '' and f[2] == 'locker:quiet' and f[3] == ARGV[1] and f[4] == '1')
      or (f[3] == '' and f[4] == 'locker:quiet' and f[1] == ARGV[1] and f[2] == '1')) then
    local window, m = tonumber(ARGV[4] or '0'), flags:find('m', 1, true)
    if not m or (window > 0 and redis.call('set', KEYS[2], 0, 'px', window, 'nx'))
        or (window == 0 and redis.call('exists', KEYS[2]) == 0) then
      redis.call('del', KEYS[1])
      return 0
    end
  end
end
-- lib.lua: the definitions used below come here.
local lock, owner = KEYS[1], ARGV[1]
local marker = flags:find('m', 1, true) and KEYS[2]
local queue, fence
if flags:find('q', 1, true) then
  local n = marker and 3 or 2
  queue, fence = KEYS[n], KEYS[n + 1]
end
local undo = marker and flags:find('u', 1, true)
local fresh = flags:find('n', 1, true)
local shared = flags:find('s', 1, true)
local window = fresh and not undo and tonumber(ARGV[4]) or 0 -- a last release's marker, in ms
-- Every key is checked before anything is written (lib.lua: prepare; the counter only when the
-- release would grant a token): an error leaves everything as it was.
local state, value, done, q, latest = prepare(lock, owner, false, marker, queue, fence, true)
if type(state) == 'table' then
  return state
end
local rs -- in shared mode: the lock's readers (lib.lua: readReaders)
if state == 'shared' then
  rs = readReaders(lock)
  value = rs.holds[owner]
end
if marker then
  if undo then
    redis.call('set', marker, 0, 'px', 20000)
    if done == '0' or (not done and not fresh) then
      return -1
    end
  elseif done then
    redis.call('pexpire', marker, (done == '0' and window > 0) and window or 20000)
    return tonumber(done)
  end
end
if not value then
  return -1
end
local w, r = 0, 0 -- the owner's exclusive and shared holds
if state == 'exclusive' then
  w, r = holdsOf(value)
else
  r = value
end
if undo and fresh then
  w, r = 0, 0 -- a fresh owner's holds all come from the acquire taken back
elseif shared then
  if r == 0 then
    return -1
  end
  r = r - 1
else
  if w == 0 then
    return -1
  end
  w = w - 1
end
local life = (w + r > 0 or not fresh) and 20000 or window
if marker and not undo and life > 0 then
  redis.call('set', marker, w + r, 'px', life)
end
if state == 'exclusive' then
  if w > 0 then
    -- A QUIET lock stops being one: this release, sent again, must find its marker.
    redis.call('hset', lock, '', MARK, owner, exclusiveValue(w, r))
    return w + r
  end
  if r > 0 then
    -- The last exclusive hold: the owner's shared holds remain, its lease still the key's, and
    -- readers may join.
    redis.call('hset', lock, '', SHARED, owner, r)
    notify(ARGV[2], lock)
    return r
  end
elseif r > 0 then
  writeReaders(rs, owner, r) -- its lease unchanged
  return r
elseif rs.limit > 0 and rs.live > 1 then
  endGrant(q, owner)
  leavePermit(rs, owner, q, lock, ARGV[2], fence, latest) -- the head of the queue may take it
  return 0
elseif writeReaders(rs, owner, 0) then
  return 0 -- other readers hold the key, which lives as long as their leases
end
endGrant(q, owner)
free(lock, ARGV[2], q, fence, latest)
return 0
