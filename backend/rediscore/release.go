package rediscore

import (
	"context"
	_ "embed"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// ReleaseScript is lua/release.lua, which Release runs, and Acquire to take back an acquire that
// too few replicas acknowledged; the file describes its keys, arguments and reply.
var ReleaseScript = newScript("release", releaseLua)

//go:embed lua/release.lua
var releaseLua string

// releaseFlags: 'm' marker (request ID), 'u' take-back, 'n' a fresh owner, 's' a shared hold,
// 'q' the wait queue and the fencing counter are passed.
var releaseFlags = newFlagSet("munsq")

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
	r, acks, err := b.write(ctx, ReleaseScript, keys, args) // acks: replicas that acknowledged the release
	if err != nil {
		return 0, b.fail(ctx, "release", err)
	}
	if r.Int < 0 {
		return 0, display.Errorf("%s: release: %w", b.prefix, locker.ErrNotHeld)
	}
	if acks < b.opts.acks {
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
