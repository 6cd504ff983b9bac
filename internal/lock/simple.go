package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

// keyPrefix begins every lock's Redis key: "lock:"+name for a SimpleRedisLock, as in hmdp.
const keyPrefix = "lock:"

var unlockScript = redis.NewScript(lua.Unlock)

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
type SimpleRedisLock struct {
	client  RedisClient
	key     string
	process string
	strays  *strays   // nil: a failed cleanup is not retried (a lock made by NewSimpleRedisLock)
	expires time.Time // of the lock this object's last TryLock took, at the latest
}

// NewSimpleRedisLock returns the lock named name (key "lock:"+name) for the given process id.
func NewSimpleRedisLock(client RedisClient, process, name string) *SimpleRedisLock {
	return &SimpleRedisLock{client: client, key: keyPrefix + name, process: process}
}

// Key returns the lock's Redis key.
func (l *SimpleRedisLock) Key() string { return l.key }

// ErrStrayPending is returned by TryLock while a lock this owner may hold from a lost reply
// (or an unanswered Unlock) still waits for its cleanup to be answered by Redis.
var ErrStrayPending = errors.New("lock: cleanup of a lost reply still pending")

// cleanupTimeout bounds the compare-and-delete that follows a SET NX without an answer.
const cleanupTimeout = 500 * time.Millisecond

// TryLock sets the key to this goroutine's owner value if it is absent, with expiry ttl, in
// one SET NX PX command. It reports false, nil when the key exists (another owner holds it).
//
// On an error (a timeout, a broken connection) the SET may still have reached Redis and
// taken the lock, with nobody to release it before ttl. So TryLock then deletes the key if,
// and only if, it holds the owner value it sent (unlock.lua), on a context of its own
// bounded by cleanupTimeout, and returns the SET's error: a lost reply does not strand the
// user's lock for a whole ttl. That cleanup is best effort: if Redis runs the SET only after
// it (a server frozen with both queued), the lock lives out its ttl. A lock made by
// SimpleRedisLocks.New also retries a cleanup that failed, in the background until it is
// answered or ttl has passed, and until then its TryLock returns ErrStrayPending to the same
// owner (the retried cleanup would delete the owner's new lock, whose value is the same): Redis
// has not answered it yet, so the caller treats it as Redis being unavailable.
func (l *SimpleRedisLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return false, ErrInvalidTTL
	}
	value := owner(l.process)
	if l.strays != nil && l.strays.holds(l.key, value) {
		return false, fmt.Errorf("lock %s: %w", l.key, ErrStrayPending)
	}
	sent := time.Now()
	ok, err := l.client.SetNX(ctx, l.key, value, ttl).Result()
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := unlockScript.Run(cctx, l.client, []string{l.key}, value).Err(); cerr != nil && l.strays != nil {
			l.strays.add(l.key, value, sent.Add(ttl))
		}
		return false, fmt.Errorf("lock %s: %w", l.key, err)
	}
	if ok {
		l.expires = sent.Add(ttl)
	}
	return ok, nil
}

// Unlock deletes the key only if it still holds this goroutine's owner value. It returns
// ErrNotHeld when it does not: the lock expired (and may now be someone else's), or it is
// called from a goroutine other than the one that took it. A lock made by
// SimpleRedisLocks.New whose Unlock got no answer retries it in the background, as TryLock
// does a failed cleanup.
func (l *SimpleRedisLock) Unlock(ctx context.Context) error {
	value := owner(l.process)
	n, err := unlockScript.Run(ctx, l.client, []string{l.key}, value).Int()
	if err != nil {
		if l.strays != nil && time.Now().Before(l.expires) {
			l.strays.add(l.key, value, l.expires)
		}
		return fmt.Errorf("unlock %s: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("unlock %s: %w", l.key, ErrNotHeld)
	}
	return nil
}
