package locker

import (
	"testing"
	"time"
)

func TestValidUntilMargin(t *testing.T) {
	at := time.Unix(0, 0)
	for _, tc := range []struct{ ttl, want time.Duration }{
		{30 * time.Second, 30*time.Second - 302*time.Millisecond},
		{time.Second, time.Second - 12*time.Millisecond},
		{3 * time.Millisecond, 2 * time.Millisecond}, // the margin is at most a third
	} {
		if got := validUntil(at, tc.ttl).Sub(at); got != tc.want {
			t.Errorf("validUntil after %v = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

// Two operations that reset one hold's lease concurrently may reach the backend in either
// order, so the hold keeps the earlier expiry; a later, sequential one moves it either way.
func TestConfirmKeepsTheEarlierExpiryOfRacingOperations(t *testing.T) {
	t0 := time.Unix(100, 0)
	h := &hold{}
	h.confirm(0, 1, t0, 10*time.Second) // first acquisition
	start := h.seq
	// A renewal with a short TTL and a re-entry with a long one start together; the re-entry
	// is confirmed first.
	h.confirm(start, 2, t0.Add(time.Millisecond), 30*time.Second)
	h.confirm(start, 3, t0, time.Second)
	if want := validUntil(t0, time.Second); !h.validUntil.Equal(want) {
		t.Fatalf("racing operations: valid until %v, want the earlier %v", h.validUntil, want)
	}
	// Sequential: the next operation starts after the last confirmation.
	h.confirm(h.seq, 4, t0.Add(2*time.Second), 30*time.Second)
	if want := validUntil(t0.Add(2*time.Second), 30*time.Second); !h.validUntil.Equal(want) {
		t.Fatalf("sequential operation: valid until %v, want %v", h.validUntil, want)
	}
}
