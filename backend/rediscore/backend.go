package rediscore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var (
	_ locker.KindLocker  = (*Backend)(nil)
	_ locker.FenceRaiser = (*Backend)(nil)
)

const (
	// maxBatch is the most keys one renewal script call carries.
	maxBatch = 512
	// CallTimeout bounds a call whose ctx has no deadline in drivers without I/O timeouts of
	// their own (Redigo), and every re-subscription attempt: a server that stops answering
	// (paused, partitioned) must give an error, not a hang. It matches go-redis's and
	// rueidis's default I/O timeouts, which bound their calls.
	CallTimeout = 10 * time.Second
)

// Bound returns ctx with a deadline CallTimeout away when it has none, for drivers without I/O
// timeouts of their own.
func Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, CallTimeout)
}

// Backend is a locker.Locker on Redis through a Driver: the lock of package locker on one
// server, a Redis Cluster, or a Sentinel-managed primary, whatever the client. It is safe for
// concurrent use and needs no Close (the client stays its creator's). Every call is bounded by
// its ctx, and without a deadline by the driver's I/O timeouts or CallTimeout (docs/redis.md).
type Backend struct {
	d       Driver
	prefix  string // prepended to every error message: "goredis", "rueidis"…
	notices *hub
	opts    options
}

// New returns a Backend that runs the canonical scripts through d, configured by opts (none by
// default); name (the driver's, "goredis" say) prefixes its errors. An invalid option makes
// every call return an error wrapping locker.ErrInvalid. Users call their adapter's New, which
// calls this one.
func New(d Driver, name string, opts ...Option) *Backend {
	b := &Backend{d: d, prefix: name, opts: resolve(opts)}
	b.notices = newHub(d, b.opts.noticeConns, b.opts.linger)
	b.notices.log = b.opts.log
	if b.opts.err != nil {
		b.opts.err = display.Errorf("%s: %w", name, b.opts.err)
	}
	return b
}

// Acquire implements locker.Locker and locker.KindLocker with acquire.lua: with req.ID, the
// marker at MarkerKey remembers the outcome (unless req.Fresh); with req.Fence, the counter at
// FenceKey gives the token; a request that is shared, fair or waits (req.Wait > 0) reads and
// writes the wait queue at QueueKey, and a plain exclusive one never touches it. An exclusive
// request of an owner that holds the key only shared returns an error wrapping
// locker.ErrUpgrade; a negative req.Wait one wrapping locker.ErrInvalid. With WithReplicaAck, a
// granted acquire that too few replicas acknowledged is taken back.
func (b *Backend) Acquire(ctx context.Context, req locker.AcquireRequest) (locker.Acquisition, error) {
	if b.opts.err != nil {
		return locker.Acquisition{}, b.opts.err
	}
	if req.Wait < 0 {
		return locker.Acquisition{}, display.Errorf("%s: acquire: wait %v: %w", b.prefix, req.Wait, locker.ErrInvalid)
	}
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
	buf := make([]string, 11) // keys and args in one allocation: at most 4 keys, then 7 args
	keys := buf[:1:4]
	keys[0] = req.Key
	for _, name := range names[:3] {
		if name != "" {
			keys = append(keys, name)
		}
	}
	flags := acquireFlags.of(req.ID != "", req.Fence, req.Fresh, req.Reentry, req.Shared, req.Fair, queued)
	var args []string
	if queued {
		wait := "0"
		if req.Wait > 0 {
			wait = formatMillis(req.Wait, &lastWait)
		}
		args = append(buf[4:4], req.Owner, millis(req.TTL), flags, wait, names[3])
		if req.Grant > 0 {
			args = append(args, formatMillis(req.Grant, &lastGrant), req.ID)
		}
	} else {
		args = append(buf[4:4], req.Owner, millis(req.TTL), flags)
	}
	r, acks, err := b.change(ctx, AcquireScript, keys, args)
	if err != nil {
		return locker.Acquisition{}, b.fail(ctx, "acquire", err)
	}
	holds, token := r.Int, int64(0) // a bare integer without fencing, {holds, token} with it
	if r.Array != nil || req.Fence {
		if len(r.Array) != 2 {
			return locker.Acquisition{}, fmt.Errorf("%s: acquire: unexpected reply %v", b.prefix, r.Array)
		}
		holds, token = r.Array[0], r.Array[1]
	}
	if holds > 0 {
		if acks >= 0 && acks < b.opts.acks {
			return locker.Acquisition{}, b.takeBack(ctx, req, acks)
		}
		return locker.Acquisition{Holds: int(holds), Token: uint64(token)}, nil
	}
	return locker.Acquisition{TTL: time.Duration(-holds) * time.Millisecond}, nil
}

