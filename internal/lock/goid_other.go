//go:build !amd64 && !arm64

package lock

// fastGoroutineID is unavailable here: goroutineID reads runtime.Stack.
func fastGoroutineID() (uint64, bool) { return 0, false }
