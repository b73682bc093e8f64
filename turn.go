package locker

import (
	"context"
	"time"
)

// A turn queues the Lock calls of one Client on one key locally. Its token goes to one call at a
// time: that call alone tries the backend, waits for notices, and keeps the token while it
// holds the lock; Unlock (or the lease's loss) hands it to the next call in line, which tries at
// once. The others wait on the channel, in arrival order, without a round trip. A turn exists
// only while some call waits or holds through it: an uncontended Lock never makes one.
type turn struct {
	token chan struct{} // holds the token while no call has it
	users int           // calls that hold or wait for the token; guarded by Client.turnMu

	// Local hand-offs (handoff.go), guarded by Client.turnMu: the gift offered with the token,
	// the hand-offs made in a row, and whether the next Unlock must release (others wait).
	gift  *gift
	gifts int
	yield bool
}

// queuedTurn returns the key's turn and joins it, if one exists (others wait or hold).
func (c *Client) queuedTurn(key string) *turn {
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	t := c.turns[key]
	if t != nil {
		t.users++
	}
	return t
}

// joinTurn joins the key's turn, making it (with its token free) if there is none.
func (c *Client) joinTurn(key string) *turn {
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	t := c.turns[key]
	if t == nil {
		t = &turn{token: make(chan struct{}, 1)}
		t.token <- struct{}{}
		c.turns[key] = t
	}
	t.users++
	return t
}

// leaveTurn leaves the key's turn, handing the token on when holding it.
func (c *Client) leaveTurn(key string, t *turn, holding bool) {
	if holding {
		t.token <- struct{}{} // never blocks: only the holder puts the token back
	}
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	if t.users--; t.users == 0 && c.turns[key] == t {
		delete(c.turns, key)
	}
	if g := t.gift; t.users == 0 && g != nil {
		t.gift = nil
		close(g.ready) // dropped: every waiter left before claiming it; the giver releases
	}
}

// takeTurn waits for the token. Waiting counts against the retry strategy as waiting for the
// lock would: each of its waits that passes without the token is a retry, and when the strategy
// gives up, so does the call. It returns the retries used. A call that must wait takes the
// backend queue entry that its refusal left out first (in the background): a release would
// grant it the key (Granter) while it does not listen. (An acquire whose outcome is unknown is
// left alone: its Dequeue could come first; the call sends it again when its turn comes.)
func (c *Client) takeTurn(ctx context.Context, r *request, t *turn) (int, error) {
	select {
	case <-t.token:
		return 0, nil
	default:
	}
	if r.grant > 0 && !r.pending {
		c.dequeue(r)
	}
	var w waiter
	defer w.stop()
	for retries := 0; ; retries++ {
		backoff, ok := r.cfg.retry.Backoff(retries)
		if !ok {
			return retries, &NotObtainedError{Key: r.key}
		}
		woken, _, err := w.wait(ctx, backoff, t.token, nil)
		if woken {
			return retries, nil
		}
		if err != nil {
			return retries, &NotObtainedError{Key: r.key, Err: err} // obtain says ErrClosed at Close
		}
	}
}

// waiter is the timer of a Lock that waits for a wake-up (a release notice, the local turn),
// its next try, or the end of its ctx, which also ends at Close (see callSet).
type waiter struct{ timer *time.Timer }

// wait waits for a value on wake or on grants (then woken, with the value of grants), for d,
// or for ctx to end (then err). A nil channel is never ready.
func (w *waiter) wait(ctx context.Context, d time.Duration, wake <-chan struct{}, grants <-chan string) (woken bool, grant string, err error) {
	if w.timer == nil {
		w.timer = time.NewTimer(max(d, 0))
	} else {
		w.timer.Reset(max(d, 0))
	}
	select {
	case <-wake:
		return true, "", nil
	case grant = <-grants:
		return true, grant, nil
	case <-w.timer.C:
		return false, "", nil
	case <-ctx.Done():
		return false, "", ctx.Err()
	}
}

// stop releases the timer.
func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
