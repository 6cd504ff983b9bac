package lock

import (
	"context"
	"math/rand/v2"
	"time"
)

// retry is the waiting loop of the locks that poll (MySQLLock, RedLock): it calls try until
// try reports true, wait runs out or ctx ends, sleeping for pause() between calls. wait == 0
// calls try once, wait < 0 waits as long as ctx allows. An error of try ends the loop unless
// retryable (nil: none is) says to go on; the last such error is returned when wait runs
// out. The end of ctx returns ctx's error.
func retry(ctx context.Context, wait time.Duration, pause func() time.Duration, retryable func(error) bool, try func() (bool, error)) (bool, error) {
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		ok, err := try()
		if ok || wait == 0 || (err != nil && (retryable == nil || !retryable(err))) {
			return ok, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		d := pause()
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return false, err
			}
			d = min(d, left)
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return false, ctx.Err()
		}
	}
}

// jitter draws a pause from [d/2, 3d/2), so that contenders that failed together do not
// retry together.
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d) }

// backoff returns pauses for retry: jittered around base at first, the mean doubling with
// each pause up to maxDelay.
func backoff(base, maxDelay time.Duration) func() time.Duration {
	d := base
	return func() time.Duration {
		p := jitter(d)
		d = min(2*d, maxDelay)
		return p
	}
}
