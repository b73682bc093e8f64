package rediscore

import (
	"log/slog"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// An Option configures a Backend, passed to an adapter's New: WithReplicaAck, WithNoticeConns,
// WithNoticeLinger, WithLogger.
type Option func(*options)

// options is the resolved set of Options of a Backend.
type options struct {
	noticeConns int           // the most notice connections per node (WithNoticeConns)
	linger      time.Duration // how long an idle notice channel stays subscribed (WithNoticeLinger)
	acks        int           // replicas to wait for after an acquire or a release; 0: none
	ackTimeout  time.Duration // the longest wait for them
	log         *slog.Logger  // WithLogger; nil: no records
	err         error         // the first invalid option, returned by every call
}

// WithNoticeConns sets the most pub/sub connections the Backend opens to each server node (each
// master of a cluster) for release notices. Every key the Backend's Clients wait on is one
// channel on one of them, whatever the number of keys; another connection is opened once every
// open one carries 128 channels, and a connection closes when its last channel is unsubscribed
// (see WithNoticeLinger).
// n must be at least 1, or every call of the Backend returns an error wrapping
// locker.ErrInvalid. Default: 2.
func WithNoticeConns(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail(display.Errorf("%w: WithNoticeConns(%d): want at least 1 connection", locker.ErrInvalid, n))
			return
		}
		o.noticeConns = n
	}
}

// WithNoticeLinger sets how long a key's release-notice channel stays subscribed after its last
// waiter left, so that a key contended again soon (every Lock of a busy key) needs no SUBSCRIBE
// round trip, nor a new connection when it was its connection's last channel. 0 unsubscribes at
// once; d must not be negative, or every call of the Backend returns an error wrapping
// locker.ErrInvalid. Inside a testing/synctest bubble, pass 0 (or sleep past d before the test
// ends): a lingering channel keeps its connection's goroutines, which the bubble would report
// as blocked. Default: DefaultNoticeLinger (1s).
func WithNoticeLinger(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.fail(display.Errorf("%w: WithNoticeLinger(%v): negative", locker.ErrInvalid, d))
			return
		}
		o.linger = d
	}
}

// WithReplicaAck makes the Backend wait, after every acquire, release, dequeue and renewal,
// until n replicas of the master that ran it have acknowledged it (WAIT n, on the same connection
// and round trip), for at most timeout (whole milliseconds, rounded up; at most half of what is
// left of the call's ctx). When fewer acknowledge in time, a granted acquire is taken back at
// once and Acquire returns an error wrapping locker.ErrUnavailable and ErrNotReplicated (Lock
// retries it); a release or dequeue has happened on the master and returns the same error; a
// renewal is reported as unknown. Inspect and ForceRelease do not wait. What it guarantees
// across failovers and what it costs: docs/safety.md; a restricted user's ACL needs +wait.
// n must be at least 1 and timeout positive, or every call of the Backend returns an error
// wrapping locker.ErrInvalid. Default: no waiting.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) {
		if n < 1 || timeout <= 0 {
			o.fail(display.Errorf("%w: WithReplicaAck(%d, %v): want at least 1 replica and a positive timeout", locker.ErrInvalid, n, timeout))
			return
		}
		o.acks, o.ackTimeout = n, timeout
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
	o := options{noticeConns: DefaultNoticeConns, linger: DefaultNoticeLinger}
	for _, opt := range opts {
		if opt == nil {
			o.fail(display.Errorf("%w: nil Option", locker.ErrInvalid))
			continue
		}
		opt(&o)
	}
	return o
}
