package rediscore

import (
	"errors"
	"strings"
	"sync"
)

// errPubSubClosed is what WatchHooks reports when the hooks stopped without an error.
var errPubSubClosed = errors.New("pub/sub connection closed")

// The helpers below are the parts of a Driver that do not depend on the client's types, for a
// client that pipelines commands, runs scripts through its own script objects and reports
// pub/sub through hooks on a dedicated connection: rueidis and valkey-go use them, and so may
// any other client of that kind.

// DecodedReply converts a script reply decoded into Go values (the rueidis family's ToAny, an
// int64 or an []any) as ReplyOf does; when err is not nil (an error reply, or the call's
// failure), it returns err as it is.
func DecodedReply(v any, err error) (Reply, error) {
	if err != nil {
		return Reply{}, err
	}
	return ReplyOf(v)
}

// IsNoScript reports whether err is the server's NOSCRIPT reply to EVALSHA: the script is not
// in its cache (after SCRIPT FLUSH or a restart), and the call did not run.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// EvalBatchRetry is Driver.EvalBatch's NOSCRIPT fallback for a driver that pipelines EVALSHA:
// it runs calls with evalsha (one EVALSHA per call, in as few round trips as the driver
// allows), then the calls refused with NOSCRIPT, which did not run, with again (which loads the
// script first, or sends it), once. Both return one Result per call, in order; so does it.
func EvalBatchRetry(calls []Call, evalsha, again func([]Call) []Result) []Result {
	if len(calls) == 0 {
		return nil
	}
	results := evalsha(calls)
	var refused []int // indexes of the calls refused with NOSCRIPT
	for i, r := range results {
		if IsNoScript(r.Err) {
			refused = append(refused, i)
		}
	}
	if len(refused) == 0 {
		return results
	}
	retried := make([]Call, len(refused))
	for j, i := range refused {
		retried[j] = calls[i]
	}
	for j, r := range again(retried) {
		results[refused[j]] = r
	}
	return results
}

// EvalWaitRetry is Driver.EvalWait for a driver that sends the script and WAIT in one round
// trip on one connection: pipe sends them — EVALSHA, or EVAL with the script's source when eval
// is true — and returns the script's Result and WAIT's reply (how many replicas acknowledged)
// or its error. EvalWaitRetry calls pipe again with eval when the script was refused with
// NOSCRIPT. It returns an error of the script as its error, wrapped by Moved (the client's slot
// map was stale), and then 0 acknowledgements.
func EvalWaitRetry(pipe func(eval bool) (script Result, acks int64, err error)) (Reply, int, error) {
	r, acks, err := pipe(false)
	if IsNoScript(r.Err) {
		r, acks, err = pipe(true)
	}
	if r.Err != nil {
		return Reply{}, 0, Moved(r.Err)
	}
	return r.Reply, int(acks), err
}

// WatchHooks returns conn as a PubSubConn that reports to events.Failed when done yields before
// Close: for a connection whose driver reports pub/sub through hooks and says on done (one
// value: nil or the error) that the hooks stopped, the connection being lost. Its Close closes
// conn and returns once the watcher has ended, so that nothing is reported after Close.
func WatchHooks(conn PubSubConn, done <-chan error, events PubSubEvents) PubSubConn {
	w := &watched{PubSubConn: conn, closed: make(chan struct{})}
	w.wg.Go(func() {
		select {
		case <-w.closed:
		case err := <-done:
			if err == nil {
				err = errPubSubClosed
			}
			events.Failed(err)
		}
	})
	return w
}

// watched is a PubSubConn with the watcher of its hooks.
type watched struct {
	PubSubConn
	closed chan struct{}
	wg     sync.WaitGroup
}

func (w *watched) Close() {
	close(w.closed)
	w.PubSubConn.Close()
	w.wg.Wait()
}

// Decoder is a driver's reply that decodes itself into Go values, as the rueidis family's
// results do (RedisResult, ValkeyResult): an int64, a string, an []any of them, or the error.
type Decoder interface {
	ToAny() (any, error)
}

// DecodedResults converts the replies of script calls with DecodedReply, one Result each.
func DecodedResults[D Decoder](replies []D) []Result {
	out := make([]Result, len(replies))
	for i, r := range replies {
		out[i].Reply, out[i].Err = DecodedReply(r.ToAny())
	}
	return out
}

// ScriptCalls converts calls to a driver's type of the same fields (rueidis.LuaExec,
// valkey.LuaExec), for its script object's batch call.
func ScriptCalls[T ~struct{ Keys, Args []string }](calls []Call) []T {
	out := make([]T, len(calls))
	for i, c := range calls {
		out[i] = T(c)
	}
	return out
}
