package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// commandCounter is a go-redis hook counting the commands a client sends (a script run is
// one EVALSHA, whatever it calls inside).
type commandCounter struct{ n atomic.Int64 }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// run is one contestant's results.
type run struct {
	name             string
	peer             bool
	pairs1, pairs32  float64 // uncontended acquire+release pairs/s
	acquisitions     float64 // contended acquisitions/s
	p50, p99         time.Duration
	commandsPerAcq   float64
	contendedErrors  int
	contendedError   error // the first
	uncontendedError error
	wakes            lock.Stats    // our locks' wake-ups in the contended run
	critical         time.Duration // mean time the lock was really held per acquisition
}

// bench holds what every scenario shares.
type bench struct {
	addr       string
	duration   time.Duration
	critical   time.Duration
	sleep      bool // hold the lock with time.Sleep instead of spinning
	contenders int
	prefix     string
}

// newClient connects a fresh client with a command counter.
func (b bench) newClient() (*redis.Client, *commandCounter) {
	rdb := redis.NewClient(&redis.Options{Addr: b.addr, PoolSize: 64})
	h := &commandCounter{}
	rdb.AddHook(h)
	return rdb, h
}

func (b bench) measure(ctx context.Context, c contestant) run {
	r := run{name: c.name, peer: c.peer}
	var err error
	r.pairs1, err = b.uncontended(ctx, c, 1)
	if err == nil {
		r.pairs32, err = b.uncontended(ctx, c, 32)
	}
	r.uncontendedError = err
	b.contended(ctx, c, &r)
	return r
}

// uncontended counts acquire+release pairs per second by n goroutines, each on its own key.
func (b bench) uncontended(ctx context.Context, c contestant, n int) (float64, error) {
	rdb, _ := b.newClient()
	defer rdb.Close()
	acquire, _, cleanup := c.setup(rdb)
	defer cleanup()
	// Warm up: load the scripts and fill the connection pool.
	if err := pairs(ctx, acquire, b.prefix+"warm", 20); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%su%d-%d", b.prefix, n, g)
			for ctx.Err() == nil {
				release, err := acquire(ctx, key)
				if err == nil {
					err = release(context.WithoutCancel(ctx))
				}
				if err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds(), firstErr
}

func pairs(ctx context.Context, acquire acquireFunc, key string, n int) error {
	for range n {
		release, err := acquire(ctx, key)
		if err != nil {
			return err
		}
		if err := release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// contended runs b.contenders goroutines taking one key, each holding it for b.critical.
func (b bench) contended(ctx context.Context, c contestant, r *run) {
	rdb, counter := b.newClient()
	defer rdb.Close()
	acquire, stats, cleanup := c.setup(rdb)
	defer cleanup()
	key := b.prefix + "contended"
	if err := pairs(ctx, acquire, key, 20); err != nil {
		r.contendedErrors++
		return
	}
	before, statsBefore := counter.n.Load(), stats()
	ctx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	var mu sync.Mutex
	var latencies []time.Duration
	var errs int
	var held time.Duration
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range b.contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var failed int
			var myHeld time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				release, err := acquire(ctx, key)
				if err != nil {
					// An attempt cut by the end of the run is no failure; go-redis reports a
					// read cut by the context's deadline as a network timeout.
					var ne net.Error
					if ctx.Err() == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
						failed++
						firstErr.CompareAndSwap(nil, &err)
					}
					continue
				}
				t1 := time.Now()
				mine = append(mine, t1.Sub(t0))
				b.hold()
				myHeld += time.Since(t1)
				if err := release(context.WithoutCancel(ctx)); err != nil {
					failed++
					firstErr.CompareAndSwap(nil, &err)
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			errs += failed
			held += myHeld
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := len(latencies)
	r.contendedErrors = errs
	if e := firstErr.Load(); e != nil {
		r.contendedError = *e
	}
	if n == 0 {
		return
	}
	slices.Sort(latencies)
	r.acquisitions = float64(n) / elapsed.Seconds()
	r.critical = held / time.Duration(n)
	r.p50 = latencies[n*50/100]
	r.p99 = latencies[min(n*99/100, n-1)]
	st := stats()
	r.wakes = lock.Stats{
		WakesByPublish: st.WakesByPublish - statsBefore.WakesByPublish,
		WakesByLocal:   st.WakesByLocal - statsBefore.WakesByLocal,
		WakesByTimer:   st.WakesByTimer - statsBefore.WakesByTimer,
		Subscribes:     st.Subscribes - statsBefore.Subscribes,
		Unsubscribes:   st.Unsubscribes - statsBefore.Unsubscribes,
	}
	pubsub := r.wakes.Subscribes + r.wakes.Unsubscribes
	r.commandsPerAcq = float64(counter.n.Load()-before+int64(pubsub)) / float64(n)
}

// hold is the critical section.
func (b bench) hold() {
	if b.sleep {
		time.Sleep(b.critical)
		return
	}
	spin(b.critical)
}

// spin is the critical section: busy for d, as work is (it does not yield). time.Sleep
// cannot do 200 µs: a sleep that short lasts a millisecond or more on this machine.
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// roundTrip returns the median PING round trip on a fresh connection.
func roundTrip(ctx context.Context, addr string) (time.Duration, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	const n = 2000
	rtts := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	return rtts[n/2], nil
}

// criticalSection returns the mean duration the critical section really takes alone.
func (b bench) criticalSection() time.Duration {
	const n = 1000
	t0 := time.Now()
	for range n {
		b.hold()
	}
	return time.Since(t0) / n
}

// median returns a run whose every figure is the median of that figure over rs.
func median(rs []run) run {
	m := rs[0]
	pick := func(f func(r run) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.pairs1 = pick(func(r run) float64 { return r.pairs1 })
	m.pairs32 = pick(func(r run) float64 { return r.pairs32 })
	m.acquisitions = pick(func(r run) float64 { return r.acquisitions })
	m.p50 = time.Duration(pick(func(r run) float64 { return float64(r.p50) }))
	m.p99 = time.Duration(pick(func(r run) float64 { return float64(r.p99) }))
	m.commandsPerAcq = pick(func(r run) float64 { return r.commandsPerAcq })
	m.critical = time.Duration(pick(func(r run) float64 { return float64(r.critical) }))
	m.contendedErrors = 0
	m.wakes = lock.Stats{}
	for _, r := range rs {
		m.contendedErrors += r.contendedErrors
		if r.uncontendedError != nil {
			m.uncontendedError = r.uncontendedError
		}
		if r.contendedError != nil {
			m.contendedError = r.contendedError
		}
		m.wakes.WakesByLocal += r.wakes.WakesByLocal
		m.wakes.WakesByPublish += r.wakes.WakesByPublish
		m.wakes.WakesByTimer += r.wakes.WakesByTimer
		m.wakes.Subscribes += r.wakes.Subscribes
		m.wakes.Unsubscribes += r.wakes.Unsubscribes
	}
	return m
}
