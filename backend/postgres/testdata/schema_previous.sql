-- The schema of backend/postgres before semaphores (schema.sql at dad536d), for TestMigrateUpgradesInPlace.
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
  primary key (key, owner)
);
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
  primary key (key, owner)
);
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

-- locker_enqueue puts o at the tail of k's queue for wait_ms, or keeps its place and refreshes it.
create or replace function public.locker_enqueue(k bytea, o bytea, flags int, wait_ms bigint, grant_ms_ bigint, rid_ bytea, now_ timestamptz) returns void
language plpgsql as $$
declare
  g bigint := case when grant_ms_ > 0 and flags & 1 <> 0 and flags & 8 = 0 then grant_ms_ else 0 end;
  kind_ "char" := case flags & 24 when 0 then 'w' when 8 then 'r' when 16 then 'x' else 's' end;
begin
  update public.locker_queue q set deadline = now_ + wait_ms * interval '1 millisecond', grant_ms = g, fence = flags & 4 <> 0, rid = rid_
   where q.key = k and q.owner = o and q.kind <> 'g' and q.deadline > now_;
  if found then
    return;
  end if;
  delete from public.locker_queue q where q.key = k and q.owner = o; -- a lapsed grant, or a dead entry
  insert into public.locker_queue (key, owner, kind, deadline, grant_ms, fence, rid)
  values (k, o, kind_, now_ + wait_ms * interval '1 millisecond', g, flags & 4 <> 0, rid_);
end $$;

-- locker_grant_head gives k, just freed, to the head of its queue when the head asked for a
-- grant, and sends the notice (of that grant, or of a plain release).
create or replace function public.locker_grant_head(k bytea, now_ timestamptz) returns void
language plpgsql as $$
declare
  head public.locker_queue;
begin
  select * into head from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ order by q.seq limit 1;
  if not found or head.grant_ms = 0 then
    perform public.locker_notify(k, null, null);
    return;
  end if;
  delete from public.locker_queue q where q.key = k and q.owner = head.owner;
  insert into public.locker_holds (key, owner, excl, shared, expires) values (k, head.owner, 1, 0, now_ + head.grant_ms * interval '1 millisecond');
  if head.fence then
    perform public.locker_advance(k, now_);
  end if;
  insert into public.locker_queue (key, owner, kind, deadline, grant_ms, fence, rid)
  values (k, head.owner, 'g', now_ + head.grant_ms * interval '1 millisecond', 0, false, null);
  perform public.locker_notify(k, head.owner, head.rid);
end $$;

-- locker_acquire is locker.Locker.Acquire. flags: 1 Fresh, 2 Reentry, 4 Fence, 8 Shared, 16 Fair.
-- r_holds is -1 for a re-entry of a hold o does not have (ErrNotHeld), -2 for an upgrade.
create or replace function public.locker_acquire(key_ bytea, o bytea, ttl_ms bigint, rid bytea, flags int, wait_ms bigint, grant_ms_ bigint,
  out r_holds int, out r_ttl_us bigint, out r_token bigint)
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
  held boolean;
  removed int;
begin
  r_holds := 0; r_ttl_us := 0; r_token := 0;
  if rid is not null then
    select r.holds into done from public.locker_requests r where r.key = k and r.id = rid and r.expires > now_;
    if found then -- sent again: the first outcome while its hold is there
      if done > 0 and exists (select 1 from public.locker_holds h where h.key = k and h.owner = o) then
        r_holds := done;
        r_token := public.locker_token(k, fence);
      end if;
      return;
    end if;
  end if;
  select * into mine from public.locker_holds h where h.key = k and h.owner = o;
  if found then
    total := mine.excl + mine.shared;
  end if;
  if fresh and total > 0 then -- this very request sent again, or a grant taken
    update public.locker_holds h set expires = lease where h.key = k and h.owner = o;
    if sh or flags & 16 <> 0 or wait_ms > 0 then
      perform public.locker_remove(k, o, now_);
    end if;
    r_holds := total;
    r_token := public.locker_token(k, fence);
    return;
  elsif flags & 2 <> 0 and total = 0 then
    r_holds := -1;
    return;
  end if;
  select coalesce(bool_or(h.excl > 0), false), count(*) > 0 into excl_mode, held from public.locker_holds h where h.key = k;
  if total > 0 and not sh and not excl_mode then
    r_holds := -2;
    return;
  elsif total > 0 then -- re-entry, or a downgrade, whatever the queue
    update public.locker_holds h set excl = h.excl + (case when sh then 0 else 1 end), shared = h.shared + (case when sh then 1 else 0 end), expires = lease
     where h.key = k and h.owner = o;
  elsif not public.locker_admits(k, o, sh, flags & 16 <> 0, wait_ms, held, excl_mode, now_) then
    if wait_ms > 0 then
      perform public.locker_enqueue(k, o, flags, wait_ms, grant_ms_, rid, now_);
    end if;
    if held then
      select (extract(epoch from max(h.expires) - now_) * 1000000)::bigint into r_ttl_us from public.locker_holds h where h.key = k;
    end if;
    return;
  else
    insert into public.locker_holds (key, owner, excl, shared, expires) values (k, o, case when sh then 0 else 1 end, case when sh then 1 else 0 end, lease);
    if not held then
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
  if fence then
    r_token := public.locker_token(k, fence);
  end if;
