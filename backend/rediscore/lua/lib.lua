-- The library of the scripts: what a lock and its wait queue are, in one place. Each script
-- carries, before its own text, the definitions below that it uses (lib.go: libFor), so every
-- definition starts at a line "local ..." with its comment right above it.
--
-- A lock is a hash whose marker field '' tells its mode, and whose other fields are its holders'
-- owner tokens (never empty, so no owner is the marker). Every holder has a lease of its own:
--   - exclusive: '' = 'locker', or 'locker:quiet' (QUIET) for a lock that nobody else asked for
--     since an acquire's fast path took it, and one field, the holder W, whose value is "<w>" (its
--     exclusive hold count, a plain integer so that the common path is HINCRBY) or "<w>:<r>" when
--     W also has r shared holds (a downgrade); the key's TTL is W's lease;
--   - shared: '' = 'locker:shared' and one field per reader R_i, whose value is "<r_i>", its
--     shared hold count, when its lease ends with the key's TTL, or "<r_i>@<end_i>" with the end
--     of its own lease (readReaders has the rules): each reader's calls set its own lease alone;
--   - a semaphore of n permits (locker.Semaphorer): '' = 'locker:permits:<n>' (n a positive
--     integer, stored by the request that takes the first permit) and one field per permit's
--     holder P_i, "<r_i>@<end_i>" as an overlapping reader's, even alone, then "#<token>" when
--     the permit drew a fencing token (the token it reports for life); at most n holders whose
--     lease runs. The scripts read it as shared mode whose readers are the permits'
--     holders (lockState, readReaders): a permit is a shared hold.
-- An owner can only be added to a free key, as a reader to a key in shared mode, or as a permit's
-- holder to a semaphore with a permit free. A request with another limit than the key's (0 for
-- a lock, exclusive or shared) changes nothing and fails with WRONGLIMIT (acquire.lua).
--
-- QUIET lets the common release skip what nobody needs (release.lua's fast path): only the
-- acquire's fast path writes it, for a fresh owner (locker.AcquireRequest.Fresh: it never held
-- the key, and never takes it again once its holds are gone) on a free key whose queue and marker
-- do not exist, and it stays while only its holder's calls come. Any refused request turns it to
-- 'locker' (a refused request may wait for a notice, or have put an entry in the queue), and so
-- does any release that leaves its owner holds (so that this release, sent again, is not taken
-- for its owner's last one). So a QUIET lock has no live queue entry and no subscriber to wake,
-- and a fresh owner's release that finds its one exclusive hold there, and no key at its marker,
-- is the first send of the release of its last hold (a copy of the owner's fresh acquire, sent
-- again after its lease ended, may give it a hold again: a release that applied before has a
-- marker then).
--
-- A lock's companion keys (see keys.go) are its request markers and its fencing counter
-- (FenceKey), which hold decimal integers, and its wait queue (QueueKey): a hash whose
-- field '' is the latest ticket handed out (a counter) and whose other fields are waiting owners,
-- each "<ticket>:<kind>:<deadline>": kind 'x' a fair exclusive request, 's' a fair shared one,
-- 'w' an exclusive request that is not fair (readers that come after it wait behind it), 'r' a
-- shared one that is not fair (writers that come after it wait behind it; a semaphore's permit
-- requests queue as shared ones, 's' or 'r'), and the deadline in milliseconds on the server's
-- clock (TIME). An exclusive entry that asked for a grant
-- (locker.AcquireRequest.Grant) ends in ":<lease>" (ms), "f" when it wants a fencing token, and
-- ":<id>", the request ID of the request that last queued it (maybe empty): the release that
-- frees the key while it is at the head gives the key to its owner with that lease, tells it so
-- in its notice with that ID (so that the owner can tell a grant made after its last request
-- from an older one), and turns the entry into a grant record, kind 'g', whose deadline is the
-- grant's lease; the owner's next acquire (or its Dequeue) ends it. A permit request's entry
-- ('s' or 'r') that asked for a grant has ":p<n>" before them, the semaphore's limit: the release
-- that ends a permit of a semaphore of n while it is at the head (or frees the key) gives its
-- owner a permit (grant). Entries are in ticket order; an
-- entry whose deadline has passed is dead: ignored, and deleted when the script writes the
-- queue. The queue's TTL is kept at its latest deadline, so that a queue of dead entries
-- vanishes by itself.
local MARK = 'locker'
local QUIET = 'locker:quiet'
local SHARED = 'locker:shared'
-- PERMITS starts a semaphore's marker, 'locker:permits:<n>'.
local PERMITS = 'locker:permits:'
-- limitOf returns n, the number of permits, of a semaphore's marker 'locker:permits:<n>', or nil
-- for any other value (a lock's marker, or none).
local function limitOf(mark)
  local n = type(mark) == 'string' and mark:match('^' .. PERMITS .. '([1-9]%d*)$')
  return n and tonumber(n) or nil
end
-- wrongType reports whether a reply of redis.pcall is the error of a key of another type (any
-- other error, NOPERM say, is returned as it is).
local function wrongType(reply)
  return type(reply) == 'table' and type(reply.err) == 'string' and reply.err:find('WRONGTYPE', 1, true) == 1
end
-- lockState returns the lock's mode at key — 'free' when the key does not exist, 'exclusive' or
-- 'shared' when it holds a lock in that mode (a semaphore is read as shared mode: readReaders
-- tells its limit) — and, with owner and in exclusive mode, owner's
-- field (false when it has none: in shared mode, ask readers), and whether the lock is QUIET; or
-- an error reply to return. The scripts ask it before they write anything (those that write
-- companions too, through prepare), so that a key of another type, or a hash of somebody else's,
-- is left exactly as it is. probe says that the key is most likely free (an acquire): EXISTS
-- answers that alone, in one call instead of two.
local function lockState(key, owner, probe)
  if probe and redis.call('exists', key) == 0 then
    return 'free', false
  end
  local mark = redis.pcall('hget', key, '')
  if wrongType(mark) then
    return redis.error_reply('NOTALOCK the key holds a value of another type')
  end
  if type(mark) == 'table' then
    return mark
  end
  local state
  if mark == MARK or mark == QUIET then
    state = 'exclusive'
  elseif mark == SHARED or limitOf(mark) then
    state = 'shared'
  elseif mark == false and not probe and redis.call('exists', key) == 0 then
    return 'free', false
  else
    return redis.error_reply('NOTALOCK the key holds a hash without the lock marker')
  end
  return state, state == 'exclusive' and owner and redis.call('hget', key, owner), mark == QUIET
end
-- newReaders returns what readReaders returns for a key in shared mode without a reader: the
-- semaphore of limit permits (0 for readers) that a first permit creates, for writeReaders.
local function newReaders(key, limit)
  return {key = key, holds = {}, ends = false, ended = false, live = 0, last = 0, withKey = false, now = false,
    limit = limit, tokens = false}
end
-- readReaders reads the lock in shared mode at key (lockState said so), for writeReaders: a table
-- {key, holds (owner -> its shared holds, for each reader whose lease runs), ends (owner -> the
-- end of its lease, for those that have one of their own; false when none has), ended (the
-- owners of the fields whose lease has ended; false when none has), live (how many readers'
-- leases run), last (the latest of their ends; 0 for none), withKey (whether a reader whose
-- lease runs ends with the key's TTL), now (the server's clock, read only when a field has an
-- end; false until then), limit (a semaphore's n; 0 for readers), tokens (owner -> the fencing
-- token of its permit, a decimal string, for the holders whose lease runs and that have one;
-- false when none has)}; ends and now in microseconds. A semaphore's holders are its readers.
--
-- A lone reader's field is "<r>", its shared holds: its lease is the key's TTL, as before readers
-- had leases of their own, and costs no more. Once readers overlap, each field is "<r>@<end>",
-- with the end of that reader's own lease on the server's clock (TIME), and the key's TTL runs
-- just past the latest end; a reader that read alone gets its end (the key's, rounded up to a
-- whole millisecond) when another joins. A reader whose end has passed holds nothing, and its
-- field goes at the next write. A reader's lease is set by its own calls alone. (Keys written
-- before readers had leases of their own may have several fields without an end: those end with
-- the key's TTL, and get an end at the next write that sets a lease.) A semaphore's holder always
-- has an end of its own, even alone (writeReaders), and its field may end in "#<token>".
local function readReaders(key)
  local fields = redis.call('hgetall', key)
  local s = newReaders(key, 0)
  for i = 1, #fields, 2 do
    local owner, value = fields[i], fields[i + 1]
    if owner == '' then
      s.limit = limitOf(value) or 0
    else
      local hash = value:find('#', 1, true)
      local token = hash and value:sub(hash + 1)
      if hash then -- not in one assignment with token's: miniredis's Lua would cut value first
        value = value:sub(1, hash - 1)
      end
      local at = value:find('@', 1, true)
      local r, e = tonumber(at and value:sub(1, at - 1) or value), at and tonumber(value:sub(at + 1))
      if e and not s.now then
        local t = redis.call('time')
        s.now = tonumber(t[1]) * 1000000 + tonumber(t[2])
      end
      if not r or r <= 0 or (at and not (e and e > s.now)) then
        s.ended = s.ended or {}
        s.ended[#s.ended + 1] = owner
      else
        s.holds[owner], s.live = r, s.live + 1
        if e then
          s.ends = s.ends or {}
          s.ends[owner], s.last = e, math.max(s.last, e)
        else
          s.withKey = true
        end
        if token then
          s.tokens = s.tokens or {}
          s.tokens[owner] = token
        end
      end
    end
  end
  return s
end
-- permitToken returns the fencing token of owner's permit in the semaphore read as s
-- (readReaders): a number, 0 when it drew none.
local function permitToken(s, owner)
  return tonumber(s.tokens and s.tokens[owner]) or 0
end
-- readerValue formats a reader's field (readReaders): "<r>", or "<r>@<end>" with the end of its
-- own lease, then "#<token>" with a permit's fencing token.
local function readerValue(r, e, token)
  local v = e and string.format('%d@%d', r, e) or string.format('%d', r)
  if token then
    v = v .. '#' .. token
  end
  return v
end
-- writeReaders gives owner r shared holds in the lock read as s (readReaders), with a lease of
-- ms milliseconds from now (nil: the lease it has), or, with r 0, takes owner's holds out. No
-- other reader's lease changes. token, a decimal string, is the fencing token of owner's new
-- permit (nil: the one it has, if any). It reports whether a reader's lease still runs; when
-- none does, it writes nothing, and the caller frees the key. s is spent. A lone reader's lease
-- is the key's TTL, but a semaphore's holder's: its end is its own from its first call on, so
-- that it never needs one taken from the key's TTL, which only whole milliseconds give (rounded
-- up, it would outlast the lease asked for).
local function writeReaders(s, owner, r, ms, token)
  local key, ends, gone, tokens = s.key, s.ends, s.ended, s.tokens
  local others, last, withKey = 0, 0, false -- the other readers whose lease runs
  for o in pairs(s.holds) do
    if o ~= owner then
      local e = ends and ends[o]
      others, withKey, last = others + 1, withKey or not e, math.max(last, e or 0)
    end
  end
  if r == 0 and others == 0 then
    return false
  end
  local was = ends and ends[owner]
  local mine, fit = was, false -- owner's end of its lease after the call; whether to fit
  if r == 0 then
    gone = gone or {}
    gone[#gone + 1] = owner
    fit = not withKey -- else the key's TTL is the lease of a reader that stays
  elseif ms and others == 0 and s.limit == 0 then
    mine = nil -- the only reader: its lease is the key's
    redis.call('pexpire', key, ms)
  elseif ms then
    -- Readers overlap: each has an end of its own, and the key's TTL runs just past the latest.
    if not s.now then
      local t = redis.call('time')
      s.now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    if withKey then
      local keyEnd = s.now + (math.max(redis.call('pttl', key), 0) + 1) * 1000
      for o, holds in pairs(s.holds) do
        if o ~= owner and not (ends and ends[o]) then
          redis.call('hset', key, o, readerValue(holds, keyEnd, tokens and tokens[o]))
        end
      end
      last = math.max(last, keyEnd)
    end
    mine = s.now + tonumber(ms) * 1000
    last, fit = math.max(last, mine), true
  end
  if gone then
    redis.call('hdel', key, unpack(gone))
  end
  if r > 0 and (r ~= s.holds[owner] or mine ~= was) then
    redis.call('hset', key, owner, readerValue(r, mine, token or (tokens and tokens[owner])))
  end
  if fit then
    redis.call('pexpire', key, string.format('%d', math.floor((last - s.now) / 1000) + 2))
  end
  return true
end
-- dropReader takes owner's holds out of s (readReaders), as if its lease had ended: its field
-- goes at the next writeReaders.
local function dropReader(s, owner)
  if s.holds[owner] then
    s.holds[owner], s.live = nil, s.live - 1
    s.ended = s.ended or {}
    s.ended[#s.ended + 1] = owner
  end
end
-- leaseLeft returns the remaining lease, in ms, of owner, a reader whose lease runs in the lock
-- read as s (readReaders): its own end's, rounded up, or the key's TTL (PTTL is 0 in the lease's
-- last millisecond: 1; 0 when the key has no TTL, someone made it persistent).
local function leaseLeft(s, owner)
  local e = s.ends and s.ends[owner]
  if e then
    return math.max(math.ceil((e - s.now) / 1000), 1)
  end
  if not s.keyLeft then
    local left = redis.call('pttl', s.key)
    s.keyLeft = left < 0 and 0 or math.max(left, 1)
  end
  return s.keyLeft
end
-- longestLeft returns the remaining lease, in ms, of the reader of s (readReaders) whose lease
-- ends last (leaseLeft).
local function longestLeft(s)
  local left = 0
  for o in pairs(s.holds) do
    left = math.max(left, leaseLeft(s, o))
  end
  return left
end
-- soonestLeft returns the remaining lease, in ms, of the reader of s (readReaders) whose lease
-- ends first (leaseLeft): when a semaphore's permit may be free.
local function soonestLeft(s)
  local left = nil
  for o in pairs(s.holds) do
    local l = leaseLeft(s, o)
    left = math.min(left or l, l)
  end
  return left or 0
end
-- holdsOf returns the exclusive and shared hold counts in the value of an exclusive holder's
-- field: "<w>" or "<w>:<r>".
local function holdsOf(value)
  local w = tonumber(value)
  if w then
    return w, 0
  end
  local a, b = value:match('^(%d+):(%d+)$')
  return tonumber(a) or 0, tonumber(b) or 0
end
-- exclusiveValue formats an exclusive holder's field: "<w>", or "<w>:<r>" when r > 0.
local function exclusiveValue(w, r)
  if r > 0 then
    return string.format('%d:%d', w, r)
  end
  return string.format('%d', w)
end
-- counter returns the value of one of the lock's companion keys (role names it: 'request
-- marker', 'fencing counter'): a decimal integer string, false when the key does not exist, and
-- otherwise an error reply to return. A user's key may be named like a companion; the scripts
-- ask counter for every companion before they write anything (through prepare), so that such a
-- key is left exactly as it is, and so is the lock.
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
-- drawToken draws a new fencing token after latest and writes it to the counter at fence: the
-- counter plus one, or the server's clock in microseconds if that is more, so that tokens keep
-- growing after the server lost the counter (a restart without persistence, a failover to a
-- replica that missed it), unless its clock went back.
local function drawToken(fence, latest)
  local now = redis.call('time')
  local token = math.max(latest + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
  redis.call('set', fence, string.format('%d', token))
  return token
end
-- notify sends a release notice of lock on its channel: by sharded pub/sub where the server has
-- it (Redis >= 7), plain pub/sub otherwise; subscribers make the same choice. A notice is an
-- optimisation: waiters also wake on timers.
local function notify(channel, lock)
  local sent = redis.pcall('spublish', channel, lock)
  if type(sent) == 'table' and sent.err then
    redis.pcall('publish', channel, lock)
  end
end
-- clock returns q.now, the server's clock in ms, reading it first once per script.
local function clock(q)
  if not q.now then
    local t = redis.call('time')
    q.now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return q.now
end
-- loadQueue reads the wait queue at key: a table {key, exists, entries (the live waiting ones, in
-- ticket order: {owner, ticket, kind, deadline, grant (ms or nil), fence}), granted (the live
-- grant records), dead (the owners of dead entries), now (the server's clock in ms, once read: see
-- clock)}, or an error reply (a table with err) when the key holds anything but a queue. Like
-- counter, it is asked before anything is written. A queue that does not exist, the common case,
-- costs one call.
local function loadQueue(key)
  local fields = redis.pcall('hgetall', key)
  if wrongType(fields) then
    return redis.error_reply('NOTALOCK the wait queue of the key is a value of another type')
  end
  if fields.err then
    return fields
  end
  local q = {key = key, exists = false, entries = {}, granted = {}, dead = {}}
  if #fields == 0 then
    return q
  end
  local top
  for i = 1, #fields, 2 do
    if fields[i] == '' then
      top = fields[i + 1]
    end
  end
  if not top then
    return redis.error_reply('NOTALOCK the wait queue of the key is a hash without its counter')
  end
  if not top:find('^%d+$') then
    return redis.error_reply('NOTALOCK the wait queue of the key has a counter that is not a number')
  end
  q.exists = true
  local now = clock(q)
  for i = 1, #fields, 2 do
    if fields[i] ~= '' then
      local ticket, kind, deadline, rest = fields[i + 1]:match('^(%d+):([xswrg]):(%d+)(.*)$')
      local limit = rest and rest:match('^:p([1-9]%d*):')
      if limit then
        rest = rest:sub(#limit + 3) -- after ':p<n>'
      end
      local grant, fence, id = '', '', ''
      if rest then
        grant, fence, id = rest:match('^:?(%d*)(f?):?(.*)$')
      end
      if not ticket or (grant == '' and (fence ~= '' or id ~= '')) or (limit and not (grant ~= '' and (kind == 's' or kind == 'r'))) then
        return redis.error_reply('NOTALOCK the wait queue of the key has an entry that is not one')
      end
      local e = {owner = fields[i], ticket = tonumber(ticket), kind = kind, deadline = tonumber(deadline),
        grant = tonumber(grant), fence = fence == 'f', id = id, limit = tonumber(limit)}
      if e.deadline <= now then
        q.dead[#q.dead + 1] = e.owner
      elseif kind == 'g' then
        q.granted[#q.granted + 1] = e
      else
        q.entries[#q.entries + 1] = e
      end
    end
  end
  table.sort(q.entries, function(a, b) return a.ticket < b.ticket end)
  return q
end
-- entryValue formats a queue entry.
local function entryValue(e)
  local v = string.format('%d:%s:%d', e.ticket, e.kind, e.deadline)
  if e.grant and e.kind ~= 'g' then
    if e.limit then
      v = v .. string.format(':p%d', e.limit)
    end
    v = v .. string.format(':%d', e.grant)
    if e.fence then
      v = v .. 'f'
    end
    v = v .. ':' .. e.id
  end
  return v
end
-- reader reports whether a queue entry is a reader's ('s' or 'r').
local function reader(e)
  return e.kind == 's' or e.kind == 'r'
end
-- admits reports whether the queue q lets owner take a new hold (shared or exclusive; fair or
-- plain) on a key that itself allows it. Only the live entries ahead of owner's own count (with
-- no entry, every live entry is ahead): a fair request passes none but, for a shared one,
-- readers' entries; a plain request passes every entry but those of the other kind (a reader
-- no writer's, a writer no reader's), so that readers and writers take turns and neither
-- starves. The head of the queue waits for nobody in it: no request waits for ever.
local function admits(q, owner, shared, fair)
  for _, e in ipairs(q.entries) do
    if e.owner == owner then
      return true
    end
    if fair then
      if not (shared and reader(e)) then
        return false
      end
    elseif shared ~= reader(e) then
      return false
    end
  end
  return true
end
-- tidy writes what the script changed in q's entries: it deletes the dead entries and sets the
-- queue's TTL to its latest deadline, or deletes the queue when no entry is live.
local function tidy(q)
  if #q.entries == 0 and #q.granted == 0 then
    if q.exists then
      redis.call('del', q.key)
      q.exists = false
    end
    return
  end
  local last = 0
  for _, list in ipairs({q.entries, q.granted}) do
    for _, e in ipairs(list) do
      last = math.max(last, e.deadline)
    end
  end
  for _, owner in ipairs(q.dead) do
    redis.call('hdel', q.key, owner)
  end
  q.dead = {}
  redis.call('pexpire', q.key, string.format('%d', last - clock(q)))
end
-- forget takes owner's entry out of list (q.entries, q.granted or q.dead, whose items are owners)
-- and reports its index, or nil when owner has none there. It writes nothing.
local function forget(list, owner)
  for i, e in ipairs(list) do
    if e == owner or e.owner == owner then
      table.remove(list, i)
      return i
    end
  end
  return nil
end
-- enqueue puts owner at the tail of q with kind for wait ms (asking for a grant with that lease
-- in ms when grant is a number, with a fencing token when fence, for the request with ID id: of
-- a permit of a semaphore of limit when limit is a number, else of the lock), or, when it has a
-- live entry, keeps its place (and kind) and sets its deadline to wait ms from now and its grant
-- as asked. A grant record of owner's (a grant that lapsed) is replaced.
local function enqueue(q, owner, kind, wait, grant, fence, id, limit)
  local deadline = clock(q) + wait
  local entry
  for _, e in ipairs(q.entries) do
    if e.owner == owner then
      entry = e
    end
  end
  if entry then
    entry.deadline = deadline
  else
    forget(q.dead, owner) -- replaced, not deleted by tidy
    forget(q.granted, owner)
    entry = {owner = owner, ticket = redis.call('hincrby', q.key, '', 1), kind = kind, deadline = deadline}
    q.entries[#q.entries + 1] = entry
    q.exists = true
  end
  entry.grant, entry.fence, entry.id, entry.limit = grant, fence, id, grant and limit
  redis.call('hset', q.key, owner, entryValue(entry))
  tidy(q)
end
-- dequeue takes owner's entry, live or dead, waiting or a grant record, out of q and writes the
-- queue. It returns whether owner had a live waiting entry, whether live entries were behind it,
-- and whether it had a live grant record.
local function dequeue(q, owner)
  local i = forget(q.entries, owner)
  local granted = nil
  if not i then
    granted = forget(q.granted, owner)
  end
  if i or granted or forget(q.dead, owner) then
    redis.call('hdel', q.key, owner)
    tidy(q)
  end
  return i ~= nil, i ~= nil and i <= #q.entries, granted ~= nil
end
-- grant gives the lock to the head of q when the head asked for a grant that it can give: the
-- lock free (s nil), one exclusive hold of its owner with the lease it asked for, or, for an
-- entry that asked for a permit, the first permit of a new semaphore of the limit it asked for;
-- the semaphore read as s (readReaders, a permit free), a permit when the head asked for one of
-- s's limit (s is spent then). A new fencing token is drawn after latest into the counter at fence
-- when the head asked for one (a permit keeps it with its holder). A grant record takes the place
-- of the head's entry, and the notice on channel names its owner and the request ID of its
-- entry: "<lock>\n<length of the ID>:<ID><owner>". It reports whether it granted.
local function grant(q, lock, channel, fence, latest, s)
  local head = q.entries[1]
  if not head or not head.grant or (s and head.limit ~= s.limit) then
    return false
  end
  local token = head.fence and fence and drawToken(fence, latest)
  if head.limit then
    if not s then
      redis.call('hset', lock, '', PERMITS .. head.limit)
      s = newReaders(lock, head.limit)
    end
    writeReaders(s, head.owner, 1, head.grant, token and string.format('%d', token))
  else
    redis.call('hset', lock, '', MARK, head.owner, 1)
    redis.call('pexpire', lock, head.grant)
  end
  table.remove(q.entries, 1)
  head.kind, head.deadline = 'g', clock(q) + head.grant
  q.granted[#q.granted + 1] = head
  redis.call('hset', q.key, head.owner, entryValue(head))
  tidy(q)
  notify(channel, string.format('%s\n%d:%s%s', lock, #head.id, head.id, head.owner))
  return true
end
-- prepare checks every key a script may write before it writes anything, so that a key that is not
-- what the scripts write there is left exactly as it is, and so is the lock: the lock at lock
-- (lockState, with owner and probe as there), then the companions the script passes, each nil
-- when it passes none: the request marker at marker (counter), the wait queue at queue
-- (loadQueue) and the fencing counter at fence (counter). With onGrant, the counter is read only
-- when a grant to the head of the queue would draw a token from it (a release that frees the key
-- or a permit: see grant). It returns the lock's state and owner's field (lockState), the marker's value (nil
-- when not passed, false when the marker does not exist), the queue (nil when not passed), the
-- latest fencing token (0 without a counter, or when it is not read) and whether the lock is
-- QUIET; or, for the first key that is not what the scripts write, an error reply as its first
-- value.
local function prepare(lock, owner, probe, marker, queue, fence, onGrant)
  local state, value, q, quiet
  local present = probe and queue and redis.call('exists', lock, queue)
  if present == 0 then
    -- Neither the lock nor its queue exists (an acquire on a free key): one call says so.
    state, value, q = 'free', false, {key = queue, exists = false, entries = {}, granted = {}, dead = {}}
  else
    -- With queue, the two-key probe answered 1 or 2: the lock may exist, so ask it.
    state, value, quiet = lockState(lock, owner, probe and not present)
    if type(state) == 'table' then
      return state
    end
  end
  local done = marker and counter(marker, 'request marker')
  if type(done) == 'table' then
    return done
  end
  q = q or (queue and loadQueue(queue))
  if q and q.err then
    return q
  end
  local latest = false
  local head = onGrant and q and q.entries[1]
  if fence and (not onGrant or (head and head.grant and head.fence)) then
    latest = counter(fence, 'fencing counter')
    if type(latest) == 'table' then
      return latest
    end
  end
  return state, value, done, q, tonumber(latest) or 0, quiet
end
-- free deletes the lock, whose last hold was just removed, and sends a release notice; with q,
-- it first grants the key to the head of the queue if it asked for that (grant: fence and latest
-- as there), and the notice then names the owner and the request ID of its entry.
local function free(lock, channel, q, fence, latest)
  redis.call('del', lock)
  if not (q and grant(q, lock, channel, fence, latest)) then
    notify(channel, lock)
  end
end
-- leavePermit takes owner's permit out of the semaphore at lock read as s (readReaders), which
-- other permits hold: the head of q takes it when the head asked for a permit of s's limit
-- (grant: fence and latest as there), else a notice on channel wakes the waiters. s is spent.
local function leavePermit(s, owner, q, lock, channel, fence, latest)
  local head = q and q.entries[1]
  if head and head.grant and head.limit == s.limit then
    dropReader(s, owner)
    grant(q, lock, channel, fence, latest, s)
  else
    writeReaders(s, owner, 0)
    notify(channel, lock)
  end
end
-- endGrant deletes owner's grant record from q, if it has one: the grant was taken, and its last
-- hold is released.
local function endGrant(q, owner)
  if q and forget(q.granted, owner) then
    redis.call('hdel', q.key, owner)
    tidy(q)
  end
end
