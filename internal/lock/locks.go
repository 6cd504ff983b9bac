package lock

// The families a service picks its guard from. Each is made by its NewXxxLocks function, and
// its New(name) returns the Lock of that name.

// SimpleRedisLocks makes one process's SimpleRedisLocks.
type SimpleRedisLocks struct {
	client  RedisClient
	process string
	strays  *strays
	opts    SimpleRedisOptions
}

// SimpleRedisOptions tunes NewSimpleRedisLocks. The zero value is what the lessons show:
// every grant gets a fencing token.
type SimpleRedisOptions struct {
	// NoTokens takes a lock with a bare SET NX PX, as hmdp and bsm/redislock do, instead of a
	// MULTI/EXEC that also counts the name's grants: one command for Redis instead of five, and
	// no grant counter kept per name. Token then returns 0. For a caller that checks no
	// fencing tokens (the service with SECKILL_FENCING=off).
	NoTokens bool
}

// NewSimpleRedisLocks returns the SimpleRedisLocks of process (from NewProcessID, one per
// process or service instance) on client. Its locks share the retries of the cleanups that
// failed after a lost reply (see SimpleRedisLock.TryLock).
func NewSimpleRedisLocks(client RedisClient, process string, opts SimpleRedisOptions) *SimpleRedisLocks {
	return &SimpleRedisLocks{client: client, process: process, strays: newStrays(client), opts: opts}
}

// New returns the SimpleRedisLock named name.
func (s *SimpleRedisLocks) New(name string) Lock {
	l := NewSimpleRedisLock(s.client, s.process, name)
	l.strays, l.reseed, l.noTokens = s.strays, true, s.opts.NoTokens
	return l
}

// ReentrantLocks makes a Client's ReentrantLocks.
type ReentrantLocks struct{ c *Client }

// NewReentrantLocks returns the ReentrantLocks of c.
func NewReentrantLocks(c *Client) *ReentrantLocks { return &ReentrantLocks{c: c} }

// New returns the ReentrantLock named name.
func (f *ReentrantLocks) New(name string) Lock { return f.c.ReentrantLock(name) }

// FairLocks makes a Client's FairLocks. Through Lock, a FairLock tries once without
// queueing: it behaves as a ReentrantLock that also respects waiters queued elsewhere by Lock
// or TryLockWait.
type FairLocks struct{ c *Client }

// NewFairLocks returns the FairLocks of c.
func NewFairLocks(c *Client) *FairLocks { return &FairLocks{c: c} }

// New returns the FairLock named name.
func (f *FairLocks) New(name string) Lock { return f.c.FairLock(name) }

// LocalRemoteLocks makes a Registry's LocalRemoteLocks. Through Lock, trying once fails at
// once, without asking Redis, when another goroutine of this process holds the name.
type LocalRemoteLocks struct{ r *Registry }

// NewLocalRemoteLocks returns the LocalRemoteLocks of r.
func NewLocalRemoteLocks(r *Registry) *LocalRemoteLocks { return &LocalRemoteLocks{r: r} }

// New returns the LocalRemoteLock named name.
func (f *LocalRemoteLocks) New(name string) Lock { return f.r.Obtain(name) }

// Every lock of the package is a Lock.
var (
	_ Lock = (*SimpleRedisLock)(nil)
	_ Lock = (*ReentrantLock)(nil)
	_ Lock = (*FairLock)(nil)
	_ Lock = (*LocalRemoteLock)(nil)
	_ Lock = (*MySQLLock)(nil)
	_ Lock = (*MySQLGetLock)(nil)
	_ Lock = (*ZooKeeperLock)(nil)
	_ Lock = (*EtcdLock)(nil)
)

// The locks that issue fencing tokens.
var (
	_ Fenced = (*SimpleRedisLock)(nil)
	_ Fenced = (*ReentrantLock)(nil)
	_ Fenced = (*FairLock)(nil)
	_ Fenced = (*LocalRemoteLock)(nil)
	_ Fenced = (*MySQLLock)(nil)
	_ Fenced = (*ZooKeeperLock)(nil)
	_ Fenced = (*EtcdLock)(nil)
)
