package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRendezvousHoldsUntilASecondRequestIsInside: the first request of a user waits for the
// second, however long that takes within the bound, and both leave together.
func TestRendezvousHoldsUntilASecondRequestIsInside(t *testing.T) {
	r := newRendezvous(time.Hour) // never reached: only the meeting can release the first
	first := make(chan error, 1)
	go func() { first <- r.wait(context.Background(), 7) }()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.inside[7] != nil && r.inside[7].n == 1
	}, 5*time.Second, time.Millisecond, "the first request never got inside")
	select {
	case err := <-first:
		t.Fatalf("the first request left alone: %v", err)
	default:
	}

	require.NoError(t, r.wait(context.Background(), 7), "the second request is released at once")
	require.NoError(t, <-first)

	// Another user's pair meets the same way, and a meeting is forgotten once both left.
	// (A request's wait is bounded by ctx here so that a broken rendezvous fails the test
	// instead of hanging it.)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	third := make(chan error, 1)
	go func() { third <- r.wait(ctx, 8) }()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.inside[8] != nil
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, r.wait(ctx, 8))
	require.NoError(t, <-third)
	r.mu.Lock()
	assert.Empty(t, r.inside, "a meeting is forgotten once everyone left")
	r.mu.Unlock()
}

// TestRendezvousAloneWaitsItsBound: behind a working guard, a request is alone inside and
// leaves after the bound; other users' requests do not release it.
func TestRendezvousAloneWaitsItsBound(t *testing.T) {
	const bound = 30 * time.Millisecond
	r := newRendezvous(bound)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.wait(context.Background(), 8) // another user, inside at the same time
	}()
	start := time.Now()
	require.NoError(t, r.wait(context.Background(), 7))
	assert.GreaterOrEqual(t, time.Since(start), bound)
	<-done

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, newRendezvous(time.Hour).wait(ctx, 7), context.Canceled, "a gone request stops waiting")
}
