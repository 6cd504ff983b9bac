package lock

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

// keyPrefix begins every lock's Redis key: "lock:"+name for a SimpleRedisLock, as in hmdp.
const keyPrefix = "lock:"

var (
	simpleLockScript = redis.NewScript(lua.SimpleLock)
	unlockScript     = redis.NewScript(lua.Unlock)
)

// RedisClient is the part of a go-redis client that SimpleRedisLock needs. *redis.Client,
// *redis.ClusterClient and redis.UniversalClient satisfy it.
type RedisClient interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// SimpleRedisLock is hmdp's SimpleRedisLock: SET key owner NX PX ttl to take it, and an
// atomic compare-and-delete script to release it. The owner value is the process id, "-" and
// the goroutine id (hmdp's UUID + thread id), read at TryLock and again at Unlock, so only
// the goroutine that took the lock can release it.
//
// One step beyond hmdp: the script that takes the lock also increments the name's grant
// counter, a key without expiry beside the lock key, and Token returns the value it got
// (Kleppmann's fencing token). Like MySQLLock, take one SimpleRedisLock per holder (New is
// cheap): Token reports the grant this value made last.
type SimpleRedisLock struct {
	client  RedisClient
	key     string
	counter string
	process string
	token   atomic.Int64
}

// NewSimpleRedisLock returns the lock named name (key "lock:"+name) for the given process id.
func NewSimpleRedisLock(client RedisClient, process, name string) *SimpleRedisLock {
	key := keyPrefix + name
	return &SimpleRedisLock{client: client, key: key, counter: fenceKey(key), process: process}
}

// fenceKey returns the grant counter's key of the lock key: in the same Redis Cluster hash
// slot, so that one script may touch both. A key with a hash tag of its own keeps it (the
// counter is key+":fence"); any other is hashed whole, which the tag "{"+key+"}" reproduces.
// (A key holding a "}" but no valid tag cannot be reproduced so; Cluster then refuses the
// script with CROSSSLOT, it never runs split across slots.)
func fenceKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + ":fence"
		}
	}
	return "{" + key + "}:fence"
}

// Key returns the lock's Redis key.
func (l *SimpleRedisLock) Key() string { return l.key }

// Token returns the fencing token of this value's current hold: larger than that of every
// earlier grant of the name, a takeover after an expiry included. It is 0 before the first
// grant and after Unlock.
func (l *SimpleRedisLock) Token() int64 { return l.token.Load() }

// cleanupTimeout bounds the compare-and-delete that follows a SET NX without an answer.
const cleanupTimeout = 500 * time.Millisecond

// TryLock sets the key to this goroutine's owner value if it is absent, with expiry ttl, in
// one script that runs SET NX PX and, when it took the key, INCR of the grant counter (the
// token). It reports false, nil when the key exists (another owner holds it).
//
// On an error (a timeout, a broken connection) the SET may still have reached Redis and
// taken the lock, with nobody to release it before ttl. So TryLock then deletes the key if,
// and only if, it holds the owner value it sent (unlock.lua), on a context of its own
// bounded by cleanupTimeout, and returns the SET's error: a lost reply does not strand the
// user's lock for a whole ttl. That cleanup is best effort: if Redis runs the SET only after
// it (a server frozen with both queued), the lock lives out its ttl.
func (l *SimpleRedisLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, ErrInvalidTTL
	}
	value := owner(l.process)
	token, err := simpleLockScript.Run(ctx, l.client, []string{l.key, l.counter}, value, ttl.Milliseconds()).Int64()
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = unlockScript.Run(cctx, l.client, []string{l.key}, value).Err()
		return false, fmt.Errorf("lock %s: %w", l.key, err)
	}
	if token == 0 {
		return false, nil
	}
	l.token.Store(token)
	return true, nil
}

// Unlock deletes the key only if it still holds this goroutine's owner value. It returns
// ErrNotHeld when it does not: the lock expired (and may now be someone else's), or it is
// called from a goroutine other than the one that took it.
func (l *SimpleRedisLock) Unlock(ctx context.Context) error {
	l.token.Store(0)
	n, err := unlockScript.Run(ctx, l.client, []string{l.key}, owner(l.process)).Int()
	if err != nil {
		return fmt.Errorf("unlock %s: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("unlock %s: %w", l.key, ErrNotHeld)
	}
	return nil
}
