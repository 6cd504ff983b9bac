package api

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// ReadyInterval is how often an instance runs its readiness checks in the background.
const ReadyInterval = time.Second

const (
	// readyCheckTimeout bounds each check: shorter than ReadyInterval, so that a store that
	// hangs is reported within one interval and one round of checks ends before the next.
	readyCheckTimeout = 800 * time.Millisecond
	// readyStaleAfter is the age past which a result no longer counts: /readyz answers 503
	// when the checks have stopped running (five intervals missed), rather than vouch for
	// stores with a result from long ago.
	readyStaleAfter = 5 * ReadyInterval
)

// Readiness runs the readiness checks in the background and keeps their last result, which
// GET /readyz returns. The handler itself touches no store: under load, a check run by the
// probe's request would queue behind the very orders it is judging and time out, and the
// instance would be pulled out of rotation for being busy.
type Readiness struct {
	log     *slog.Logger
	checks  map[string]Check
	names   []string
	timeout time.Duration
	now     func() time.Time

	last atomic.Pointer[readyResult]
	mu   sync.Mutex // serialises Refresh, so that transitions are logged once and in order
	stop context.CancelFunc
	done chan struct{}
}

// readyResult is one round of checks: when it started and each check's answer.
type readyResult struct {
	at     time.Time
	errs   map[string]error // nil error: the check passed
	failed bool
}

// NewReadiness returns a Readiness over checks, by name. It has no result until the first
// Refresh (or Start): until then /readyz answers 503. Every check must honour its context.
func NewReadiness(log *slog.Logger, checks map[string]Check) *Readiness {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return &Readiness{log: log, checks: checks, names: names, timeout: readyCheckTimeout, now: time.Now}
}

// Refresh runs every check once, all at once, each bounded by its own timeout, and keeps the
// result. It logs a check that starts failing or recovers, not every failure.
func (r *Readiness) Refresh(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &readyResult{at: r.now(), errs: make(map[string]error, len(r.names))}
	errs := make([]error, len(r.names))
	var wg sync.WaitGroup
	for i, n := range r.names {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, r.timeout)
			defer cancel()
			errs[i] = r.checks[n](cctx)
		})
	}
	wg.Wait()
	prev := r.last.Load()
	for i, n := range r.names {
		res.errs[n] = errs[i]
		res.failed = res.failed || errs[i] != nil
		wasOK := prev == nil || prev.errs[n] == nil
		switch {
		case errs[i] != nil && wasOK:
			r.log.Warn("not ready", "check", n, "err", errs[i])
		case errs[i] == nil && !wasOK:
			r.log.Info("ready again", "check", n)
		}
	}
	r.last.Store(res)
}

// Run refreshes on every tick until ctx is done.
func (r *Readiness) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			r.Refresh(ctx)
		}
	}
}

// Start checks once, then every interval in the background until Close. It returns after
// the first round, so that a new instance's /readyz answers from the start.
func (r *Readiness) Start(interval time.Duration) {
	r.Refresh(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	ticker := time.NewTicker(interval)
	r.stop, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		defer ticker.Stop()
		r.Run(ctx, ticker.C)
	}()
}

// Close stops what Start started and waits for a round in progress to end. It always
// returns nil.
func (r *Readiness) Close() error {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
	return nil
}

// answer is /readyz's status and body: the last result with its age; 503 when there is
// none yet, when it is stale, or when a check failed. A nil Readiness has no checks and is
// always ready.
func (r *Readiness) answer() (int, gin.H) {
	if r == nil {
		return http.StatusOK, gin.H{"ready": true, "checks": gin.H{}}
	}
	res := r.last.Load()
	if res == nil {
		return http.StatusServiceUnavailable, gin.H{"ready": false, "checks": gin.H{}, "reason": "not checked yet"}
	}
	checks := gin.H{}
	for n, err := range res.errs {
		checks[n] = "ok"
		if err != nil {
			checks[n] = err.Error()
		}
	}
	age := r.now().Sub(res.at)
	body := gin.H{"checks": checks, "checkedAt": res.at.UTC().Format(time.RFC3339Nano), "ageSeconds": age.Seconds()}
	switch {
	case age > readyStaleAfter:
		body["reason"] = "stale: the checks last ran " + age.Round(time.Millisecond).String() + " ago"
	case res.failed:
		body["reason"] = "a check failed"
	default:
		body["ready"] = true
		return http.StatusOK, body
	}
	body["ready"] = false
	return http.StatusServiceUnavailable, body
}

func healthz() gin.HandlerFunc {
	return func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }
}

// readyz answers the last result of r's checks; it runs none itself.
func readyz(r *Readiness) gin.HandlerFunc {
	return func(c *gin.Context) {
		status, body := r.answer()
		c.JSON(status, body)
	}
}
