package locker

import (
	"context"
	"fmt"
	"time"

	"github.com/hashlock/locker/internal/display"
)

// A turn queues the Lock calls of one Client on one key locally. Its token goes to one call at a
// time: that call alone tries the backend, waits for notices, and keeps the token while it
// holds the lock; Unlock (or the lease's loss) hands it to the next call in line, which tries at
// once. The others wait on the channel, in arrival order, without a round trip. A turn exists
// only while some call waits or holds through it: an uncontended Lock never makes one.
type turn struct {
	token chan struct{} // holds the token while no call has it
	users int           // calls that hold or wait for the token; guarded by Client.turnMu
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
}

// takeTurn waits for the token. Waiting counts against the retry strategy as waiting for the
// lock would: each of its waits that passes without the token is a retry, and when the strategy
// gives up, so does the call. It returns the retries used.
func (c *Client) takeTurn(ctx context.Context, r *request, t *turn) (int, error) {
	select {
	case <-t.token:
		return 0, nil
	default:
	}
	var timer *time.Timer
	for retries := 0; ; retries++ {
		backoff, ok := r.cfg.retry.Backoff(retries)
		if !ok {
			return retries, &NotObtainedError{Key: r.key}
		}
		if timer == nil {
			timer = time.NewTimer(max(backoff, 0))
			defer timer.Stop()
		} else {
			timer.Reset(max(backoff, 0))
		}
		select {
		case <-t.token:
			return retries, nil
		case <-timer.C:
		case <-ctx.Done():
			return retries, &NotObtainedError{Key: r.key, Err: ctx.Err()}
		case <-c.ctx.Done():
			return retries, fmt.Errorf("locker: lock %s: %w", display.Key(r.key), ErrClosed)
		}
	}
}
