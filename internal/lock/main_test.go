package lock

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any goroutine (a watchdog, a subscription's receive loop)
// outlives the tests that started it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
