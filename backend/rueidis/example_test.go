package rueidislocker_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/hashlock/locker"
	rueidislocker "github.com/hashlock/locker/backend/rueidis"
)

// Keep your rueidis client; lock on it.
func Example() {
	m, err := miniredis.Run() // a stand-in for your Redis: use your own address
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()},
		// For miniredis only: it has no client-side caching, and it answers CLUSTER SLOTS.
		DisableCache: true, ForceSingleClient: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	client := locker.New(rueidislocker.New(c))
	defer client.Close()

	lease, err := client.Lock(context.Background(), "invoice:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock()
	inner, _ := client.Lock(lease.Context(), "invoice:42") // re-entry
	defer inner.Unlock()
	fmt.Println("holds:", inner.Holds())
	// Output: holds: 2
}
