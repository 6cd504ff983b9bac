package pitfall

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/scripts/lua"
)

//go:embed lesson_renew.lua
var renewLua string

var (
	unlockScript = nameScript("unlock.lua", lua.Unlock, true)
	renewScript  = nameScript(renewName, renewLua, false)
)

const renewName = "lesson_renew.lua"

// tokenClient is what tokenLock needs from go-redis.
type tokenClient interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// tokenLock is the fix for pitfall 7 (renewal): SET NX PX with a random token drawn
// at each acquisition and kept in the lock value, so the holder is this handle, whichever
// goroutine uses it (a worker, a watchdog); compare-and-delete release; compare-and-renew.
// (Pitfall 7's fencing fix is lock.SimpleRedisLock's own token.)
type tokenLock struct {
	client  tokenClient
	key     string
	process string
	draw    func(process string) string // draws a fresh token; randomToken unless a scene names them

	token string // the lock value while held
}

func newTokenLock(c tokenClient, name, process string) *tokenLock {
	return &tokenLock{client: c, key: lockKey(name), process: process, draw: randomToken}
}

// randomToken returns process + ":" + 8 random hex digits.
func randomToken(process string) string { return process + ":" + randomHex(4) }

// TryLock takes the lock for ttl with a fresh token. It reports false, nil when another
// holder has it.
func (l *tokenLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	token := l.draw(l.process)
	ok, err := l.client.SetNX(ctx, l.key, token, ttl).Result()
	if err != nil || !ok {
		return false, err
	}
	l.token = token
	return true, nil
}

// Renew resets the lease to ttl if the lock is still ours. It reports false when the lease
// was already lost.
func (l *tokenLock) Renew(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := renewScript.Run(ctx, l.client, []string{l.key}, l.token, ttl.Milliseconds()).Int()
	return n == 1, err
}

// Unlock deletes the key only if it still holds our token; lock.ErrNotHeld otherwise.
func (l *tokenLock) Unlock(ctx context.Context) error {
	n, err := unlockScript.Run(ctx, l.client, []string{l.key}, l.token).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return lock.ErrNotHeld
	}
	return nil
}
