package rediscore

import (
	"context"
	_ "embed"
	"strconv"

	"github.com/hashlock/locker"
)

// RaiseScript is lua/raise.lua, which RaiseFence runs; the file describes its keys, arguments and
// reply.
var RaiseScript = newScript("raise", raiseLua)

//go:embed lua/raise.lua
var raiseLua string

var _ locker.FenceRaiser = (*Backend)(nil)

// RaiseFence implements locker.FenceRaiser with raise.lua.
func (b *Backend) RaiseFence(ctx context.Context, key string, token uint64) error {
	if b.opts.err != nil {
		return b.opts.err
	}
	_, err := b.d.Eval(ctx, RaiseScript, []string{FenceKey(key)}, []string{strconv.FormatUint(token, 10)})
	if err != nil {
		return b.fail(ctx, "raise fence", err)
	}
	return nil
}
