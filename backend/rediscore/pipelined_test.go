package rediscore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hashlock/locker"
)

var errNoScript = errors.New("NOSCRIPT No matching script")

func TestDecodedReply(t *testing.T) {
	boom := errors.New("ERR boom")
	if _, err := DecodedReply(int64(1), boom); err != boom {
		t.Fatalf("DecodedReply with an error: %v, want it as it is", err)
	}
	r, err := DecodedReply([]any{int64(1), int64(2), "text"}, nil)
	if err != nil || !slices.Equal(r.Array, []int64{1, 2}) || r.Text != "text" {
		t.Fatalf("DecodedReply(array) = %+v, %v", r, err)
	}
}

func TestEvalBatchRetry(t *testing.T) {
	calls := make([]Call, 5)
	for i := range calls {
		calls[i].Keys = []string{fmt.Sprint(i)}
	}
	var retried []string
	results := EvalBatchRetry(calls, func(calls []Call) []Result {
		out := make([]Result, len(calls))
		for i := range out {
			if i%2 == 1 {
				out[i].Err = errNoScript
			} else {
				out[i].Reply.Int = 1
			}
		}
		return out
	}, func(calls []Call) []Result {
		out := make([]Result, len(calls))
		for i, c := range calls {
			retried = append(retried, c.Keys[0])
			out[i].Reply.Int = 2
		}
		return out
	})
	if !slices.Equal(retried, []string{"1", "3"}) {
		t.Fatalf("retried %v, want the refused calls 1 and 3", retried)
	}
	for i, r := range results {
		if want := int64(1 + i%2); r.Err != nil || r.Reply.Int != want {
			t.Fatalf("result %d = %+v, want %d", i, r, want)
		}
	}
	if EvalBatchRetry(nil, nil, nil) != nil {
		t.Fatal("results of no calls")
	}
}

func TestEvalWaitRetry(t *testing.T) {
	var evals []bool
	r, acks, err := EvalWaitRetry(func(eval bool) (Result, int64, error) {
		evals = append(evals, eval)
		if !eval {
			return Result{Err: errNoScript}, 0, nil
		}
		return Result{Reply: Reply{Int: 7}}, 2, nil
	})
	if err != nil || r.Int != 7 || acks != 2 || !slices.Equal(evals, []bool{false, true}) {
		t.Fatalf("after NOSCRIPT: %+v, %d acks, %v, sent %v; want EVALSHA then EVAL", r, acks, err, evals)
	}
	_, acks, err = EvalWaitRetry(func(bool) (Result, int64, error) {
		return Result{Err: errors.New("MOVED 3999 127.0.0.1:6381")}, 1, nil
	})
	if !errors.Is(err, locker.ErrUnavailable) || acks != 0 {
		t.Fatalf("MOVED: %d acks, %v; want 0 and ErrUnavailable", acks, err)
	}
	waitErr := errors.New("WAIT failed")
	if _, _, err = EvalWaitRetry(func(bool) (Result, int64, error) { return Result{}, 0, waitErr }); err != waitErr {
		t.Fatalf("WAIT's error: %v, want %v", err, waitErr)
	}
}

// hookConn is a PubSubConn whose Close is recorded.
type hookConn struct{ closed chan struct{} }

func (c hookConn) Do(context.Context, ...PubSubCommand) error { return nil }
func (c hookConn) Close()                                     { close(c.closed) }

// failures records what a connection reports as failed.
type failures chan error

func (f failures) Message(string, string) {}
func (f failures) Reply(string, string)   {}
func (f failures) Failed(err error)       { f <- err }

func TestWatchHooks(t *testing.T) {
	for _, lost := range []error{nil, errors.New("EOF")} {
		done, f := make(chan error, 1), make(failures, 1)
		conn := hookConn{make(chan struct{})}
		w := WatchHooks(conn, done, f)
		done <- lost
		err := <-f
		if lost == nil && err != errPubSubClosed || lost != nil && err != lost {
			t.Fatalf("hooks stopped with %v: Failed(%v)", lost, err)
		}
		w.Close()
		<-conn.closed
	}
	done, f := make(chan error, 1), make(failures, 1)
	conn := hookConn{make(chan struct{})}
	WatchHooks(conn, done, f).Close()
	<-conn.closed
	done <- nil // after Close: nobody listens
	if len(f) != 0 {
		t.Fatalf("Failed(%v) after Close", <-f)
	}
}
