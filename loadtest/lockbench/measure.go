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
	name              string
	peer              bool
	pairs1, pairs32   float64 // uncontended acquire+release pairs/s
	acquisitions      float64 // contended acquisitions/s
	p50, p99          time.Duration
	commandsPerAcq    float64 // -1: not counted
	contendedErrors   int
	contendedError    error // the first
	uncontendedError  error // the first
	uncontendedErrors int
	setupError        error
	wakes             lock.Stats    // our locks' wake-ups in the contended run
	critical          time.Duration // mean time the lock was really held per acquisition
	// Fairness of the contended run.
	longest            time.Duration // the longest single wait
	longestAt          time.Duration // when it began, from the start of the run
	longestNth         int           // and which of its contender's waits it was (1 = the first)
	stall              time.Duration // the longest the process went unscheduled in that round
	longestLater       time.Duration // the longest wait but each contender's first (the start, when all arrive at once)
	minShare, maxShare float64       // the fewest and most acquisitions of one contender, ÷ a fair share
	jain               float64       // Jain's index of the contenders' acquisitions: 1 fair, 1/n one took all
}

// bench holds what every scenario shares.
type bench struct {
	env        *env
	duration   time.Duration
	critical   time.Duration
	sleep      bool // hold the lock with time.Sleep instead of spinning
	contenders int
}

func (b bench) measure(ctx context.Context, c contestant) run {
	r := run{name: c.name, peer: c.peer, commandsPerAcq: -1}
	var err error
	var n1, n32 int
	r.pairs1, n1, err = b.uncontended(ctx, c, 1)
	r.uncontendedError = err
	r.pairs32, n32, err = b.uncontended(ctx, c, 32)
	if r.uncontendedError == nil {
		r.uncontendedError = err
	}
	r.uncontendedErrors = n1 + n32
	b.contended(ctx, c, &r)
	return r
}

// uncontended counts acquire+release pairs per second by n goroutines, each on its own key,
// and the pairs that failed (an error, counted, and the goroutine goes on), with the first
// error.
func (b bench) uncontended(ctx context.Context, c contestant, n int) (float64, int, error) {
	in, err := c.setup(ctx, b.env)
	if err != nil {
		return 0, 1, err
	}
	defer in.close()
	keys := c.keys(b.env)
	// Warm up: load the scripts and fill the connection pool.
	if err := pairs(ctx, in.acquire, keys+"warm", 20); err != nil {
		return 0, 1, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	var total, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%su%d-%d", keys, n, g)
			for ctx.Err() == nil {
				release, err := in.acquire(ctx, key)
				if err == nil {
					err = release(context.WithoutCancel(ctx))
				}
				if err != nil {
					if !ended(ctx) {
						failed.Add(1)
						once.Do(func() { firstErr = err })
						_ = sleep(ctx, 10*time.Millisecond) // no hot loop on a failing backend
					}
					continue
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds(), int(failed.Load()), firstErr
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
	in, err := c.setup(ctx, b.env)
	if err != nil {
		r.setupError = err
		return
	}
	defer in.close()
	key := c.keys(b.env) + "contended"
	if err := pairs(ctx, in.acquire, key, 20); err != nil {
		r.contendedErrors++
		r.contendedError = err
		return
	}
	stats := in.stats
	if stats == nil {
		stats = func() lock.Stats { return lock.Stats{} }
	}
	var before int64
	if in.commands != nil {
		before = in.commands()
	}
	statsBefore := stats()
	ctx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	// The waits get a context without the run's deadline, canceled when the run ends: a lock
	// that bounds its wait by the deadline would otherwise wait less and less as the run ends.
	// MySQL reads GET_LOCK's timeout as whole seconds, so in a run's last second every waiter
	// was handed no server-side wait at all and polled instead (ours) or spun (the bare one):
	// the longest waits, 23-96x the median, all began in that second.
	waitCtx, stopWaits := untilDone(ctx)
	defer stopWaits()
	var mu sync.Mutex
	var latencies []time.Duration
	counts := make([]int, b.contenders)
	var errs int
	var held time.Duration
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	stall := watchStalls(ctx)
	start := time.Now()
	for g := range b.contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var failed int
			var myHeld time.Duration
			var myLongest, myLongestAt time.Duration
			var myLongestNth int
			var myLongestLater time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				release, err := in.acquire(waitCtx, key)
				if err != nil {
					if !cutByEnd(ctx, err) {
						failed++
						firstErr.CompareAndSwap(nil, &err)
						_ = sleep(ctx, 10*time.Millisecond) // no hot loop on a failing backend
					}
					continue
				}
				t1 := time.Now()
				mine = append(mine, t1.Sub(t0))
				if w := t1.Sub(t0); w > myLongest {
					myLongest, myLongestAt, myLongestNth = w, t0.Sub(start), len(mine)
				}
				if w := t1.Sub(t0); len(mine) > 1 {
					myLongestLater = max(myLongestLater, w)
				}
				b.hold()
				myHeld += time.Since(t1)
				if err := release(context.WithoutCancel(ctx)); err != nil {
					failed++
					firstErr.CompareAndSwap(nil, &err)
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			counts[g] = len(mine)
			r.longestLater = max(r.longestLater, myLongestLater)
			if myLongest > r.longest {
				r.longest, r.longestAt, r.longestNth = myLongest, myLongestAt, myLongestNth
			}
			errs += failed
			held += myHeld
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.stall = <-stall
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
	r.minShare, r.maxShare, r.jain = fairness(counts)
	st := stats()
	r.wakes = lock.Stats{
		WakesByPublish: st.WakesByPublish - statsBefore.WakesByPublish,
		WakesByLocal:   st.WakesByLocal - statsBefore.WakesByLocal,
		WakesByTimer:   st.WakesByTimer - statsBefore.WakesByTimer,
		Subscribes:     st.Subscribes - statsBefore.Subscribes,
		Unsubscribes:   st.Unsubscribes - statsBefore.Unsubscribes,
	}
	if in.commands != nil {
		pubsub := r.wakes.Subscribes + r.wakes.Unsubscribes
		r.commandsPerAcq = float64(in.commands()-before+int64(pubsub)) / float64(n)
	}
}

// watchStalls measures, until ctx ends, the longest gap between the wake-ups of a goroutine
// that sleeps 1 ms at a time: how long the process (or this goroutine) could go without
// being scheduled on the shared machine. A wait that long is the machine's, not the lock's.
func watchStalls(ctx context.Context) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		var longest time.Duration
		last := time.Now()
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond)
			now := time.Now()
			longest = max(longest, now.Sub(last))
			last = now
		}
		out <- longest
	}()
	return out
}

