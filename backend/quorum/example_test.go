package quorum_test

import (
	"context"
	"fmt"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
	"github.com/hashlock/locker/backend/quorum"
)

// A lock over three independent nodes: here in-memory ones; in production one Redis backend per
// independent master, of any driver (goredis.New, rueidislocker.New, redigo.New).
func ExampleNew() {
	b := quorum.New(memory.New(), memory.New(), memory.New())
	client := locker.New(b, locker.WithFencing())
	defer client.Close()

	lease, err := client.Lock(context.Background(), "invoice:42")
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	defer lease.Unlock()
	fmt.Println("majority:", b.Majority(), "holds:", lease.Holds(), "token:", lease.Token())
	// Output: majority: 2 holds: 1 token: 1
}
