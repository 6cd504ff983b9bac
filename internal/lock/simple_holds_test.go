package lock

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestHeldKeysForgetRunOutHolds: holds whose holder never unlocked leave the record once
// their lease has run out, at the sweep the map's growth brings, so a process whose
// goroutines forget to unlock does not grow it for ever; holds still running stay.
func TestHeldKeysForgetRunOutHolds(t *testing.T) {
	h := heldKeys{m: map[heldKey]time.Time{}}
	now := time.Now()
	h.add("live", "v", now.Add(time.Minute), now)
	for i := range minSweep - 2 {
		h.add(fmt.Sprint("gone-", i), "v", now.Add(time.Millisecond), now)
	}
	later := now.Add(time.Second)
	assert.Len(t, h.m, minSweep-1, "no sweep below minSweep")
	h.add("last", "v", later.Add(time.Minute), later)
	assert.Len(t, h.m, 2, "the sweep at minSweep keeps only the holds still running")
	assert.True(t, h.holds("live", "v", later))
	assert.False(t, h.holds("gone-0", "v", later))
	assert.False(t, h.holds("live", "v", now.Add(time.Minute)), "a hold is over when its lease has run out")
	h.drop("live", "v")
	assert.False(t, h.holds("live", "v", later), "an answered Unlock forgets the hold")
}
