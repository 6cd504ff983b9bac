package lock

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// NewProcessID returns a random identity for one process (or one service instance): a
// UUID without hyphens, as hmdp's SimpleRedisLock uses. Two instances must never share one.
func NewProcessID() string {
	return strings.ReplaceAll(uuid.NewString(), "-", "")
}

// goroutineID returns the id of the calling goroutine.
//
// Go deliberately hides goroutine ids; the only supported way to read one is the header line
// that runtime.Stack writes ("goroutine 42 [running]:"). That walks and formats the whole
// stack: on our 2-core machine, under load, 15 µs for a shallow stack and 47 µs twenty frames
// deep, called at every TryLock and Unlock: not cheap next to a loopback round trip. It is
// the Go analogue of Java's Thread.getId(), with a caveat Java lacks: a request in Go may run on several
// goroutines (a handler that hands work to a worker, an errgroup), and each has its own id.
// A lock keyed by goroutine id is held only by the goroutine that took it.
//
// On amd64 and arm64 it reads the id straight from the runtime's goroutine record instead,
// at an offset found at start-up by comparing with runtime.Stack (goid_fast.go): a few
// nanoseconds. Elsewhere, or if that calibration fails, it uses runtime.Stack.
func goroutineID() uint64 {
	if id, ok := fastGoroutineID(); ok {
		return id
	}
	return stackGoroutineID()
}

// stackGoroutineID parses the goroutine id from runtime.Stack's header line.
func stackGoroutineID() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	b := bytes.TrimPrefix(buf[:n], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("lock: cannot parse goroutine id from runtime.Stack: " + string(buf[:n]))
	}
	return id
}

// owner returns the lock value that identifies the calling goroutine of process:
// process + "-" + goroutine id.
func owner(process string) string {
	return process + "-" + strconv.FormatUint(goroutineID(), 10)
}