// Release implements locker.Locker with release.lua: with req.ID, the marker at MarkerKey
// remembers the outcome (when req.Fresh and no hold of the owner's is left: for
// req.ReplyWindow, or not at all when it is 0; but with WithReplicaAck always for
// locker.RequestWindow), or, with req.Undo, that the acquire with that ID was taken back. With
// WithReplicaAck, a release that too few replicas acknowledged returns an error wrapping
// locker.ErrUnavailable and ErrNotReplicated, although the master released.
func (b *Backend) Release(ctx context.Context, req locker.ReleaseRequest) (int, error) {
	if b.opts.err != nil {
		return 0, b.opts.err
	}
	if b.opts.acks > 0 && !req.Undo {
		// With replica acknowledgement, a release sent again after too few acks must report
		// the first outcome and be acknowledged in turn, not find nothing: a marker is written
		// whatever req.Fresh says.
		req.Fresh = false
	}
	keys, args := releaseCall(req)
	r, acks, err := b.change(ctx, ReleaseScript, keys, args)
	if err != nil {
		return 0, b.fail(ctx, "release", err)
	}
	if r.Int < 0 {
		return 0, display.Errorf("%s: release: %w", b.prefix, locker.ErrNotHeld)
	}
	if acks >= 0 && acks < b.opts.acks {
		return 0, b.unreplicated("release", acks, "; released on the master")
	}
	return int(r.Int), nil
}

// releaseCall returns the keys and arguments of release.lua for req.
func releaseCall(req locker.ReleaseRequest) (keys, args []string) {
	buf := make([]string, 8) // keys and args in one allocation: at most 4 keys, then 4 args
	keys = buf[:1:4]
	keys[0] = req.Key
	marker, channel, queue, fence := releaseNames(req.Key, req.ID)
	if req.ID != "" {
		keys = append(keys, marker)
	}
	keys = append(keys, queue, fence)
	undo := req.Undo && req.ID != ""
	args = append(buf[4:4], req.Owner, channel, releaseFlags.of(req.ID != "", undo, req.Fresh, req.Shared, true))
	if req.Fresh && !undo && req.ID != "" && req.ReplyWindow > 0 {
		args = append(args, formatMillis(req.ReplyWindow, &lastWindow))
	}
	return keys, args
}

// A flagSet is the scripts' flags argument for every combination of its letters, made once, so
// that no call builds a string.
type flagSet []string

// newFlagSet returns the flag set of letters (a few: it has 2^len(letters) entries).
func newFlagSet(letters string) flagSet {
	s := make(flagSet, 1<<len(letters))
	for i := range s {
		for j := range len(letters) {
			if i&(1<<j) != 0 {
				s[i] += letters[j : j+1]
			}
		}
	}
	return s
}

// of returns the letters whose condition holds, in the order of the set's letters.
func (s flagSet) of(conds ...bool) string {
	i := 0
	for j, c := range conds {
		if c {
			i |= 1 << j
		}
	}
	return s[i]
}

var (
	// acquireFlags: 'm' marker (request ID), 'f' fence, 'n' fresh owner, 'r' re-entry only,
	// 's' shared, 'o' fair (ordered), 'q' the wait queue is passed.
	acquireFlags = newFlagSet("mfnrsoq")
	// releaseFlags: 'm' marker (request ID), 'u' take-back, 'n' a fresh owner,
	// 's' a shared hold, 'q' the wait queue and the fencing counter are passed.
	releaseFlags = newFlagSet("munsq")
)

