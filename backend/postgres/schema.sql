-- The schema of backend/postgres (github.com/hashlock/locker): tables and functions, one function
-- per operation, so that each is one round trip and atomic. Backend.Migrate runs this file with
-- the names of WithTable; to manage the schema yourself, run the output of SchemaSQL (the same
-- file with your names), or this file as it is for the defaults: schema public, name locker.
-- Re-running it is harmless. Keys, owners and request IDs are bytea: any bytes; rows name a key by
-- its SHA-256 digest (column key), so that a key of any length fits the indexes.
-- Every writer serialises on its key with a transaction-scoped advisory lock (released at commit,
-- so no session state is kept between statements) and reads the database's clock after it.

create table if not exists public.locker_holds (
  key     bytea not null,       -- sha256 of the lock's key, as in every table
  owner   bytea not null,
  excl    int not null,         -- exclusive holds (> 0 for at most one owner of a key)
  shared  int not null,         -- shared holds
  expires timestamptz not null, -- the end of this owner's lease
  lim     int not null default 0,    -- a semaphore's permits, the same on every row of its key; 0: a lock
  token   bigint not null default 0, -- a permit's own fencing token; 0: a lock's, or taken without Fence
  primary key (key, owner)
);
-- A schema of the previous version gets the semaphores' columns in place: its holds stay, as locks.
alter table public.locker_holds add column if not exists lim int not null default 0;
alter table public.locker_holds add column if not exists token bigint not null default 0;
create index if not exists locker_holds_expires on public.locker_holds (expires);

create table if not exists public.locker_queue (
  key      bytea not null,
  owner    bytea not null,
  seq      bigserial,           -- arrival order
  kind     "char" not null,     -- x fair exclusive, s fair shared, w plain exclusive, r plain shared, g a grant record
  deadline timestamptz not null,
  grant_ms bigint not null,     -- the lease of the grant the entry asks for; 0: none
  fence    boolean not null,    -- the grant draws a fencing token
  rid      bytea,               -- the ID of the request that last queued it
  lim      int not null default 0, -- the grant asked for is of a permit of a semaphore of lim; 0: of the lock
  primary key (key, owner)
);
-- A schema of an earlier version gets the permits' column in place: its entries stay, asking for locks.
alter table public.locker_queue add column if not exists lim int not null default 0;
create index if not exists locker_queue_order on public.locker_queue (key, seq);
create index if not exists locker_queue_deadline on public.locker_queue (deadline);

create table if not exists public.locker_fences (
  key bytea primary key,
  n   bigint not null           -- the latest fencing token; kept for ever
);

create table if not exists public.locker_requests (
  key     bytea not null,
  id      bytea not null,
  holds   int not null,         -- the holds the request left (0: none, or taken back)
  expires timestamptz not null,
  primary key (key, id)
);
create index if not exists locker_requests_expires on public.locker_requests (expires);

-- locker_read_committed refuses a transaction above READ COMMITTED: its snapshot would be taken
-- before the advisory lock is, and a call would not see what the call it waited for wrote.
create or replace function public.locker_read_committed() returns void
language plpgsql as $$
begin
  if current_setting('transaction_isolation') <> 'read committed' then
    raise exception 'the lock''s functions need READ COMMITTED, not %', current_setting('transaction_isolation')
      using errcode = '0A000', hint = 'set default_transaction_isolation to read committed for the pool''s connections';
  end if;
end $$;

-- locker_enter serialises the caller's transaction on key k, forgets k's ended holds and
-- returns the database's clock, read once the key is the caller's.
create or replace function public.locker_enter(k bytea) returns timestamptz
language plpgsql as $$
declare
  now_ timestamptz;
begin
  perform public.locker_read_committed();
  perform pg_advisory_xact_lock(hashtext('public.locker_'), ('x' || left(encode(k, 'hex'), 8))::bit(32)::int);
  now_ := clock_timestamp();
  delete from public.locker_holds h where h.key = k and h.expires <= now_;
  return now_;
end $$;

-- locker_sweeps counts new locks: one in 8 sweeps (locker_sweep).
create sequence if not exists public.locker_sweeps;

