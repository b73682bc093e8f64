package rediscore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/hashlock/locker"
)

// InspectScript is lua/inspect.lua, which Inspect runs; the file describes its keys, arguments and
// reply.
var InspectScript = newScript("inspect", inspectLua)

//go:embed lua/inspect.lua
var inspectLua string

// Inspect implements locker.Locker and locker.KindLocker with inspect.lua, on the key and its
// wait queue (QueueKey): for a key in shared mode, Owner is the reader whose token sorts first
// on the server (byte order unless its locale collates otherwise).
func (b *Backend) Inspect(ctx context.Context, key string) (locker.State, error) {
	if b.opts.err != nil {
		return locker.State{}, b.opts.err
	}
	r, err := b.d.Eval(ctx, InspectScript, []string{key, QueueKey(key)}, nil)
	if err != nil {
		return locker.State{}, b.fail(ctx, "inspect", err)
	}
	if len(r.Array) != 5 {
		return locker.State{}, fmt.Errorf("%s: inspect: unexpected reply %v", b.prefix, r.Array)
	}
	st := locker.State{Queued: int(r.Array[4])}
	if r.Array[0] <= 0 {
		return st, nil
	}
	st.Locked, st.Owner, st.Holds, st.TTL = true, r.Text, int(r.Array[0]), time.Duration(r.Array[1])*time.Millisecond
	if r.Array[2] == 1 {
		st.Shared, st.Readers = true, int(r.Array[3])
	}
	return st, nil
}