// Renew implements locker.Locker with renew.lua: one call per group of keys that share a
// cluster slot (any keys when not on a cluster), up to maxBatch keys a call, all calls in one
// EvalBatch.
func (b *Backend) Renew(ctx context.Context, batch []locker.Renewal) []error {
	errs := make([]error, len(batch))
	if b.opts.err != nil {
		for i := range errs {
			errs[i] = b.opts.err
		}
		return errs
	}
	groups := b.group(batch)
	calls := make([]Call, len(groups))
	for i, g := range groups {
		c := Call{Keys: make([]string, len(g)), Args: make([]string, 0, 2*len(g))}
		for j, idx := range g {
			r := batch[idx]
			c.Keys[j] = r.Key
			c.Args = append(c.Args, r.Owner, millis(r.TTL))
		}
		calls[i] = c
	}
	var results []Result
	if b.opts.acks > 0 {
		results = b.renewAcknowledged(ctx, calls)
	} else {
		results = b.d.EvalBatch(ctx, RenewScript, calls)
	}
	for i, g := range groups {
		var res Result
		if i < len(results) {
			res = results[i]
		} else {
			res.Err = fmt.Errorf("driver returned %d results for %d calls", len(results), len(calls))
		}
		for j, idx := range g {
			switch {
			case res.Err != nil:
				errs[idx] = b.fail(ctx, "renew", res.Err)
			case j >= len(res.Reply.Array):
				errs[idx] = fmt.Errorf("%s: renew: short reply %v", b.prefix, res.Reply.Array)
			case res.Reply.Array[j] != 1:
				errs[idx] = display.Errorf("%s: renew: %w", b.prefix, locker.ErrNotHeld)
			}
		}
	}
	return errs
}

// group splits the indexes of batch into script calls: by slot on a cluster, in order, at most
// maxBatch each.
func (b *Backend) group(batch []locker.Renewal) [][]int {
	var groups [][]int
	if !b.d.Cluster() {
		for start := 0; start < len(batch); start += maxBatch {
			g := make([]int, 0, min(maxBatch, len(batch)-start))
			for i := start; i < len(batch) && i < start+maxBatch; i++ {
				g = append(g, i)
			}
			groups = append(groups, g)
		}
		return groups
	}
	open := make(map[uint16]int) // slot -> index in groups of its newest group
	for i, r := range batch {
		s := Slot(r.Key)
		gi, ok := open[s]
		if !ok || len(groups[gi]) == maxBatch {
			gi = len(groups)
			groups = append(groups, nil)
			open[s] = gi
		}
		groups[gi] = append(groups[gi], i)
	}
	return groups
}

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

// Dequeue implements locker.KindLocker with dequeue.lua: it takes owner's entry out of key's
// wait queue (QueueKey), if there is one, and sends a release notice when live entries were
// behind it; an unconfirmed grant of key to owner is released (locker.Granter). A queue key that holds anything else is left as it is (an error wrapping
// locker.ErrNotALock). With WithReplicaAck, a dequeue that too few replicas acknowledged
// returns an error wrapping locker.ErrUnavailable and ErrNotReplicated, although the master
// dequeued (a failover may bring the entry back until its wait ends).
func (b *Backend) Dequeue(ctx context.Context, key, owner string) error {
	if b.opts.err != nil {
		return b.opts.err
	}
	_, acks, err := b.change(ctx, DequeueScript, []string{QueueKey(key), key, FenceKey(key)}, []string{owner, Channel(key)})
	if err != nil {
		return b.fail(ctx, "dequeue", err)
	}
	if acks >= 0 && acks < b.opts.acks {
		return b.unreplicated("dequeue", acks, "; dequeued on the master")
	}
	return nil
}

// ForceRelease implements locker.Locker with force.lua.
func (b *Backend) ForceRelease(ctx context.Context, key string) (bool, error) {
	if b.opts.err != nil {
		return false, b.opts.err
	}
	r, err := b.d.Eval(ctx, ForceScript, []string{key}, []string{Channel(key)})
	if err != nil {
		return false, b.fail(ctx, "force release", err)
	}
	return r.Int == 1, nil
}

