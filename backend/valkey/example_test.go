package valkeylocker_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/valkey-io/valkey-go"

	"github.com/hashlock/locker"
	valkeylocker "github.com/hashlock/locker/backend/valkey"
)

// Keep your valkey-go client (on Valkey or Redis); lock on it.
func Example() {
	m, err := miniredis.Run() // a stand-in for your server: use your own address
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	c, err := valkey.NewClient(valkey.ClientOption{
		InitAddress: []string{m.Addr()},
		// For miniredis only: it has no client-side caching, and it answers CLUSTER SLOTS.
		DisableCache: true, ForceSingleClient: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	client := locker.New(valkeylocker.New(c))
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