// fairness returns the smallest and largest count as a multiple of a fair share (the mean),
// and Jain's fairness index (Σx)² / (n·Σx²): 1 when every contender got as many, 1/n when
// one got them all.
func fairness(counts []int) (minShare, maxShare, jain float64) {
	var sum, sq float64
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
		lo, hi = min(lo, c), max(hi, c)
	}
	if sum == 0 {
		return 0, 0, 0
	}
	mean := sum / float64(len(counts))
	return float64(lo) / mean, float64(hi) / mean, sum * sum / (float64(len(counts)) * sq)
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
	m.contendedErrors, m.uncontendedErrors = 0, 0
	m.wakes = lock.Stats{}
	// Fairness: the worst round.
	for _, r := range rs {
		m.longestLater = max(m.longestLater, r.longestLater)
		if r.longest >= m.longest {
			m.longest, m.longestAt, m.longestNth, m.stall = r.longest, r.longestAt, r.longestNth, r.stall
		}
		m.minShare = min(m.minShare, r.minShare)
		m.maxShare = max(m.maxShare, r.maxShare)
		m.jain = min(m.jain, r.jain)
		if r.setupError != nil {
			m.setupError = r.setupError
		}
		m.contendedErrors += r.contendedErrors
		m.uncontendedErrors += r.uncontendedErrors
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

// ended reports whether the run is over: ctx is done or its deadline has come. go-redis sets
// the socket's deadline from ctx's, and it may fire a moment before ctx reports itself done.
// untilDone returns a context without ctx's deadline that is canceled when ctx is done.
func untilDone(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return c, func() { stop(); cancel() }
}

func ended(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(deadline)
}

// cutByEnd reports whether err is an attempt cut short by the end of the run: a timeout, or
// ctx's own error, once the run is over (go-redis reports a read cut by the deadline as a
// network timeout).
func cutByEnd(ctx context.Context, err error) bool {
	var ne net.Error
	return ended(ctx) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.As(err, &ne) && ne.Timeout())
}
