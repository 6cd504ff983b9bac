package lock

import (
	"context"
	"errors"
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
	unlockScript      = redis.NewScript(lua.Unlock)
	fenceReseedScript = redis.NewScript(lua.FenceReseed)
)

// RedisClient is the part of a go-redis client that SimpleRedisLock needs. *redis.Client,
// *redis.ClusterClient and redis.UniversalClient satisfy it.
type RedisClient interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// SimpleRedisLock is hmdp's SimpleRedisLock: SET key owner NX PX ttl to take it, and an
// atomic compare-and-delete script to release it. The owner value is the process id, "-" and
// the goroutine id (hmdp's UUID + thread id), read at TryLock and again at Unlock, so only
// the goroutine that took the lock can release it.
//
// One step beyond hmdp: the SET NX goes in one MULTI/EXEC transaction with an INCR of the
// name's counter, a key in the lock key's hash slot kept a day after each attempt
// (fenceCounterTTL), and when the SET took the lock Token returns the value the INCR got
// (Kleppmann's fencing token); a lock of SimpleRedisLocks made with
// SimpleRedisOptions.NoTokens leaves the transaction and the counter out. The transaction
// runs both at one point of Redis's order of commands, so a later grant always gets a larger
// value; failed attempts increment the counter too, which leaves gaps and changes nothing.
// A grant whose INCR found the counter gone (it answers below fenceFloor) takes its token
// from fence_reseed.lua instead, one more round trip, which starts the counter again at
// Redis's clock; a grant whose lease ran out before that round trip (an instance starved for
// longer than the lease) takes the lock again there if nobody took it meanwhile. (Not a Lua
// script every time: the embedded Redis, miniredis, builds a Lua VM for every EVAL, which made
// each embedded TryLock several times slower.) Like MySQLLock, take one SimpleRedisLock per
// holder (New is cheap): Token reports the grant this value made last.
type SimpleRedisLock struct {
	client  RedisClient
	key     string
	counter string
	process string
	strays  *strays // nil: a failed cleanup is not retried (a lock made by NewSimpleRedisLock)
	// reseed starts a grant counter that Redis lost again from Redis's clock
	// (fence_reseed.lua); false: such a counter starts again at 1 (a lock made by
	// NewSimpleRedisLock, as the lessons use it).
	reseed bool
	// clock is the process's clock, which times the lease the lock took (expires): time.Now,
	// or a test's. Tokens never depend on it, since instances' clocks differ.
	clock   func() time.Time
	expires time.Time // of the lock this object's last TryLock took, at the latest
	token   atomic.Int64
	// noTokens: a bare SET NX PX, no grant counter (SimpleRedisOptions.NoTokens).
	noTokens bool
}

// NewSimpleRedisLock returns the lock named name (key "lock:"+name) for the given process id.
func NewSimpleRedisLock(client RedisClient, process, name string) *SimpleRedisLock {
	key := keyPrefix + name
	return &SimpleRedisLock{client: client, key: key, counter: fenceKey(key), process: process, clock: time.Now}
}

// fenceKey returns the grant counter's key of the lock key: in the same Redis Cluster hash
// slot, so that one script or transaction may touch both. A key with a hash tag of its own keeps it (the
// counter is key+":fence"); any other is hashed whole, which the tag "{"+key+"}" reproduces.
// (A key holding a "}" but no valid tag cannot be reproduced so; Cluster then refuses the
// transaction with CROSSSLOT, it never runs split across slots.)
func fenceKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key + ":fence"
		}
	}
	return "{" + key + "}:fence"
}

// fenceCounterTTL is how long a name's grant counter outlives its last grant. Without it every
// name ever locked (a user, in the service) would keep a counter in Redis for ever. A counter
// that expired starts again from Redis's clock (its TIME, in microseconds), as one that Redis
// lost does, and the clock has moved on by far more than the counter's grants: every later
// token is still larger. A lock made by NewSimpleRedisLock, which does not reseed, keeps its
// counter for ever.
const fenceCounterTTL = 24 * time.Hour

// fenceFloor is below every token of a counter seeded from a clock in microseconds (any time
// since September 2001): a SimpleRedisLock's INCR that answers less found the counter gone
// and started it again at 1, and the grant reseeds it (fence_reseed.lua).
const fenceFloor = 1_000_000_000_000_000

// Key returns the lock's Redis key.
func (l *SimpleRedisLock) Key() string { return l.key }

// ErrStrayPending is returned by TryLock while a lock this owner may hold from a lost reply
// (or an unanswered Unlock) still waits for its cleanup to be answered by Redis.
var ErrStrayPending = errors.New("lock: cleanup of a lost reply still pending")

