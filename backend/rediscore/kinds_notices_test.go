package rediscore_test

import (
	"testing"
	"time"

	"github.com/hashlock/locker"
)

// A reader's grant that leaves readers at the head of the queue sends a notice (they may join),
// fair or not, on miniredis and on a real server (SPUBLISH); the grant of the last entry sends
// none. (TestKindsFairOrder checks the fair case among others, on miniredis only.)
func TestKindsReaderGrantNotice(t *testing.T) {
	onBoth(t, func(t *testing.T, e *kindEnv) {
		for _, fair := range []bool{false, true} {
			k := "{kinds}:join"
			if fair {
				k += ":fair"
			}
			e.acquire(t, locker.AcquireRequest{Key: k, Owner: "H", TTL: time.Minute})
			for _, owner := range []string{"A", "B"} {
				if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: owner, Shared: true, Fair: fair, Wait: time.Minute}); a.Holds != 0 {
					t.Fatalf("reader %s while H holds = %+v, want refused", owner, a)
				}
			}
			l := e.listen(t, k)
			e.release(t, locker.ReleaseRequest{Key: k, Owner: "H"}, 0)
			l.notice(t, k, "H's release")
			if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "A", Shared: true, Fair: fair, Wait: time.Minute}); a.Holds != 1 {
				t.Fatalf("reader A at the head of the queue = %+v, want granted", a)
			}
			l.notice(t, k, "the grant of a reader with a reader behind it")
			if a := e.acquire(t, locker.AcquireRequest{Key: k, Owner: "B", Shared: true, Fair: fair, Wait: time.Minute}); a.Holds != 1 {
				t.Fatalf("reader B = %+v, want granted", a)
			}
			l.none(t, "the grant of the last entry")
			if st := e.inspect(t, k); !st.Shared || st.Readers != 2 || st.Queued != 0 {
				t.Fatalf("Inspect = %+v, want readers A and B, nobody queued", st)
			}
		}
	})
}