// Subscribe implements locker.Locker: the key's channel is subscribed on one of the Backend's
// shared pub/sub connections to the key's node (see WithNoticeConns), for as long as the key has
// waiters.
func (b *Backend) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if b.opts.err != nil {
		return nil, nil, b.opts.err
	}
	ch, cancel, err := b.notices.subscribe(ctx, Channel(key))
	if err != nil {
		return nil, nil, b.fail(ctx, "subscribe", err)
	}
	return ch, cancel, nil
}

// SubscribeAs implements locker.Granter: Subscribe for a waiter of key whose owner token is
// owner, which receives "" for a notice that grants nothing, the request ID of the grant for a
// grant to owner, and nothing for a grant to another owner.
func (b *Backend) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	if b.opts.err != nil {
		return nil, nil, b.opts.err
	}
	ch, cancel, err := b.notices.subscribeAs(ctx, Channel(key), key, owner)
	if err != nil {
		return nil, nil, b.fail(ctx, "subscribe", err)
	}
	return ch, cancel, nil
}

// fail wraps a driver error with the operation and key: a script's NOTALOCK, NOTHELD or UPGRADE
// answer with locker.ErrNotALock, locker.ErrNotHeld or locker.ErrUpgrade; otherwise with ctx's error when ctx ended
// (drivers do not all say so: Redigo reports the I/O timeout it derived from the deadline, which
// may fire a moment before the ctx's own timer), or else with locker.ErrUnavailable when the
// error is one that passes (see Unavailable).
func (b *Backend) fail(ctx context.Context, op string, err error) error {
	if why, sentinel := scriptRefusal(err); sentinel != nil {
		if why == "" {
			return display.Errorf("%s: %s: %w", b.prefix, op, sentinel)
		}
		return display.Errorf("%s: %s: %w (%s)", b.prefix, op, sentinel, why)
	}
	ctxErr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(d) {
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return display.Errorf("%s: %s: %w (%w)", b.prefix, op, ctxErr, err)
	}
	// The driver reports ctx's end: the server is unavailable only if something else says so (a
	// dial that failed meanwhile), not because ctx's deadline is a timeout.
	if down := ctxErr == nil && Unavailable(err) || ctxErr != nil && unavailableBesides(err, ctxErr); down && !errors.Is(err, locker.ErrUnavailable) {
		return display.Errorf("%s: %s: %w: %w", b.prefix, op, locker.ErrUnavailable, err)
	}
	return display.Errorf("%s: %s: %w", b.prefix, op, err)
}

// scriptRefusal returns the reason a script gives in an error answer (NOTALOCK, NOTHELD,
// UPGRADE: see the scripts), "" when it gives none, and the answer's sentinel; a nil sentinel
// for any other error.
func scriptRefusal(err error) (why string, sentinel error) {
	if err == nil {
		return "", nil
	}
	msg := err.Error()
	for code, sentinel := range scriptErrors {
		i := strings.Index(msg, code)
		if i < 0 || i > 0 && msg[i-1] != ' ' && msg[i-1] != '-' {
			continue
		}
		switch rest := msg[i+len(code):]; {
		case rest == "":
			return "", sentinel
		case rest[0] == ' ':
			return rest[1:], sentinel
		}
	}
	return "", nil
}

// scriptErrors are the error codes the scripts answer with, and their sentinels.
var scriptErrors = map[string]error{"NOTALOCK": locker.ErrNotALock, "NOTHELD": locker.ErrNotHeld, "UPGRADE": locker.ErrUpgrade}

// millis formats d in whole milliseconds, rounded up, at least 1. Most programs use one or two
// TTLs, so the latest result is kept: the hot path formats nothing.
func millis(d time.Duration) string { return formatMillis(d, &lastMillis) }

// formatMillis is millis with the latest result kept in last (one for TTLs, one for waits, one
// for reply windows, so that none pushes the others out: the Client's windows are whole
// milliseconds, mostly its WithUnlockTimeout).
func formatMillis(d time.Duration, last *atomic.Pointer[formatted]) string {
	if l := last.Load(); l != nil && l.d == d {
		return l.s
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	s := strconv.FormatInt(int64(max(ms, 1)), 10)
	last.Store(&formatted{d, s})
	return s
}

// formatted is a TTL and its formatting by millis.
type formatted struct {
	d time.Duration
	s string
}

var lastMillis, lastWait, lastGrant, lastWindow atomic.Pointer[formatted]
