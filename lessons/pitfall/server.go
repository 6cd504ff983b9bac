package pitfall

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// epoch is the embedded server's clock at the start of every run: a fixed instant, so that
// timelines that print clock readings are the same from run to run.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Leases. On the embedded server time moves only when the script fast-forwards it, so
// leases can be the service's own 10 s. On a real server time is real: the lease the script
// lets run out is short (so the run stays fast), and every other lease is long (so that
// wall-clock time spent running the script can never expire a lease the script did not
// mean to expire).
const (
	embeddedLease  = 10 * time.Second
	realShortLease = 200 * time.Millisecond
	realLongLease  = 30 * time.Second
)

// server is the Redis a scene runs against, and its clock.
type server struct {
	network, addr string
	mini          *miniredis.Miniredis // nil for a real server
	clock         time.Time            // the embedded server's clock
	spy           *redis.Client        // unrecorded: the script's view, never an actor's
}

func embeddedServer() (*server, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	m.SetTime(epoch)
	return &server{network: "tcp", addr: m.Addr(), mini: m, clock: epoch, spy: newSpy("tcp", m.Addr())}, nil
}

func realServer(network, addr string) *server {
	return &server{network: network, addr: addr, spy: newSpy(network, addr)}
}

func newSpy(network, addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Network: network, Addr: addr, DisableIdentity: true, Protocol: 2, PoolSize: 2})
}

func (v *server) close() {
	_ = v.spy.Close()
	if v.mini != nil {
		v.mini.Close()
	}
}

// shortLease is the lease the script lets run out; lease is every other lease.
func (v *server) shortLease() time.Duration {
	if v.mini != nil {
		return embeddedLease
	}
	return realShortLease
}

// renewedLease is pitfall 7's lease, renewed every third of it. Its renewal variant runs the
// library's watchdog, which waits that third in real time whatever the server, so the lease
// is short on both; on a real server a renewal races the clock, and a third of 1.2 s leaves
// 800 ms for the watchdog's command to arrive.
func (v *server) renewedLease() time.Duration { return 6 * realShortLease }

func (v *server) lease() time.Duration {
	if v.mini != nil {
		return embeddedLease
	}
	return realLongLease
}

// now reads the server's clock (TIME): the "true" time that skewed client clocks are
// measured against.
func (v *server) now(ctx context.Context) (time.Time, error) {
	t, err := v.spy.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("TIME: %w", err)
	}
	return t, nil
}

// advance moves the server's clock forward by d: a fast-forward on the embedded server; on a
// real one, waiting until TIME has moved by d (a condition on the server's clock, not a
// guess at how long to sleep).
func (v *server) advance(ctx context.Context, d time.Duration) error {
	if v.mini != nil {
		v.mini.FastForward(d)
		v.clock = v.clock.Add(d)
		v.mini.SetTime(v.clock) // PXAT and TIME read this clock
		return nil
	}
	start, err := v.now(ctx)
	if err != nil {
		return err
	}
	return poll(ctx, 10*time.Second+d, func() (bool, error) {
		t, err := v.now(ctx)
		return !t.Before(start.Add(d)), err
	})
}

// errNoExpiry reports a key that has no TTL: its lease never runs out.
var errNoExpiry = errors.New("key has no TTL")

// expire lets key's lease run out and returns how long that took on the server's clock: the
// exact remaining PTTL fast-forwarded on the embedded server; on a real one, waiting until
// the key is actually gone (PTTL -2). It returns errNoExpiry, without waiting, for a key
// with no TTL, and 0 for a key that is already gone.
func (v *server) expire(ctx context.Context, key string) (time.Duration, error) {
	pttl, err := v.spy.PTTL(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("PTTL %s: %w", key, err)
	}
	switch {
	case pttl == -1:
		return 0, errNoExpiry
	case pttl < 0: // -2: gone
		return 0, nil
	}
	if v.mini != nil {
		return pttl, v.advance(ctx, pttl)
	}
	err = poll(ctx, 10*time.Second+pttl, func() (bool, error) {
		n, err := v.spy.Exists(ctx, key).Result()
		return n == 0, err
	})
	return pttl, err
}

// poll checks cond every millisecond until it holds, fails, or limit passes.
func poll(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("condition not met within %s: %w", limit, ctx.Err())
		case <-tick.C:
		}
	}
}

// Expire lets the lease on key run out (see server.expire) and records it.
func (s *Scene) Expire(key string) error {
	d, err := s.srv.expire(s.ctx, key)
	switch {
	case errors.Is(err, errNoExpiry):
		s.Note("time passes: %s has no TTL (PTTL -1): its lease never runs out", key)
		return nil
	case err != nil:
		return err
	case d == 0:
		s.Note("time passes: %s is already gone", key)
	default:
		s.Note("time passes (+%s): the lease on %s runs out", d, key)
	}
	return nil
}

// Advance moves the server's clock forward by d and records it.
func (s *Scene) Advance(d time.Duration, why string) error {
	if err := s.srv.advance(s.ctx, d); err != nil {
		return err
	}
	if why != "" {
		why = ": " + why
	}
	s.Note("time passes (+%s)%s", d, why)
	return nil
}

// Now reads the server's clock.
func (s *Scene) Now() (time.Time, error) { return s.srv.now(s.ctx) }

// ShortLease is the lease the script will let run out; Lease is every other lease.
func (s *Scene) ShortLease() time.Duration { return s.srv.shortLease() }

// Lease is the lease for locks the script does not expire.
func (s *Scene) Lease() time.Duration { return s.srv.lease() }

// Spy returns the script's own, unrecorded client (to inspect, never to take part).
func (s *Scene) Spy() *redis.Client { return s.srv.spy }

// cleanup deletes the keys of the scene's namespace on a shared real server.
func (s *Scene) cleanup() error {
	if s.srv.mini != nil || s.ns == "" {
		return nil
	}
	ctx := context.WithoutCancel(s.ctx)
	iter := s.srv.spy.Scan(ctx, 0, "*"+s.ns+"*", 100).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan %s keys: %w", s.ns, err)
	}
	if len(keys) > 0 {
		return s.srv.spy.Del(ctx, keys...).Err()
	}
	return nil
}

// Observe records whether key exists on the server right now, as the script sees it.
func (s *Scene) Observe(key, why string) error {
	n, err := s.srv.spy.Exists(s.ctx, key).Result()
	if err != nil {
		return fmt.Errorf("EXISTS %s: %w", key, err)
	}
	state := "exists"
	if n == 0 {
		state = "does not exist"
	}
	if why != "" {
		why = ": " + why
	}
	s.Note("on the server, %s %s%s", key, state, why)
	return nil
}
