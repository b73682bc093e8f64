package rediscore

import (
	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

var _ locker.KindLocker = (*Backend)(nil)

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
