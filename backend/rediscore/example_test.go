package rediscore_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/goredis"
	"github.com/hashlock/locker/backend/rediscore"
)

// Every adapter returns a *rediscore.Backend, configured by the options of this package; the
// companion keys of a lock are named here too.
func Example() {
	m, err := miniredis.Run() // a stand-in for your Redis: use your own client
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	var b *rediscore.Backend = goredis.New(rdb, rediscore.WithNoticeConns(4))
	client := locker.New(b, locker.WithFencing())
	defer client.Close()

	lease, err := client.Lock(context.Background(), "{invoice}:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock()
	fmt.Println("fenced:", lease.Token() > 0)
	fmt.Println("counter:", rediscore.FenceKey("{invoice}:42"))
	// Output:
	// fenced: true
	// counter: {invoice}:42:locker:fence
}
