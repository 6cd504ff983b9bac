package lock

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkUncontended measures one goroutine's acquire+release pairs on each server
// (loadtest/lockbench compares with other libraries).
func BenchmarkUncontended(b *testing.B) {
	for _, srv := range testenv.RedisServers(b) {
		for _, k := range kinds {
			b.Run(srv.Name+"/"+k.name, func(b *testing.B) {
				c := NewClient(srv.Client, Options{})
				defer c.Close()
				l := k.make(proc{c: c, r: NewRegistry(c)}, testenv.Unique("bench-"))
				ctx := context.Background()
				for b.Loop() {
					if ok, err := l.TryLockWait(ctx, -1, 10*time.Second); err != nil || !ok {
						b.Fatal(ok, err)
					}
					if err := l.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