-- locker_sweep deletes up to 16 ended rows of each table, of any key whose advisory lock is free
-- (never waiting for one), so that keys nobody touches again do not pile up: no sweeper process
-- is needed. One new lock in 8 runs it, which deletes more than new locks can leave.
create or replace function public.locker_sweep(now_ timestamptz) returns void
language plpgsql as $$
begin
  with holds as (
    delete from public.locker_holds h
     using (select s.key, s.owner from public.locker_holds s where s.expires < now_ order by s.expires limit 16) d
     where h.key = d.key and h.owner = d.owner and h.expires < now_
       and pg_try_advisory_xact_lock(hashtext('public.locker_'), ('x' || left(encode(h.key, 'hex'), 8))::bit(32)::int)
  ), queue as (
    delete from public.locker_queue q
     using (select s.key, s.owner from public.locker_queue s where s.deadline < now_ order by s.deadline limit 16) d
     where q.key = d.key and q.owner = d.owner and q.deadline < now_
       and pg_try_advisory_xact_lock(hashtext('public.locker_'), ('x' || left(encode(q.key, 'hex'), 8))::bit(32)::int)
  )
  delete from public.locker_requests r
   using (select s.key, s.id from public.locker_requests s where s.expires < now_ order by s.expires limit 16) d
   where r.key = d.key and r.id = d.id and r.expires < now_;
end $$;

-- locker_notify sends the release notice of k: its digest in hex, and for a grant sha256(grantee)
-- and the ID that queued it, in hex.
create or replace function public.locker_notify(k bytea, grantee bytea, rid bytea) returns void
language sql as $$
  select pg_notify('public.locker_notices', encode(k, 'hex') || ' ' || coalesce(encode(sha256(grantee), 'hex'), '') || ' ' || coalesce(encode(rid, 'hex'), ''));
$$;

-- locker_token is k's fencing token when asked for (0 otherwise, or when k has none).
create or replace function public.locker_token(k bytea, fence boolean) returns bigint
language sql stable as $$
  select case when fence then coalesce((select f.n from public.locker_fences f where f.key = k), 0) else 0 end;
$$;

-- locker_advance draws k's next fencing token: one more than the last, and at least the
-- database's clock in microseconds, so that tokens keep growing if the table is lost.
create or replace function public.locker_advance(k bytea, now_ timestamptz) returns void
language sql as $$
  insert into public.locker_fences as f (key, n) values (k, (extract(epoch from now_) * 1000000)::bigint)
  on conflict (key) do update set n = greatest(f.n + 1, excluded.n);
$$;

-- locker_remember records request rid's outcome on k (the holds it left) for life_ms.
create or replace function public.locker_remember(k bytea, rid bytea, left_ int, now_ timestamptz, life_ms bigint) returns void
language sql as $$
  insert into public.locker_requests as r (key, id, holds, expires)
  select k, rid, left_, now_ + life_ms * interval '1 millisecond' where rid is not null
  on conflict (key, id) do update set holds = excluded.holds, expires = excluded.expires;
$$;

-- locker_remove takes owner o's entry, or its grant record, out of k's queue: 1 when live
-- entries were behind it, 2 when it was a grant record, 0 otherwise.
create or replace function public.locker_remove(k bytea, o bytea, now_ timestamptz) returns int
language plpgsql as $$
declare
  kind_ "char";
  seq_ bigint;
begin
  delete from public.locker_queue q where q.key = k and q.owner = o and q.deadline > now_ returning q.kind, q.seq into kind_, seq_;
  if not found then
    return 0;
  elsif kind_ = 'g' then
    return 2;
  elsif exists (select 1 from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ and q.seq > seq_) then
    return 1;
  end if;
  return 0;
end $$;

-- locker_admits reports whether k's queue lets owner o take a new hold (see locker.KindLocker):
-- exclusive on a free key, shared on a free or shared one, and no live entry ahead of o's (all
-- are ahead when o has none) that the request may not pass.
create or replace function public.locker_admits(k bytea, o bytea, sh boolean, fair boolean, wait_ms bigint, held boolean, excl_mode boolean, now_ timestamptz) returns boolean
language plpgsql as $$
declare
  mine bigint;
