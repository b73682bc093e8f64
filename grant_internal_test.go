package locker

import (
	"context"
	"testing"
	"time"
)

// takeGrant takes a grant without a call of its own only when no Dequeue of the owner was sent:
// one sent while the call waited in its Client's local turn may reach the backend after the
// grant and give it back, which only an Acquire would tell.
func TestTakeGrantAfterDequeue(t *testing.T) {
	c := New(nil) // takeGrant makes no backend call
	defer c.Close()
	for _, dequeued := range []bool{false, true} {
		r := &request{key: "k", full: "k", owner: "o", cfg: defaultConfig(), fresh: true, grant: 2 * time.Second,
			id: "x", idSent: time.Now(), dequeued: dequeued}
		l := c.takeGrant(context.Background(), r, "x")
		if got := l != nil; got == dequeued {
			t.Fatalf("takeGrant with a Dequeue sent = %v: took it = %v, want %v", dequeued, got, !dequeued)
		}
		if l != nil {
			c.forget(l)
		}
	}
}
