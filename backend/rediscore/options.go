package rediscore

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hashlock/locker"
)

// An Option configures a Backend, passed to an adapter's New: WithReplicaAck, WithNoticeConns.
type Option func(*options)

// options is the resolved set of Options of a Backend.
type options struct {
	noticeConns int           // the most notice connections per node (WithNoticeConns)
	acks        int           // replicas to wait for after an acquire or a release; 0: none
	ackTimeout  time.Duration // the longest wait for them
	log         *slog.Logger  // WithLogger; nil: no records
	err         error         // the first invalid option, returned by every call
}

// WithNoticeConns sets the most pub/sub connections the Backend opens to each server node (each
// master of a cluster) for release notices. Every key the Backend's Clients wait on is one
// channel on one of them, whatever the number of keys; another connection is opened once every
// open one carries 128 channels, and a connection closes when its last channel is unsubscribed.
// n must be at least 1, or every call of the Backend returns an error wrapping
// locker.ErrInvalid. Default: 2.
func WithNoticeConns(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail(fmt.Errorf("%w: WithNoticeConns(%d): want at least 1 connection", locker.ErrInvalid, n))
			return
		}
		o.noticeConns = n
	}
}

// WithLogger makes the Backend write a log/slog record, at level Warn, when a release-notice
// connection drops: "locker: release-notice connection dropped, subscribing its channels
// again", with the node's address, the number of channels it carried and the error. Waiters
// are woken and the channels subscribed again on other connections whatever the logger; a
// locker.Client's WithLogger records the subscriptions that fail for good (the Client then
// waits on timers). A nil logger writes nothing. Default: no records.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// fail records err unless an earlier option was invalid already.
func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

func resolve(opts []Option) options {
	o := options{noticeConns: DefaultNoticeConns}
	for _, opt := range opts {
		if opt == nil {
			o.fail(fmt.Errorf("%w: nil Option", locker.ErrInvalid))
			continue
		}
		opt(&o)
	}
	return o
}