end $$;

-- locker_release is locker.Locker.Release: the holds o has left, -1 when it holds none to
-- release (ErrNotHeld). flags: 1 Fresh, 2 Undo, 8 Shared.
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

-- locker_inspect is locker.Locker.Inspect: a read of one snapshot, taking no lock.
create or replace function public.locker_inspect(key_ bytea,
  out r_owner bytea, out r_holds int, out r_ttl_us bigint, out r_shared boolean, out r_readers int, out r_queued int)
language plpgsql stable as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := clock_timestamp();
begin
  select h.owner, h.excl + h.shared, (extract(epoch from h.expires - now_) * 1000000)::bigint, false, 0
    into r_owner, r_holds, r_ttl_us, r_shared, r_readers
    from public.locker_holds h where h.key = k and h.excl > 0 and h.expires > now_;
  if not found then
    select (array_agg(h.owner order by h.owner))[1], coalesce(sum(h.shared), 0), coalesce((extract(epoch from max(h.expires) - now_) * 1000000)::bigint, 0), count(*) > 0, count(*)
      into r_owner, r_holds, r_ttl_us, r_shared, r_readers
      from public.locker_holds h where h.key = k and h.expires > now_;
  end if;
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

-- locker_dequeue is locker.KindLocker.Dequeue.
create or replace function public.locker_dequeue(key_ bytea, o bytea) returns void
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
  removed int := public.locker_remove(k, o, now_);
begin
  if removed = 2 and exists (select 1 from public.locker_holds h where h.key = k and h.owner = o and h.excl = 1 and h.shared = 0) then
    delete from public.locker_holds h where h.key = k and h.owner = o; -- the grant, given back
    perform public.locker_grant_head(k, now_);
  elsif removed = 1 then
    perform public.locker_notify(k, null, null);
  end if;
end $$;

-- locker_hand_off is locker.HandOffer.HandOff: r_holds -1 when f does not hold k exclusively, once.
create or replace function public.locker_hand_off(key_ bytea, f bytea, t bytea, ttl_ms bigint, fence boolean,
  out r_holds int, out r_token bigint, out r_queued int)
language plpgsql as $$
declare
  k bytea := sha256(key_);
  now_ timestamptz := public.locker_enter(k);
  mine public.locker_holds;
begin
  r_holds := -1; r_token := 0; r_queued := 0;
  select * into mine from public.locker_holds h where h.key = k and h.owner = t;
  if found then -- the hand-off, sent again
    update public.locker_holds h set expires = now_ + ttl_ms * interval '1 millisecond' where h.key = k and h.owner = t;
    r_holds := mine.excl + mine.shared;
  else
    select * into mine from public.locker_holds h where h.key = k and h.owner = f;
    if not found or mine.excl <> 1 or mine.shared <> 0 then
      return;
    end if;
    delete from public.locker_holds h where h.key = k and h.owner = f;
    insert into public.locker_holds (key, owner, excl, shared, expires) values (k, t, 1, 0, now_ + ttl_ms * interval '1 millisecond');
    if fence then
      perform public.locker_advance(k, now_);
    end if;
    perform public.locker_remove(k, t, now_);
    r_holds := 1;
  end if;
  r_token := public.locker_token(k, fence);
  select count(*) into r_queued from public.locker_queue q where q.key = k and q.kind <> 'g' and q.deadline > now_ and q.owner <> t;
end $$;

-- locker_raise_fence is locker.FenceRaiser.RaiseFence.
create or replace function public.locker_raise_fence(k bytea, token bigint) returns void
language sql as $$
  insert into public.locker_fences as f (key, n) values (sha256(k), token)
  on conflict (key) do update set n = greatest(f.n, excluded.n);
$$;
