package rediscore

import (
	"context"
	_ "embed"
)

// ForceScript is lua/force.lua, which ForceRelease runs; the file describes its keys, arguments and
// reply.
var ForceScript = newScript("force", forceLua)

//go:embed lua/force.lua
var forceLua string

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