// Token returns the fencing token of this value's current hold: larger than that of every
// earlier grant of the name, a takeover after an expiry included. It is 0 before the first
// grant, after Unlock, and always for a lock made with SimpleRedisOptions.NoTokens.
func (l *SimpleRedisLock) Token() int64 { return l.token.Load() }

// cleanupTimeout bounds the compare-and-delete that follows a SET NX without an answer.
const cleanupTimeout = 500 * time.Millisecond

// TryLock sets the key to this goroutine's owner value if it is absent, with expiry ttl, by
// SET NX PX in one MULTI/EXEC with INCR of the grant counter (the token when the SET took
// the key; with SimpleRedisOptions.NoTokens, the SET alone). It reports false, nil when the
// key exists (another owner holds it).
//
// On an error (a timeout, a broken connection) the SET may still have reached Redis and
// taken the lock, with nobody to release it before ttl. So TryLock then deletes the key if,
// and only if, it holds the owner value it sent (unlock.lua), on a context of its own
// bounded by cleanupTimeout, and returns the SET's error: a lost reply does not strand the
// user's lock for a whole ttl. It deletes nothing when the calling goroutine held the key
// before the attempt, through this lock or any other SimpleRedisLock of the process (the
// lock is not reentrant; code that takes it twice meets this): the SET NX found the key and
// did nothing, and the key is the earlier hold, whose holder is still at work. The process
// keeps the record of its goroutines' holds for that, from a grant until its Unlock is
// answered or its ttl has passed. That cleanup is best effort: if Redis runs the SET only after
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
	took, token, sent, err := l.set(ctx, value, ttl)
	if err != nil {
		if simpleHolds.holds(l.key, value, l.clock()) {
			return false, fmt.Errorf("lock %s: %w", l.key, err)
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := unlockScript.Run(cctx, l.client, []string{l.key}, value).Err(); cerr != nil && l.strays != nil {
			l.strays.add(l.key, value, sent.Add(ttl))
		}
		return false, fmt.Errorf("lock %s: %w", l.key, err)
	}
	if !took {
		return false, nil
	}
	l.expires = sent.Add(ttl)
	l.token.Store(token)
	simpleHolds.add(l.key, value, l.expires, sent)
	return true, nil
}

// set runs the SET NX PX of TryLock, in one MULTI/EXEC with the grant counter's INCR unless
// noTokens, and reports whether it took the key, the counter's new value, and when it sent the
// last command that may have set the key's lease (on the process's clock; the reseed script
// sets it when the lease ran out before it): TryLock counts the hold's expiry from then.
func (l *SimpleRedisLock) set(ctx context.Context, value string, ttl time.Duration) (bool, int64, time.Time, error) {
	sent := l.clock()
	if l.noTokens {
		took, err := l.client.SetNX(ctx, l.key, value, ttl).Result()
		return took, 0, sent, err
	}
	var set *redis.BoolCmd
	var incr *redis.IntCmd
	_, err := l.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetNX(ctx, l.key, value, ttl)
		incr = p.Incr(ctx, l.counter)
		if l.reseed {
			p.PExpire(ctx, l.counter, fenceCounterTTL)
		}
		return nil
	})
	if err == nil {
		err = incr.Err()
	}
	if err != nil || !set.Val() || !l.reseed || incr.Val() >= fenceFloor {
		return set.Val(), incr.Val(), sent, err
	}
	// The counter was gone: this grant's INCR started it at 1, below the tokens it had handed
	// out. Take the token from a counter started again at Redis's clock.
	// A lease that ran out before the script is taken again there, with a whole lease from
	// then: the hold's expiry counts from this send.
	sent = l.clock()
	token, err := fenceReseedScript.Run(ctx, l.client, []string{l.key, l.counter}, value, fenceTTLArg, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, 0, sent, fmt.Errorf("reseed %s: %w", l.counter, err)
	}
	return token > 0, token, sent, nil // 0: the lease ran out and another owner took the lock
}

// Unlock deletes the key only if it still holds this goroutine's owner value. It returns
// ErrNotHeld when it does not: the lock expired (and may now be someone else's), or it is
// called from a goroutine other than the one that took it. A lock made by
// SimpleRedisLocks.New whose Unlock got no answer retries it in the background, as TryLock
// does a failed cleanup.
func (l *SimpleRedisLock) Unlock(ctx context.Context) error {
	l.token.Store(0)
	value := owner(l.process)
	n, err := unlockScript.Run(ctx, l.client, []string{l.key}, value).Int()
	if err != nil {
		if l.strays != nil && l.clock().Before(l.expires) {
			l.strays.add(l.key, value, l.expires)
		}
		return fmt.Errorf("unlock %s: %w", l.key, err)
	}
	simpleHolds.drop(l.key, value) // no longer held, whether it was before
	if n == 0 {
		return fmt.Errorf("unlock %s: %w", l.key, ErrNotHeld)
	}
	return nil
}
