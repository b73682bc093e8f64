package rediscore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// AcquireScript is lua/acquire.lua, which Acquire runs; the file describes its keys, arguments and
// reply.
var AcquireScript = newScript("acquire", acquireLua)

//go:embed lua/acquire.lua
var acquireLua string

// acquireFlags: 'm' marker (request ID), 'f' fence, 'n' fresh owner, 'r' re-entry only, 's'
// shared, 'o' fair (ordered), 'q' the wait queue is passed, 'p' a permit of a semaphore.
var acquireFlags = newFlagSet("mfnrsoqp")

// MaxLimit is the largest semaphore a Backend accepts (locker.Semaphorer): 256 permits. Every
// script call on a semaphore reads (and may rewrite) the fields of all its holders, so its time
// on the server, which runs nothing else meanwhile, grows with the permits taken: with 256
// taken, an acquire or a release takes about 0.3 ms of it, against 0.04 ms with a few (1024
// would take 1 to 2 ms; docs/redis.md).
const MaxLimit = 256

var _ locker.Semaphorer = (*Backend)(nil)

// MaxLimit implements [locker.Semaphorer]: it returns the package's MaxLimit.
func (b *Backend) MaxLimit() int { return MaxLimit }

// Acquire implements locker.Locker, locker.KindLocker and locker.Semaphorer with acquire.lua:
// with req.ID, the marker at MarkerKey remembers the outcome (unless req.Fresh); with req.Fence,
// the counter at FenceKey gives the token; a request that is shared, a permit's (req.Limit > 0),
// fair or waits (req.Wait > 0) reads and writes the wait queue at QueueKey, and a plain
// exclusive one never touches it. An exclusive request of an owner that holds the key only
// shared returns an error wrapping locker.ErrUpgrade; a request with another limit than the
// key is held with one wrapping locker.ErrLimitMismatch; a negative req.Wait, or a req.Limit
// that is negative or over MaxLimit, one wrapping locker.ErrInvalid. With WithReplicaAck, a
// granted acquire that too few replicas acknowledged is taken back.
func (b *Backend) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if b.opts.err != nil {
		return locker.Acquisition{}, b.opts.err
	}
	switch {
	case req.Wait < 0:
		return locker.Acquisition{}, display.Errorf("%s: acquire: wait %v: %w", b.prefix, req.Wait, locker.ErrInvalid)
	case req.Limit < 0 || req.Limit > MaxLimit:
		return locker.Acquisition{}, display.Errorf("%s: acquire: limit %d is not within [0, %d]: %w", b.prefix, req.Limit, MaxLimit, locker.ErrInvalid)
	case req.Limit > 0:
		req.Shared = true // a permit is a shared hold
	}
	permit := req.Limit > 0
	queued := req.Shared || req.Fair || req.Wait > 0
	// The companions' names in one allocation: marker, queue, fence, channel.
	var suffixes [4]string
	if req.ID != "" {
		suffixes[0] = "req:"
	}
	if queued {
		suffixes[1], suffixes[3] = "queue", "released"
	}
	if req.Fence {
		suffixes[2] = "fence"
	}
	var names [4]string
	companionNames(req.Key, suffixes, [4]string{req.ID}, &names)
	size := 11 // keys and args in one allocation: at most 4 keys, then 7 args (8 for a permit)
	if permit {
		size++
	}
	buf := make([]string, size)
	keys := buf[:1:4]
	keys[0] = req.Key
	for _, name := range names[:3] {
		if name != "" {
			keys = append(keys, name)
		}
	}
	flags := acquireFlags.of(req.ID != "", req.Fence, req.Fresh, req.Reentry, req.Shared, req.Fair, queued, permit)
	var args []string
	if queued {
		wait := "0"
		if req.Wait > 0 {
			wait = formatMillis(req.Wait, &lastWait)
		}
		args = append(buf[4:4], req.Owner, millis(req.TTL), flags, wait, names[3])
		if permit {
			args = append(args, strconv.Itoa(req.Limit))
		}
		if req.Grant > 0 {
			args = append(args, formatMillis(req.Grant, &lastGrant), req.ID)
		}
	} else {
		args = append(buf[4:4], req.Owner, millis(req.TTL), flags)
	}
	r, acks, err := b.write(ctx, AcquireScript, keys, args) // acks: replicas that acknowledged the acquire
	if err != nil {
		return locker.Acquisition{}, b.fail(ctx, "acquire", err)
	}
	// A bare integer without fencing, {holds, token} with it; {holds, token, taken} for a permit.
	holds, token, taken := r.Int, int64(0), int64(0)
	switch {
	case permit && len(r.Array) == 3:
		holds, token, taken = r.Array[0], r.Array[1], r.Array[2]
	case permit || (r.Array != nil || req.Fence) && len(r.Array) != 2:
		return locker.Acquisition{}, fmt.Errorf("%s: acquire: unexpected reply %v", b.prefix, r.Array)
	case r.Array != nil:
		holds, token = r.Array[0], r.Array[1]
	}
	if holds > 0 {
		if acks < b.opts.acks {
			return locker.Acquisition{}, b.takeBack(ctx, req, acks)
		}
		return locker.Acquisition{Holds: int(holds), Token: uint64(token)}, nil
	}
	return locker.Acquisition{TTL: time.Duration(-holds) * time.Millisecond, Taken: int(taken)}, nil
}

// takeBack undoes a granted acquire that too few replicas acknowledged: a take-back of req.ID
// when it has one (a copy of the acquire sent again later is then refused), else the release of
// one hold. It does not wait for replicas: the take-back is about the master, and an acquire
// lost in a failover is as good as taken back. It returns the error for Acquire.
func (b *Backend) takeBack(ctx context.Context, req locker.AcquireRequest, acks int) error {
	keys, args := releaseCall(locker.ReleaseRequest{Key: req.Key, Owner: req.Owner, ID: req.ID, Undo: req.ID != "", Fresh: req.Fresh, Shared: req.Shared})
	if _, err := b.d.Eval(ctx, ReleaseScript, keys, args); err != nil {
		// The hold may still be there: the Client takes the acquire back again (or sends it
		// again, and then waits for the replicas again).
		return display.Errorf("%w; taking it back failed: %w", b.unreplicated("acquire", acks, ""), b.fail(ctx, "release", err))
	}
	return b.unreplicated("acquire", acks, "; taken back")
}
