package redigo_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/gomodule/redigo/redis"

	"github.com/hashlock/locker"
	redigolocker "github.com/hashlock/locker/backend/redigo"
)

// Keep your Redigo pool; lock on it. Bound the pool (MaxActive, Wait): waiting Locks share a few
// connections, but every concurrent call takes one.
func Example() {
	m, err := miniredis.Run() // a stand-in for your Redis: use your own address
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	pool := &redis.Pool{
		MaxIdle: 8, MaxActive: 64, Wait: true,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", m.Addr())
		},
	}
	defer pool.Close()

	client := locker.New(redigolocker.New(pool))
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
