package pitfall

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/seckill/seckill/internal/lock"
)

// lockKey is the Redis key that lock.SimpleRedisLock uses for name: the wrong locks share
// the fix's key, so that a run shows both on the same key.
func lockKey(name string) string { return lock.NewSimpleRedisLock(nil, "", name).Key() }

// owner is the value lock.SimpleRedisLock writes for the calling goroutine of process
// (process + "-" + goroutine id, hmdp's UUID + thread id): the wrong locks that read or write
// that value compute it the same way.
func owner(process string) string {
	return process + "-" + strconv.FormatUint(readGoroutineID(), 10)
}

// readGoroutineID reads the calling goroutine's id from the header line runtime.Stack writes
// ("goroutine 42 [running]:"), the only supported way: slower than the lock library's own
// reading, which a lesson running a few hundred commands does not notice.
func readGoroutineID() uint64 {
	var buf [32]byte
	var id uint64
	if _, err := fmt.Sscanf(string(buf[:runtime.Stack(buf[:], false)]), "goroutine %d ", &id); err != nil {
		panic("pitfall: cannot read the goroutine id from runtime.Stack: " + err.Error())
	}
	return id
}
