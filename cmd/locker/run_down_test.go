package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/internal/testkit/redistest"
)

// A run that waits for a key another owner holds, on a server that then goes down, stops
// waiting within seconds (the library's WithUnavailableTimeout, 5s) and exits 69 with the
// cause, not 1 (not obtained) and not after its -w of a minute.
func TestRunServerGoesDownWhileWaiting(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	url := "redis://" + srv.Addr
	holder := locker.New(goredis.New(redisClient(t, url)))
	defer holder.Close()
	if _, err := holder.Lock(context.Background(), "job"); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Once the run waits (its Lock is queued behind the holder), the server goes down.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if st, err := holder.Inspect(context.Background(), "job"); err == nil && st.Queued > 0 {
				break
			}
		}
		srv.Stop()
	}()
	tio := newIO("", false)
	start := time.Now()
	tio.exec(t, exitUnavailable, "run", "--redis", url, "-w", "60", "job", "true")
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the run took %v to stop after the server went down", took)
	}
	if !strings.Contains(tio.stderr.String(), "connection refused") {
		t.Fatalf("stderr %q, want the cause (connection refused)", tio.stderr)
	}
}
