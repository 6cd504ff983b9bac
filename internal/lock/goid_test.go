package lock

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGoroutineIDAgreesWithRuntimeStack(t *testing.T) {
	if _, ok := fastGoroutineID(); !ok {
		t.Log("no fast goroutine id on this platform: goroutineID uses runtime.Stack")
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.Equal(t, stackGoroutineID(), goroutineID(), "goroutine id")
		}()
	}
	wg.Wait()
	assert.Equal(t, stackGoroutineID(), goroutineID(), "test goroutine id")
}

func TestGoroutineIDDiffersBetweenGoroutines(t *testing.T) {
	a := goroutineID()
	assert.Equal(t, a, goroutineID(), "stable within a goroutine")
	ids := make(chan uint64, 2)
	go func() { ids <- goroutineID() }()
	go func() { ids <- goroutineID() }()
	b, c := <-ids, <-ids
	assert.NotEqual(t, a, b)
	assert.NotEqual(t, b, c)
	assert.NotZero(t, b)
}

func BenchmarkGoroutineID(b *testing.B) {
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			goroutineID()
		}
	})
	b.Run("runtime.Stack", func(b *testing.B) {
		for b.Loop() {
			stackGoroutineID()
		}
	})
}
