package lock

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// NewProcessID returns a random identity for one process (or one service instance): a
// UUID without hyphens, as in article 003. Two instances must never share one.
func NewProcessID() string {
	return strings.ReplaceAll(uuid.NewString(), "-", "")
}

// GoroutineID returns the id of the calling goroutine.
//
// Go deliberately hides goroutine ids; the only supported way to read one is the header line
// that runtime.Stack writes ("goroutine 42 [running]:"). That costs about a microsecond and
// one small stack buffer, cheap next to a Redis round trip but not free. It is the Go analogue
// of Java's Thread.getId(), with a caveat Java lacks: a request in Go may run on several
// goroutines (a handler that hands work to a worker, an errgroup), and each has its own id.
// A lock keyed by goroutine id is held only by the goroutine that took it.
func GoroutineID() uint64 {
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

// Owner returns the lock value that identifies the calling goroutine of process:
// process + "-" + goroutine id.
func Owner(process string) string {
	return process + "-" + strconv.FormatUint(GoroutineID(), 10)
}
