package lock

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGoroutineIDAgreesWithRuntimeStack(t *testing.T) {
	if _, ok := fastGoroutineID(); !ok {
		t.Log("no fast goroutine id on this platform: GoroutineID uses runtime.Stack")
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.Equal(t, stackGoroutineID(), GoroutineID(), "goroutine id")
		}()
	}
	wg.Wait()
	assert.Equal(t, stackGoroutineID(), GoroutineID(), "test goroutine id")
}

func BenchmarkGoroutineID(b *testing.B) {
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			GoroutineID()
		}
	})
	b.Run("runtime.Stack", func(b *testing.B) {
		for b.Loop() {
			stackGoroutineID()
		}
	})
}
