package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// exampleRedis starts an embedded Redis for an example; call the returned func when done.
func exampleRedis() (*redis.Client, *miniredis.Miniredis, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, mr, func() { _ = rdb.Close(); mr.Close() }
}

func ExampleSimpleRedisLock() {
	rdb, _, done := exampleRedis()
	defer done()
	ctx := context.Background()

	l := lock.NewSimpleRedisLock(rdb, lock.NewProcessID(), "order:user:42")
	ok, err := l.TryLock(ctx, 10*time.Second)
	fmt.Println("taken:", ok, err)
	other := lock.NewSimpleRedisLock(rdb, lock.NewProcessID(), "order:user:42")
	ok, _ = other.TryLock(ctx, 10*time.Second)
	fmt.Println("another process:", ok)
	fmt.Println("unlock:", l.Unlock(ctx))
	fmt.Println("unlock again is ErrNotHeld:", errors.Is(l.Unlock(ctx), lock.ErrNotHeld))
	// Output:
	// taken: true <nil>
	// another process: false
	// unlock: <nil>
	// unlock again is ErrNotHeld: true
}

func ExampleReentrantLock() {
	rdb, _, done := exampleRedis()
	defer done()
	ctx := context.Background()
	a := lock.NewClient(rdb, lock.Options{}) // one per process
	defer a.Close()
	b := lock.NewClient(rdb, lock.Options{}) // another process
	defer b.Close()

	l := a.ReentrantLock("voucher:7")
	_ = l.Lock(ctx) // waits as long as ctx allows; the watchdog keeps the lock
	_ = l.Lock(ctx) // the holder re-enters
	fmt.Println("holds:", rdb.HVals(ctx, l.Key()).Val())

	got := make(chan bool)
	go func() {
		// Waits up to 5 s on the release message, not by polling; then a fixed 1 s lease.
		ok, _ := b.ReentrantLock("voucher:7").TryLockWait(ctx, 5*time.Second, time.Second)
		got <- ok
	}()
	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx) // the last unlock deletes the hash and publishes the release
	fmt.Println("other process got it:", <-got)
	// Output:
	// holds: [2]
	// other process got it: true
}

func ExampleFairLock() {
	rdb, _, done := exampleRedis()
	defer done()
	ctx := context.Background()
	c := lock.NewClient(rdb, lock.Options{})
	defer c.Close()

	l := c.FairLock("flash-sale")
	if ok, err := l.TryLockWait(ctx, time.Second, 30*time.Second); ok && err == nil {
		fmt.Println("first in line")
		_ = l.Unlock(ctx)
	}
	// Output:
	// first in line
}

func ExampleRegistry() {
	rdb, mr, done := exampleRedis()
	defer done()
	ctx := context.Background()
	c := lock.NewClient(rdb, lock.Options{})
	defer c.Close()
	registry := lock.NewRegistry(c)

	l := registry.Obtain("stock:7")
	ok, _ := l.TryLockWait(ctx, 0, 100*time.Millisecond)
	fmt.Println("taken:", ok)
	mr.FastForward(time.Second) // the holder stalls past its lease
	err := l.Unlock(ctx)
	fmt.Println(err)
	fmt.Println("is ErrLockLost:", errors.Is(err, lock.ErrLockLost), "is ErrNotHeld:", errors.Is(err, lock.ErrNotHeld))
	// Output:
	// taken: true
	// unlock lock:{stock:7}:registry: lock: released in the store due to expiration, the integrity of data protected by this lock may have been compromised: lock: not held by this owner
	// is ErrLockLost: true is ErrNotHeld: true
}

func ExampleNewReentrantLocks() {
	rdb, _, done := exampleRedis()
	defer done()
	ctx := context.Background()
	c := lock.NewClient(rdb, lock.Options{})
	defer c.Close()
	var guards interface{ New(string) lock.Lock } = lock.NewReentrantLocks(c)

	l := guards.New("order:user:42") // the order service's guard shape
	// Tries once; while held, the watchdog renews the 5 s lease every 5/3 s.
	ok, err := l.TryLock(ctx, 5*time.Second)
	fmt.Println(ok, err)
	pttl := rdb.PTTL(ctx, "lock:{order:user:42}:reentrant").Val()
	fmt.Println("lease set:", pttl > 0 && pttl <= 5*time.Second)
	fmt.Println(l.Unlock(ctx))
	// Output:
	// true <nil>
	// lease set: true
	// <nil>
}

func ExampleNewSimpleRedisLocks() {
	rdb, _, done := exampleRedis()
	defer done()
	ctx := context.Background()
	guards := lock.NewSimpleRedisLocks(rdb, lock.NewProcessID(), lock.SimpleRedisOptions{}) // one per process

	l := guards.New("order:user:42")
	ok, err := l.TryLock(ctx, 10*time.Second) // a fixed lease: SET NX PX 10000
	fmt.Println(ok, err)
	ok, _ = guards.New("order:user:42").TryLock(ctx, 10*time.Second)
	fmt.Println("again:", ok)
	fmt.Println(l.Unlock(ctx))
	// Output:
	// true <nil>
	// again: false
	// <nil>
}
