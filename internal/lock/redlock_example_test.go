package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

func ExampleRedLock() {
	ctx := context.Background()
	// Five independent Redis servers; in production, five machines (scripts/services.sh
	// starts five on 127.0.0.1:7001-7005 for development).
	var nodes []lock.RedisClient
	for range 5 {
		rdb, _, done := exampleRedis()
		defer done()
		nodes = append(nodes, rdb)
	}
	// NodeTimeout bounds each node's answer (default 50 ms, for nodes on a network of their
	// own); here the nodes share a test process with the other tests, so a second.
	opts := lock.RedLockOptions{NodeTimeout: time.Second}
	a := lock.NewRedLocks(nodes, lock.NewProcessID(), opts) // one per process
	b := lock.NewRedLocks(nodes, lock.NewProcessID(), opts) // another process

	l := a.RedLock("order:user:42")
	ok, err := l.TryLock(ctx, 10*time.Second)
	fmt.Println("taken:", ok, err, "valid:", l.Valid())
	// Until is the lease less the time taken less the drift allowance (100 ms + 2 ms here):
	// finish the work under the lock before it.
	fmt.Println("validity under 9.9s:", time.Until(l.Until()) < 9898*time.Millisecond)

	ok, _ = b.RedLock("order:user:42").TryLock(ctx, 10*time.Second)
	fmt.Println("another process:", ok)

	// The value is a token, not a goroutine id: any goroutine may release it.
	done := make(chan error)
	go func() { done <- l.Unlock(ctx) }()
	fmt.Println("unlock:", <-done, "valid:", l.Valid())
	fmt.Println("unlock again is ErrNotHeld:", errors.Is(l.Unlock(ctx), lock.ErrNotHeld))
	// Output:
	// taken: true <nil> valid: true
	// validity under 9.9s: true
	// another process: false
	// unlock: <nil> valid: false
	// unlock again is ErrNotHeld: true
}