begin
  if held and (not sh or excl_mode) then
    return false;
  elsif not sh and not fair and wait_ms = 0 then
    return true;
  end if;
  select q.seq into mine from public.locker_queue q where q.key = k and q.owner = o and q.kind <> 'g' and q.deadline > now_;
  return not exists (
    select 1 from public.locker_queue q
     where q.key = k and q.kind <> 'g' and q.deadline > now_ and (mine is null or q.seq < mine)
       and case when fair then not (sh and q.kind in ('s', 'r')) else sh <> (q.kind in ('s', 'r')) end);
end $$;

-- The previous version's enqueue took no limit.
drop function if exists public.locker_enqueue(bytea, bytea, int, bigint, bigint, bytea, timestamptz);

-- locker_enqueue puts o at the tail of k's queue for wait_ms, or keeps its place and refreshes it.
-- A fresh request's entry asks for a grant of grant_ms_ when it is exclusive or a permit's (of a
-- semaphore of lim_).
create or replace function public.locker_enqueue(k bytea, o bytea, flags int, wait_ms bigint, grant_ms_ bigint, lim_ int, rid_ bytea, now_ timestamptz) returns void
language plpgsql as $$
declare
  g bigint := case when grant_ms_ > 0 and flags & 1 <> 0 and (flags & 8 = 0 or lim_ > 0) then grant_ms_ else 0 end;
  kind_ "char" := case flags & 24 when 0 then 'w' when 8 then 'r' when 16 then 'x' else 's' end;
begin
  update public.locker_queue q set deadline = now_ + wait_ms * interval '1 millisecond', grant_ms = g, fence = flags & 4 <> 0, rid = rid_, lim = lim_
   where q.key = k and q.owner = o and q.kind <> 'g' and q.deadline > now_;
  if found then
    return;
  end if;
  delete from public.locker_queue q where q.key = k and q.owner = o; -- a lapsed grant, or a dead entry
  insert into public.locker_queue (key, owner, kind, deadline, grant_ms, fence, rid, lim)
  values (k, o, kind_, now_ + wait_ms * interval '1 millisecond', g, flags & 4 <> 0, rid_, lim_);
end $$;

-- locker_record_grant makes head's entry of k's queue the record of the grant just given to its
-- owner, which ends with the grant's lease, and sends the notice of that grant.
create or replace function public.locker_record_grant(k bytea, head public.locker_queue, now_ timestamptz) returns void
language plpgsql as $$
begin
  update public.locker_queue q set kind = 'g', deadline = now_ + head.grant_ms * interval '1 millisecond', grant_ms = 0, fence = false, rid = null, lim = 0
   where q.key = k and q.owner = head.owner;
  perform public.locker_notify(k, head.owner, head.rid);
end $$;

