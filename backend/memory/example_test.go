package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/backend/memory"
)

// Code under test locks through a Client; its unit tests give it one on an in-memory backend:
// no server, and inside a testing/synctest bubble leases expire without waiting.
func Example() {
	client := locker.New(memory.New())
	defer client.Close()

	lease, err := client.Lock(context.Background(), "invoice:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.TryLock(context.Background(), "invoice:42") // another owner
	fmt.Println("another owner refused:", errors.Is(err, locker.ErrNotObtained))
	fmt.Println("unlock:", lease.Unlock())
	// Output:
	// another owner refused: true
	// unlock: <nil>
}
