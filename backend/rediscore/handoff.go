package rediscore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// HandOffScript is lua/handoff.lua, which HandOff runs; the file describes its keys, arguments and
// reply.
var HandOffScript = newScript("handoff", handOffLua)

//go:embed lua/handoff.lua
var handOffLua string

var (
	_ locker.HandOffer = (*Backend)(nil)
	_ locker.Granter   = (*Backend)(nil)
)

// handOffFlags: 'f' draw a fencing token.
var handOffFlags = newFlagSet("f")

// HandOff implements [locker.HandOffer] with handoff.lua: req.From's exclusive hold passes to
// req.To in one script, the key staying held. With WithReplicaAck, a hand-off that too few
// replicas acknowledged returns an error wrapping locker.ErrUnavailable and ErrNotReplicated,
// although To holds the key on the master.
func (b *Backend) HandOff(ctx context.Context, req locker.HandOffRequest) (locker.HandOffResult, error) {
	if b.opts.err != nil {
		return locker.HandOffResult{}, b.opts.err
	}
	if req.Key == "" || req.From == "" || req.To == "" || req.From == req.To || req.TTL <= 0 {
		return locker.HandOffResult{}, display.Errorf("%s: hand off: an empty key or owner, From equal to To, or a TTL <= 0: %w", b.prefix, locker.ErrInvalid)
	}
	keys := []string{req.Key, QueueKey(req.Key)}
	if req.Fence {
		keys = append(keys, FenceKey(req.Key))
	}
	args := []string{req.From, req.To, millis(req.TTL), handOffFlags.of(req.Fence)}
	r, acks, err := b.write(ctx, HandOffScript, keys, args) // acks: replicas that acknowledged the hand-off
	if err != nil {
		return locker.HandOffResult{}, b.fail(ctx, "hand off", err)
	}
	if len(r.Array) != 3 || r.Array[0] < 1 {
		return locker.HandOffResult{}, fmt.Errorf("%s: hand off: unexpected reply %v", b.prefix, r.Array)
	}
	if acks < b.opts.acks {
		return locker.HandOffResult{}, b.unreplicated("hand off", acks, "; handed off on the master")
	}
	return locker.HandOffResult{Holds: int(r.Array[0]), Token: uint64(r.Array[1]), Queued: int(r.Array[2])}, nil
}