-- locker_grant_permit follows the end of a permit of k's semaphore of lim_, while others hold
-- it, or the start of one on k just freed: when the head of k's queue asked for a permit of
-- lim_ and one is free, its owner gets one (one hold, with the grant's lease, and when it asked
-- for a fencing token one of its own, drawn from k's counter) and the notice of that grant; else
-- a plain notice is sent.
create or replace function public.locker_grant_permit(k bytea, lim_ int, now_ timestamptz) returns void
language plpgsql as $$
declare
  head public.locker_queue;
  tok bigint := 0;
begin
  select * into head from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ order by q.seq limit 1;
  if not found or head.grant_ms = 0 or head.lim <> lim_ or (select count(*) from public.locker_holds h where h.key = k) >= lim_ then
    perform public.locker_notify(k, null, null);
    return;
  end if;
  if head.fence then
    perform public.locker_advance(k, now_);
    tok := public.locker_token(k, true);
  end if;
  insert into public.locker_holds (key, owner, excl, shared, expires, lim, token)
  values (k, head.owner, 0, 1, now_ + head.grant_ms * interval '1 millisecond', lim_, tok);
  perform public.locker_record_grant(k, head, now_);
end $$;

-- locker_grant_head gives k, just freed, to the head of its queue when the head asked for a
-- grant: the lock, or a permit of a semaphore of the head's limit (locker_grant_permit); and
-- sends the notice (of that grant, or of a plain release).
create or replace function public.locker_grant_head(k bytea, now_ timestamptz) returns void
language plpgsql as $$
declare
  head public.locker_queue;
begin
  select * into head from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ order by q.seq limit 1;
  if not found or head.grant_ms = 0 then
    perform public.locker_notify(k, null, null);
    return;
  elsif head.lim > 0 then
    perform public.locker_grant_permit(k, head.lim, now_);
    return;
  end if;
  insert into public.locker_holds (key, owner, excl, shared, expires) values (k, head.owner, 1, 0, now_ + head.grant_ms * interval '1 millisecond');
  if head.fence then
    perform public.locker_advance(k, now_);
  end if;
  perform public.locker_record_grant(k, head, now_);
end $$;

-- locker_ahead reports whether a live entry of k's queue is ahead of owner o's (every live entry
-- is when o has none): a fair permit request passes none.
create or replace function public.locker_ahead(k bytea, o bytea, now_ timestamptz) returns boolean
language sql stable as $$
  select exists (
    select 1 from public.locker_queue q
     where q.key = k and q.kind <> 'g' and q.deadline > now_
       and q.seq < coalesce((select m.seq from public.locker_queue m where m.key = k and m.owner = o and m.kind <> 'g' and m.deadline > now_),
                            9223372036854775807));
$$;

-- The previous version's acquire took no limit: a call of it would pass over semaphores.
drop function if exists public.locker_acquire(bytea, bytea, bigint, bytea, int, bigint, bigint);

-- locker_acquire is locker.Locker.Acquire, and with lim_ > 0 the request of a permit of the
-- semaphore of lim_ (locker.Semaphorer; the caller sets Shared), whose entry may ask for a
-- grant of a permit. flags: 1 Fresh,
-- 2 Reentry, 4 Fence, 8 Shared, 16 Fair. r_holds is -1 for a re-entry of a hold o does not have
-- (ErrNotHeld), -2 for an upgrade, -3 when k is held with another limit (ErrLimitMismatch; r_taken
-- is then k's limit, 0: a lock). r_taken is, for a refused permit request, the permits taken.
create or replace function public.locker_acquire(key_ bytea, o bytea, ttl_ms bigint, rid bytea, flags int, wait_ms bigint, grant_ms_ bigint, lim_ int,
  out r_holds int, out r_ttl_us bigint, out r_token bigint, out r_taken int)
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
  fresh boolean := flags & 1 <> 0;
  fence boolean := flags & 4 <> 0;
  sh boolean := flags & 8 <> 0;
  lease timestamptz := now_ + ttl_ms * interval '1 millisecond';
  mine public.locker_holds;
  total int := 0;
  done int;
  excl_mode boolean;
  held int;          -- the owners that hold k
  have int;          -- the limit k is held with
  admitted boolean;
  tok bigint := 0;   -- the permit's own token
  removed int;
begin
  r_holds := 0; r_ttl_us := 0; r_token := 0; r_taken := 0;
  if rid is not null then
    select r.holds into done from public.locker_requests r where r.key = k and r.id = rid and r.expires > now_;
    if found then -- sent again: the first outcome while its hold is there
      select * into mine from public.locker_holds h where h.key = k and h.owner = o;
      if done > 0 and found then
        r_holds := done;
        r_token := case when mine.lim = 0 then public.locker_token(k, fence) when fence then mine.token else 0 end;
      end if;
      return;
    end if;
  end if;
  select * into mine from public.locker_holds h where h.key = k and h.owner = o;
  if found then
    total := mine.excl + mine.shared;
    if mine.lim <> lim_ then
      r_holds := -3; r_taken := mine.lim;
      return;
    end if;
  end if;
  if fresh and total > 0 then -- this very request sent again, or a grant taken
    update public.locker_holds h set expires = lease where h.key = k and h.owner = o;
    if sh or flags & 16 <> 0 or wait_ms > 0 then
      perform public.locker_remove(k, o, now_);
    end if;
    r_holds := total;
    r_token := case when lim_ = 0 then public.locker_token(k, fence) when fence then mine.token else 0 end;
    return;
  elsif flags & 2 <> 0 and total = 0 then
    select h.lim into have from public.locker_holds h where h.key = k limit 1;
    if found and have <> lim_ then
      r_holds := -3; r_taken := have;
    else
      r_holds := -1;
    end if;
    return;
  end if;
  select coalesce(bool_or(h.excl > 0), false), count(*), coalesce(max(h.lim), 0) into excl_mode, held, have from public.locker_holds h where h.key = k;
  if held > 0 and have <> lim_ then
    r_holds := -3; r_taken := have;
    return;
  elsif total > 0 and not sh and not excl_mode then
    r_holds := -2;
    return;
  elsif total > 0 then -- re-entry, or a downgrade, whatever the queue
    update public.locker_holds h set excl = h.excl + (case when sh then 0 else 1 end), shared = h.shared + (case when sh then 1 else 0 end), expires = lease
     where h.key = k and h.owner = o;
  else
    if lim_ > 0 then -- a permit free, and a fair request passes no entry
      admitted := held < lim_ and (flags & 16 = 0 or not public.locker_ahead(k, o, now_));
    else
      admitted := public.locker_admits(k, o, sh, flags & 16 <> 0, wait_ms, held > 0, excl_mode, now_);
    end if;
    if not admitted then
      if wait_ms > 0 then
        perform public.locker_enqueue(k, o, flags, wait_ms, grant_ms_, lim_, rid, now_);
      end if;
      if held > 0 and lim_ > 0 then -- when the soonest permit may be free
        select (extract(epoch from min(h.expires) - now_) * 1000000)::bigint into r_ttl_us from public.locker_holds h where h.key = k;
        r_taken := held;
      elsif held > 0 then
        select (extract(epoch from max(h.expires) - now_) * 1000000)::bigint into r_ttl_us from public.locker_holds h where h.key = k;
      end if;
      return;
    end if;
    if lim_ > 0 and fence then -- every new permit draws a token of its own
      perform public.locker_advance(k, now_);
      tok := public.locker_token(k, true);
    end if;
    insert into public.locker_holds (key, owner, excl, shared, expires, lim, token)
    values (k, o, case when sh then 0 else 1 end, case when sh then 1 else 0 end, lease, lim_, tok);
    if held = 0 then
      if nextval('public.locker_sweeps') % 8 = 0 then
        perform public.locker_sweep(now_);
      end if;
      if fence and not sh then
        perform public.locker_advance(k, now_);
      end if;
    end if;
    if sh or flags & 16 <> 0 or wait_ms > 0 then -- a plain exclusive request without Wait need not read the queue
      removed := public.locker_remove(k, o, now_); -- not inside the condition: it could go unevaluated
    end if;
    if removed = 1 and sh
       and (select q.kind in ('s', 'r') from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ order by q.seq limit 1) then
      perform public.locker_notify(k, null, null); -- readers at the head may join
    end if;
  end if;
  r_holds := total + 1;
  if not fresh then
    perform public.locker_remember(k, rid, r_holds, now_, 20000);
  end if;
  if fence and lim_ > 0 then
    r_token := case when total > 0 then mine.token else tok end; -- a re-entry's is its permit's
  elsif fence then
    r_token := public.locker_token(k, fence);
  end if;
end $$;

-- locker_release is locker.Locker.Release: the holds o has left, -1 when it holds none to
-- release (ErrNotHeld). flags: 1 Fresh, 2 Undo, 8 Shared (a permit's too). The release of a
-- permit's last hold, while other permits remain, gives it to the head of the queue when the
-- head asked for a permit (locker_grant_permit), else sends a notice, as the release of the
-- key's last hold does.
create or replace function public.locker_release(key_ bytea, o bytea, rid bytea, flags int, reply_ms bigint, out r_left int)
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
  fresh boolean := flags & 1 <> 0;
  undo boolean := flags & 2 <> 0 and rid is not null;
  sh boolean := flags & 8 <> 0;
  mine public.locker_holds;
  done int;
begin
  r_left := 0;
  if rid is not null then
    select r.holds into done from public.locker_requests r where r.key = k and r.id = rid and r.expires > now_;
    if undo and ((found and done = 0) or (not found and not fresh)) then
      perform public.locker_remember(k, rid, 0, now_, 20000); -- the acquire, if it comes, is refused
      r_left := -1;
      return;
    elsif undo then
      perform public.locker_remember(k, rid, 0, now_, 20000);
    elsif found then
      r_left := done; -- sent again: the first outcome
      return;
    end if;
  end if;
  select * into mine from public.locker_holds h where h.key = k and h.owner = o;
  if not found or (sh and mine.shared = 0) or (not sh and not (undo and fresh) and mine.excl = 0) then
    r_left := -1;
    return;
  end if;
  if undo and fresh then -- a fresh owner's holds all come from the acquire taken back
    mine.excl := 0; mine.shared := 0;
  elsif sh then
    mine.shared := mine.shared - 1;
  else
    mine.excl := mine.excl - 1;
    if mine.excl = 0 and mine.shared > 0 then
      perform public.locker_notify(k, null, null); -- shared mode: readers may join
    end if;
  end if;
  r_left := mine.excl + mine.shared;
  if r_left = 0 then
    delete from public.locker_holds h where h.key = k and h.owner = o;
  else
    update public.locker_holds h set excl = mine.excl, shared = mine.shared where h.key = k and h.owner = o;
  end if;
  if undo then
    null;
  elsif r_left > 0 or not fresh then
    perform public.locker_remember(k, rid, r_left, now_, 20000);
  elsif reply_ms > 0 then
    perform public.locker_remember(k, rid, 0, now_, reply_ms);
  end if;
  if not exists (select 1 from public.locker_holds h where h.key = k) then
    delete from public.locker_queue q where q.key = k and q.owner = o and q.kind = 'g'; -- the grant was taken, and is over
    perform public.locker_grant_head(k, now_);
  elsif r_left = 0 and mine.lim > 0 then
    perform public.locker_grant_permit(k, mine.lim, now_); -- a permit is free, others still held
  end if;
end $$;

-- locker_renew is locker.Locker.Renew for a batch: the (1-based) positions renewed.
create or replace function public.locker_renew(ks bytea[], os bytea[], ttls bigint[]) returns setof int
language plpgsql as $$
declare
  now_ timestamptz;
begin
  perform public.locker_read_committed();
  perform pg_advisory_xact_lock(hashtext('public.locker_'), l.h)
     from (select distinct ('x' || left(encode(sha256(u.k), 'hex'), 8))::bit(32)::int as h from unnest(ks) as u(k) order by 1) l;
  now_ := clock_timestamp();
  return query
    with b as (select sha256(u.k) as k, u.o, u.ttl, u.i from unnest(ks, os, ttls) with ordinality as u(k, o, ttl, i)),
    r as (update public.locker_holds h set expires = now_ + b.ttl * interval '1 millisecond'
            from b where h.key = b.k and h.owner = b.o and h.expires > now_ returning h.key, h.owner)
    select b.i::int from b join r on r.key = b.k and r.owner = b.o;
end $$;

-- The previous version's inspect reported no holders: its result type changes, which create or
-- replace cannot do.
do $$
begin
  if exists (select 1 from pg_proc p where p.oid = to_regprocedure('public.locker_inspect(bytea)') and not 'r_owners' = any(p.proargnames)) then
    drop function public.locker_inspect(bytea);
  end if;
end $$;

-- locker_inspect is locker.Locker.Inspect: a read of one snapshot, taking no lock. It reports
-- k's live holders sorted by owner (bytewise), each with its holds and remaining lease, whether
-- one holds it exclusively, its limit (0: a lock) and the live entries of its queue.
create or replace function public.locker_inspect(key_ bytea,
  out r_owners bytea[], out r_holds int[], out r_ttls_us bigint[], out r_excl boolean, out r_limit int, out r_queued int)
language plpgsql stable as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := clock_timestamp();
begin
  select array_agg(h.owner order by h.owner), array_agg(h.excl + h.shared order by h.owner),
         array_agg((extract(epoch from h.expires - now_) * 1000000)::bigint order by h.owner),
         coalesce(bool_or(h.excl > 0), false), coalesce(max(h.lim), 0)
    into r_owners, r_holds, r_ttls_us, r_excl, r_limit
    from public.locker_holds h where h.key = k and h.expires > now_;
  select count(*) into r_queued from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_;
end $$;

-- locker_force is locker.Locker.ForceRelease: whether a live lock was deleted.
create or replace function public.locker_force(key_ bytea) returns boolean
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
begin
  delete from public.locker_holds h where h.key = k;
  if found then
    perform public.locker_notify(k, null, null);
  end if;
  return found;
end $$;

-- locker_dequeue is locker.KindLocker.Dequeue: a grant o did not take, the lock held once or a
-- permit held once, is given back, and passes on as after its release.
create or replace function public.locker_dequeue(key_ bytea, o bytea) returns void
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
  removed int := public.locker_remove(k, o, now_);
  mine public.locker_holds;
begin
  if removed = 2 then
    select * into mine from public.locker_holds h where h.key = k and h.owner = o;
    if found and ((mine.excl = 1 and mine.shared = 0) or (mine.lim > 0 and mine.shared = 1)) then
      delete from public.locker_holds h where h.key = k and h.owner = o; -- the grant, given back
      if not exists (select 1 from public.locker_holds h where h.key = k) then
        perform public.locker_grant_head(k, now_);
      elsif mine.lim > 0 then
        perform public.locker_grant_permit(k, mine.lim, now_);
      end if;
    end if;
  elsif removed = 1 then
    perform public.locker_notify(k, null, null);
  end if;
end $$;

-- locker_hand_off is locker.HandOffer.HandOff: r_holds -1 when f holds k neither exclusively, once,
-- nor as one permit, once.
create or replace function public.locker_hand_off(key_ bytea, f bytea, t bytea, ttl_ms bigint, fence boolean,
  out r_holds int, out r_token bigint, out r_queued int)
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
  mine public.locker_holds;
  tok bigint := 0;
begin
  r_holds := -1; r_token := 0; r_queued := 0;
  select * into mine from public.locker_holds h where h.key = k and h.owner = t;
  if found then -- the hand-off, sent again
    update public.locker_holds h set expires = now_ + ttl_ms * interval '1 millisecond' where h.key = k and h.owner = t;
    r_holds := mine.excl + mine.shared;
    r_token := case when mine.lim = 0 then public.locker_token(k, fence) when fence then mine.token else 0 end;
  else
    select * into mine from public.locker_holds h where h.key = k and h.owner = f;
    if not found or not ((mine.excl = 1 and mine.shared = 0) or (mine.lim > 0 and mine.shared = 1)) then
      return;
    end if;
    delete from public.locker_holds h where h.key = k and h.owner = f;
    if fence then
      perform public.locker_advance(k, now_);
      tok := public.locker_token(k, true);
    end if;
    if mine.lim > 0 then -- the permit passes, with a token of its own
      insert into public.locker_holds (key, owner, excl, shared, expires, lim, token) values (k, t, 0, 1, now_ + ttl_ms * interval '1 millisecond', mine.lim, tok);
    else
      insert into public.locker_holds (key, owner, excl, shared, expires) values (k, t, 1, 0, now_ + ttl_ms * interval '1 millisecond');
    end if;
    perform public.locker_remove(k, t, now_);
    r_holds := 1;
    r_token := tok;
  end if;
  select count(*) into r_queued from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ and q.owner <> t;
end $$;

-- locker_raise_fence is locker.FenceRaiser.RaiseFence.
create or replace function public.locker_raise_fence(k bytea, token bigint) returns void
language sql as $$
  insert into public.locker_fences as f (key, n) values (sha256(k), token)
  on conflict (key) do update set n = greatest(f.n, excluded.n);
$$;
