package rediscore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/hashlock/locker"
)

// A call that ended with its ctx is not reported as the server being unavailable, although
// context.DeadlineExceeded is a net.Error (a timeout): only a cause besides the ctx (a dial that
// failed meanwhile) says so. A call whose ctx is live and that failed on the network is.
func TestFailTellsCtxFromServer(t *testing.T) {
	b := &Backend{prefix: "test"}
	ended, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ended.Done()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		down bool
	}{
		{"ctx ended, the driver says so", ended, context.DeadlineExceeded, false},
		{"ctx ended, wrapped", ended, fmt.Errorf("pool: %w", context.DeadlineExceeded), false},
		{"ctx ended, a dial failed meanwhile", ended, fmt.Errorf("%w (a dial failed meanwhile: %w)", context.DeadlineExceeded, refused), true},
		{"ctx live, refused", context.Background(), refused, true},
		{"ctx live, LOADING", context.Background(), errors.New("LOADING Redis is loading the dataset in memory"), true},
		{"ctx live, WRONGTYPE", context.Background(), errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		err := b.fail(tc.ctx, "acquire", tc.err)
		if got := errors.Is(err, locker.ErrUnavailable); got != tc.down {
			t.Errorf("%s: %v: ErrUnavailable %v, want %v", tc.name, err, got, tc.down)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap the driver's error", tc.name, err)
		}
	}
}
