package rediscore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashlock/locker"
)

// InspectScript is lua/inspect.lua, which Inspect runs; the file describes its keys, arguments and
// reply.
var InspectScript = newScript("inspect", inspectLua)

//go:embed lua/inspect.lua
var inspectLua string

// Inspect implements locker.Locker, locker.KindLocker and locker.Semaphorer with inspect.lua, on
// the key and its wait queue (QueueKey). Holders are sorted by owner token in byte order, and
// for a key in shared mode or a semaphore, Owner is the first of them.
func (b *Backend) Inspect(ctx context.Context, key string) (locker.State, error) {
	if b.opts.err != nil {
		return locker.State{}, b.opts.err
	}
	r, err := b.d.Eval(ctx, InspectScript, []string{key, QueueKey(key)}, nil)
	if err != nil {
		return locker.State{}, b.fail(ctx, "inspect", err)
	}
	if len(r.Array) < 6 || len(r.Array)%2 != 0 {
		return locker.State{}, fmt.Errorf("%s: inspect: unexpected reply %v", b.prefix, r.Array)
	}
	st := locker.State{Queued: int(r.Array[4])}
	if r.Array[0] <= 0 {
		return st, nil
	}
	holders, err := holdersOf(r.Array[6:], r.Text)
	if err != nil || len(holders) == 0 {
		return locker.State{}, fmt.Errorf("%s: inspect: unexpected reply %v %q: %v", b.prefix, r.Array, r.Text, err)
	}
	st.Locked, st.Owner, st.Holds, st.TTL = true, holders[0].Owner, int(r.Array[0]), time.Duration(r.Array[1])*time.Millisecond
	st.Limit, st.Holders = int(r.Array[5]), holders
	if r.Array[2] == 1 {
		st.Shared, st.Readers = true, int(r.Array[3])
	}
	return st, nil
}

// holdersOf decodes the holders of inspect.lua's reply, sorted by owner: pairs of holds and
// remaining lease in ms, and their owner tokens, each "<length>:<token>", in one string.
func holdersOf(pairs []int64, owners string) ([]locker.Holder, error) {
	holders := make([]locker.Holder, len(pairs)/2)
	for i := range holders {
		n, rest, ok := strings.Cut(owners, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size > len(rest) {
			return nil, fmt.Errorf("holder %d: no owner token", i)
		}
		holders[i] = locker.Holder{Owner: rest[:size], Holds: int(pairs[2*i]), TTL: time.Duration(pairs[2*i+1]) * time.Millisecond}
		owners = rest[size:]
	}
	if owners != "" {
		return nil, fmt.Errorf("owner tokens left over")
	}
	slices.SortFunc(holders, func(a, b locker.Holder) int { return strings.Compare(a.Owner, b.Owner) })
	return holders, nil
}
