package goredis_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
)

// Keep your go-redis client; lock on it.
func Example() {
	m, err := miniredis.Run() // a stand-in for your Redis: use your own client
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	client := locker.New(goredis.New(rdb))
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
