package async

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/scripts/lua"
)

var (
	ackScript     = redis.NewScript(lua.AsyncAck)
	attemptScript = redis.NewScript(lua.AsyncAttempt)
	deadScript    = redis.NewScript(lua.AsyncDead)
	groupScript   = redis.NewScript(lua.AsyncGroup)
	heldScript    = redis.NewScript(lua.AsyncHeld)
)

// The writer's pacing.
const (
	// discoverInterval is how often the writer looks for vouchers to read, and refreshes
	// its gauges and its view of the database.
	discoverInterval = time.Second
	// pollBlock is how long one XREADGROUP waits for new entries (less for a short claim
	// idle: see readNew); the loop checks for shutdown between reads.
	pollBlock = 200 * time.Millisecond
	// retryBackoff is the pause before a batch that failed is tried again.
	retryBackoff = 200 * time.Millisecond
	// redisCallTimeout bounds the writer's Redis calls other than the blocking read.
	redisCallTimeout = 2 * time.Second
	// leftoverAfter is how long a retirement's member stays among those leaving the registry
	// before a discovery settles it as a leftover (see leftovers): ten times the deadline of
	// the retirement's last steps, which settle it themselves unless it stopped.
	leftoverAfter = 10 * redisCallTimeout
	// pingTimeout bounds the database ping that tells an unreachable database from an order
	// the database refused, or from a wait for a row: it runs after its batch's deadline (see
	// unreachable), so that a batch that fails takes at most its deadline and this, within
	// StopTimeout, what an instance's close gives the writer to stop, and shorter than the DSN's
	// readTimeout (5 s by default), which would otherwise bound a ping of a database that
	// hangs.
	pingTimeout = time.Second
)

// Writer writes admitted orders from the vouchers' streams to the database: one consumer of
// the group per instance, one loop per voucher stream.
type Writer struct {
	rdb     redis.UniversalClient
	store   *Store
	metrics *Metrics
	log     *slog.Logger
	cfg     Config

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[int64]bool
	// left holds the retirements that failed after their voucher may have left the registry,
	// by their member of the leaving set (leavingMember), each with its voucher: discovery
	// checks them again (putBackLeft).
	left map[string]int64
	// leavingSeen is since when each member of the set of vouchers leaving the registry
	// (leavingMember) has been seen there by this writer's discoveries (leftovers);
	// leftoverAfter is how long before one is taken for a leftover. Only discovery touches them.
	leavingSeen   map[string]time.Time
	leftoverAfter time.Duration
	// stranded holds the vouchers the last discovery found stranded (voucherState.stranded).
	// Only discovery touches it.
	stranded map[int64]bool
	// loader loads the stranded vouchers (NewWriter), reloads holds their back-off; mu guards
	// reloads.
	loader  *Loader
	reloads map[int64]*reload
	// failing holds, for each voucher whose batches have failed with an error of the
	// database's state (database.RefusesEveryWrite: read-only, out of connections, shutting down)
	// while the database answers pings, since when they have: retried for as long as that
	// lasts, as no such error is a refusal of the orders, and reported by Ready past
	// DBDownBound. A batch of the voucher that commits, or that fails otherwise (a wait: the
	// database took the write), ends it. failMu guards it (not mu, which Stop holds across Redis calls).
	failMu  sync.Mutex
	failing map[int64]time.Time

	// dbDownSince is when the writer last found the database unreachable after it had
	// been reachable (UnixNano), 0 while it is reachable.
	dbDownSince atomic.Int64
	// retiring is set while a round of retirement runs (startRetiring).
	retiring atomic.Bool
	// beforeRetire, in tests, runs after a retirement copied the dead letters and before
	// its script.
	beforeRetire func(voucherID int64)
	// beforeAck, in tests, runs after a batch's commit and before its acknowledgement;
	// returning false abandons the batch there, as a writer that crashed would.
	beforeAck func(voucherID int64, es []Entry) bool
	// startedReload, in tests, runs in discovery when it starts a load of a stranded voucher;
	// afterReload after each such load, with its result, its back-off set.
	startedReload func(voucherID int64)
	afterReload   func(voucherID int64, result string)
}

// NewWriter returns a writer; Start starts it. Its discovery loads the stranded vouchers
// (voucherState.stranded) with loader, the loader the admissions share, so that one load of a
// voucher runs at a time per instance; with a nil loader it only counts them (MetricStranded).
func NewWriter(rdb redis.UniversalClient, store *Store, loader *Loader, metrics *Metrics, log *slog.Logger, cfg Config) *Writer {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Writer{rdb: rdb, store: store, loader: loader, metrics: metrics, log: log.With("consumer", cfg.Consumer), cfg: cfg,
		ctx: ctx, cancel: cancel, running: map[int64]bool{}, left: map[string]int64{}, failing: map[int64]time.Time{},
		reloads: map[int64]*reload{}, leftoverAfter: leftoverAfter}
}

// Consumer is the writer's name in the consumer group.
func (w *Writer) Consumer() string { return w.cfg.Consumer }

// Start starts the writer's loops: it reads every loaded voucher's stream.
func (w *Writer) Start() {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(discoverInterval)
		defer t.Stop()
		for {
			w.discover()
			w.refresh()
			select {
			case <-w.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop stops reading, lets a batch in progress commit and acknowledge, and leaves the group
// if nothing is pending for it (what is pending is claimed by another writer after
// ClaimIdle, or by this service's next start). It returns ctx's error if the loops did not end
// within ctx: give it StopTimeout (the writer's own, w.StopTimeout) for a batch in progress
// to commit.
func (w *Writer) Stop(ctx context.Context) error {
	w.cancel()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop writer: %w", ctx.Err())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.running {
		k := keysOf(id)
		p, err := w.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k.stream, Group: w.cfg.Group,
			Start: "-", End: "+", Count: 1, Consumer: w.cfg.Consumer}).Result()
		if err == nil && len(p) == 0 {
			// Deleting a consumer drops its pending entries from the group: only one with none.
			_ = w.rdb.XGroupDelConsumer(ctx, k.stream, w.cfg.Group, w.cfg.Consumer).Err()
		}
	}
	return nil
}

// StopTimeout is StopTimeout of the writer's ClaimIdle: the bound to give Stop.
func (w *Writer) StopTimeout() time.Duration { return StopTimeout(w.cfg.ClaimIdle) }

// Ready fails when the writer has not reached the database for longer than DBDownBound, or
// when a voucher's batches have failed for longer than that with errors of the database's
// state (read-only, out of connections, shutting down): its orders stay pending and are
// retried, never given up, for as long as that lasts. A wait the database gave up (a row
// another transaction holds, a deadlock) is one voucher's, not the service's: it is counted
// (MetricRetried, cause transient) and shows in the oldest pending age, not here.
func (w *Writer) Ready(context.Context) error {
	if since := w.dbDownSince.Load(); since != 0 {
		if d := time.Since(time.Unix(0, since)); d > w.cfg.DBDownBound {
			return fmt.Errorf("the order writer has not reached the database for %s (bound %s)", d.Round(time.Second), w.cfg.DBDownBound)
		}
	}
	w.failMu.Lock()
	defer w.failMu.Unlock()
	for id, since := range w.failing {
		if d := time.Since(since); d > w.cfg.DBDownBound {
			return fmt.Errorf("the order writer's batches of voucher %d have failed for %s (bound %s), the database refusing every write; retried", id, d.Round(time.Second), w.cfg.DBDownBound)
		}
	}
	return nil
}

// batchFailing records that a batch of voucherID failed for no fault of its orders (see
// failing).
func (w *Writer) batchFailing(voucherID int64) {
	w.failMu.Lock()
	defer w.failMu.Unlock()
	if _, ok := w.failing[voucherID]; !ok {
		w.failing[voucherID] = time.Now()
	}
}

// endFailing records that a batch of voucherID committed, or that its loop ended.
func (w *Writer) endFailing(voucherID int64) {
	w.failMu.Lock()
	defer w.failMu.Unlock()
	delete(w.failing, voucherID)
}

func (w *Writer) dbUp() { w.dbDownSince.Store(0) }

func (w *Writer) dbDown() { w.dbDownSince.CompareAndSwap(0, time.Now().UnixNano()) }

// discover starts a loop for every loaded voucher that has none and whose sale is not
// finished, and hands the finished vouchers past Config.Retention to retire; first it settles
// the vouchers a retirement left leaving the registry (leftovers, putBackLeft). Its Redis work
// is two SMEMBERS and one pipeline, whatever the number of vouchers: the registry holds the
// vouchers of recent sales only (the retired ones left it), and their states are read in one
// round trip, so that the loop neither runs out of its timeout nor starts loops for old
// vouchers as the vouchers grow.
func (w *Writer) discover() {
	w.putBackLeft(w.leftovers())
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	ids, err := w.rdb.SMembers(ctx, registryKey).Result()
	if err != nil {
		if w.ctx.Err() == nil {
			w.log.Warn("writer: list vouchers", "err", err)
		}
		return
	}
	w.mu.Lock()
	idle := make([]int64, 0, len(ids))
	for _, s := range ids {
		if id, err := strconv.ParseInt(s, 10, 64); err == nil && !w.running[id] {
			idle = append(idle, id)
		}
	}
	w.mu.Unlock()
	states, err := w.states(ctx, idle)
	if err != nil {
		if w.ctx.Err() == nil {
			w.log.Warn("writer: read the vouchers' states", "err", err)
		}
		return
	}
	now := w.cfg.Now()
	w.strandedSeen(idle, states)
	w.reloadStranded(now)
	var old []int64
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, id := range idle {
		st := states[i]
		if w.running[id] || w.ctx.Err() != nil {
			continue
		}
		if st.finished(now) {
			if st.retirable(now, w.cfg.Retention) {
				old = append(old, id)
			}
			continue
		}
		w.running[id] = true
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.loop(id)
		}()
	}
	w.startRetiring(old)
}

// voucherState is what discover reads of a voucher: its sale's end and its stream's length.
type voucherState struct {
	end    time.Time
	hasEnd bool
	// noSale: Redis answered that the voucher has no sale hash (a load under way, or one
	// that failed after it registered the voucher); false with hasEnd false is unknown.
	noSale  bool
	backlog int64
}

// finished reports whether the stream holds nothing and the sale ended over finishedAfter ago,
// or has no sale hash: its loop may end (an entry that still comes, which nothing admits after
// the end or without a sale hash, starts it again at the next discovery, as does the creation
// of the sale hash).
func (s voucherState) finished(now time.Time) bool {
	return s.backlog == 0 && (s.noSale || s.hasEnd && now.Sub(s.end) >= finishedAfter)
}

// stranded reports whether the voucher is registered with no sale hash and nothing in its
// stream: a load that failed after it registered the voucher left it so. While its sale is on,
// the next order's load creates the sale hash; once it is over, no order comes, and discovery
// loads it (reloadStranded), as does an instance's start (Loader.LoadOnSale); nothing retires it
// meanwhile.
func (s voucherState) stranded() bool { return s.noSale && s.backlog == 0 }

// retirable reports whether a finished voucher's keys have outlived retention.
func (s voucherState) retirable(now time.Time, retention time.Duration) bool {
	return s.finished(now) && s.hasEnd && now.Sub(s.end) >= retention
}

// states reads the state of each of ids in one pipeline.
func (w *Writer) states(ctx context.Context, ids []int64) ([]voucherState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ends := make([]*redis.StringCmd, len(ids))
	lens := make([]*redis.IntCmd, len(ids))
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			k := keysOf(id)
			ends[i] = p.HGet(ctx, k.sale, "end")
			lens[i] = p.XLen(ctx, k.stream)
		}
		return nil
	})
	var reply redis.Error
	if err != nil && !errors.Is(err, redis.Nil) && !errors.As(err, &reply) {
		// Redis did not answer: nothing is known, and a voucher taken for unfinished here
		// would get a loop.
		return nil, err
	}
	// A command that Redis refused (a key of another type, say) leaves its voucher's state
	// unknown, which is not finished: its loop runs, as it would for a voucher on sale, and
	// the other vouchers are read.
	out := make([]voucherState, len(ids))
	for i := range ids {
		end, err := ends[i].Int64()
		switch {
		case err == nil:
			out[i].end, out[i].hasEnd = time.UnixMilli(end), true
		case errors.Is(err, redis.Nil):
			out[i].noSale = true
		}
		if n, err := lens[i].Result(); err == nil {
			out[i].backlog = n
		} else {
			out[i].backlog = -1
		}
	}
	return out, nil
}

// strandedSeen sets MetricStranded to the stranded vouchers among ids (of states), and logs
// each the first round it is found so. Only discovery calls it.
func (w *Writer) strandedSeen(ids []int64, states []voucherState) {
	now := make(map[int64]bool)
	for i, id := range ids {
		if !states[i].stranded() {
			continue
		}
		now[id] = true
		if !w.stranded[id] {
			w.log.Warn("writer: registered voucher without a sale hash, its stream empty: no loop reads it until it is loaded",
				"voucher_id", id)
		}
	}
	w.stranded = now
	w.metrics.stranded.Set(float64(len(now)))
}

// refresh sets the gauges, then checks the database, each within a bound of its own: on one
// context, a database that hangs took the ping's whole bound, and the gauges' reads after it
// found their context ended and set 0 orders waiting, the oldest 0 s old, all through a
// database outage, the one time they are there for.
func (w *Writer) refresh() {
	w.refreshGauges()
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	if err := w.pingDB(ctx); err != nil {
		w.dbDown()
	} else {
		w.dbUp()
	}
}

// noGroup reports whether err is Redis's NOGROUP: the stream or its consumer group is not
// there (not created yet, lost with a Redis restart, or deleted by a retirement).
func noGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// refreshGauges sets the pending, backlog and oldest-age gauges from the streams of the
// vouchers this writer reads. When a read fails the gauges keep their last values: a sum of
// the streams that answered would understate what waits.
func (w *Writer) refreshGauges() {
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	w.mu.Lock()
	ids := make([]int64, 0, len(w.running))
	for id := range w.running {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	var pending, backlog int64
	var oldest time.Duration
	for _, id := range ids {
		k := keysOf(id)
		p, err := w.rdb.XPending(ctx, k.stream, w.cfg.Group).Result()
		switch {
		case err == nil:
			pending += p.Count
		case noGroup(err):
			// No group yet (its loop is creating it), or retired: nothing delivered there.
		default:
			return
		}
		n, err := w.rdb.XLen(ctx, k.stream).Result()
		if err != nil {
			return
		}
		if n == 0 {
			continue
		}
		backlog += n
		first, err := w.rdb.XRangeN(ctx, k.stream, "-", "+", 1).Result()
		if err != nil {
			return
		}
		if len(first) == 1 {
			if ms, ok := streamIDTime(first[0].ID); ok {
				oldest = max(oldest, time.Since(ms))
			}
		}
	}
	w.metrics.pending.Set(float64(pending))
	w.metrics.backlog.Set(float64(backlog))
	w.metrics.oldest.Set(oldest.Seconds())
}

// loop writes voucherID's stream until Stop: first what the group had delivered to this
// consumer and not acknowledged, then new entries, and every ClaimIdle/2 the entries other
// consumers left idle past ClaimIdle (again at once after a claim that filled a batch).
func (w *Writer) loop(voucherID int64) {
	k := keysOf(voucherID)
	own := true // this consumer's pending entries first: a batch that failed is retried from there
	var lastClaim time.Time
	// claimFrom is where the next claim scans the group's pending entries from: a claim looks
	// at most ten times its count of them, so a scan from the start alone would never reach
	// idle entries behind that many others still in progress.
	claimFrom := scanStart
	groupReady := false
	// limit is the most entries a batch reads: halved after a batch that outlived its
	// deadline, which read again whole would outlive it again, for ever; doubled back, up to
	// Batch, after each batch that succeeded.
	limit := w.cfg.Batch
	for w.ctx.Err() == nil {
		if !groupReady {
			ok, err := w.ensureGroup(k)
			if err != nil {
				w.log.Warn("writer: create consumer group", "voucher_id", voucherID, "err", err)
				w.sleep(retryBackoff)
				continue
			}
			if !ok {
				// Retired (by another writer) while this loop read it: its stream and group
				// are gone, and nothing is pending there. A reopened sale is discovered again.
				w.leave(voucherID)
				return
			}
			groupReady = true
		}
		var msgs []redis.XMessage
		var err error
		// delivered is when the batch's first entries were delivered to this consumer (Redis
		// resets an entry's idle time at each delivery, claims and reads of one's own pending
		// entries included): its deadline counts from there. Redis stamps the delivery before
		// it replies, so delivered is taken before the request is sent, not at its reply, which
		// comes a round trip later, or much later on a slow network or a busy Redis.
		delivered := time.Now()
		moreIdle := false
		switch {
		case delivered.Sub(lastClaim) >= w.cfg.ClaimIdle/2:
			lastClaim = delivered
			msgs, claimFrom, err = w.claim(k, claimFrom, limit)
			moreIdle = err == nil && (len(msgs) == limit || claimFrom != scanStart)
		case own:
			msgs, err = w.read(k, "0", limit, -1)
			if err == nil && len(msgs) == 0 {
				own = false
			}
		default:
			msgs, delivered, err = w.readNew(k, limit)
		}
		if err != nil {
			if w.ctx.Err() != nil {
				return
			}
			if noGroup(err) {
				groupReady = false // Redis lost the stream or the group (a restart), or a retirement deleted it: see ensureGroup
				continue
			}
			w.log.Warn("writer: read stream", "voucher_id", voucherID, "err", err)
			w.sleep(retryBackoff)
			continue
		}
		if len(msgs) == 0 {
			if moreIdle {
				// The scan stopped short of the end of the pending entries: go on from there.
				lastClaim = time.Time{}
				continue
			}
			if time.Since(lastClaim) < pollBlock && w.finished(w.ctx, voucherID) {
				w.leave(voucherID)
				return
			}
			continue
		}
		ok, late := w.process(voucherID, k, msgs, delivered)
		switch {
		case late:
			limit = max(1, len(msgs)/2)
		case ok:
			limit = min(w.cfg.Batch, 2*limit)
		}
		if moreIdle && ok {
			// More may be as idle (a consumer died holding more than a batch, or several
			// did, or the scan stopped short of the end): claim again now rather than a page
			// every ClaimIdle/2.
			lastClaim = time.Time{}
		}
		if !ok {
			own = true
			w.sleep(retryBackoff)
			if w.dbDownSince.Load() != 0 {
				w.awaitDB()
			}
		}
	}
}

// leave ends voucherID's loop: discovery starts another when the voucher needs one again.
func (w *Writer) leave(voucherID int64) {
	w.mu.Lock()
	delete(w.running, voucherID)
	w.mu.Unlock()
	w.endFailing(voucherID)
}

// awaitDB waits, after a batch that found the database out of reach, until the database
// answers a ping again, or Stop. Meanwhile the loop reads nothing: read again, its own pending
// entries would restart their idle time at each try, and no writer that reaches the database
// would ever claim them (nor should this one claim others' idle entries that it cannot
// write): an instance cut off from the database alone held its batch for as long as that
// lasted. Left idle, the batch is claimed past ClaimIdle by a writer that can write it.
func (w *Writer) awaitDB() {
	for w.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(w.ctx, pingTimeout)
		err := w.pingDB(ctx)
		cancel()
		if err == nil {
			w.dbUp()
			return
		}
		w.sleep(retryBackoff)
	}
}

// finishedAfter is how long after a sale's end its stream stops being read once empty: a loop
// per voucher ever sold would hold a connection each in its blocking read.
const finishedAfter = time.Minute

// finished is voucherState.finished of voucherID, read now.
func (w *Writer) finished(ctx context.Context, voucherID int64) bool {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	st, err := w.states(ctx, []int64{voucherID})
	return err == nil && st[0].finished(w.cfg.Now())
}

// sleep waits d or until Stop.
func (w *Writer) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.ctx.Done():
	}
}

// ensureGroup creates the group, reading from the stream's start ("0", not "$": entries
// admitted before any writer ran are orders too), and the stream if missing, unless the
// voucher was retired (async_group.lua): it reports false then, and nothing is created.
func (w *Writer) ensureGroup(k keys) (bool, error) {
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	n, err := groupScript.Run(ctx, w.rdb, []string{k.sale, k.stream}, w.cfg.Group).Int()
	return n == 1, err
}

// read is one XREADGROUP from id ("0": this consumer's pending entries; ">": new ones);
// block < 0 does not block.
func (w *Writer) read(k keys, id string, count int, block time.Duration) ([]redis.XMessage, error) {
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout+max(block, 0))
	defer cancel()
	res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: w.cfg.Group, Consumer: w.cfg.Consumer,
		Streams: []string{k.stream, id}, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// readNew waits up to pollBlock for new entries; with fewer than a batch it lingers once
// for more, so that a trickle still makes batches. It returns when it sent the read of the
// first entries (Redis delivers them, and starts their idle time, somewhere between that and
// its reply): the wait for them and the linger count against their batch's deadline. The wait
// is at most a quarter of that deadline, so that a short claim idle still leaves a batch
// most of it.
func (w *Writer) readNew(k keys, count int) ([]redis.XMessage, time.Time, error) {
	delivered := time.Now()
	msgs, err := w.read(k, ">", count, min(pollBlock, batchSpan(w.cfg.ClaimIdle)/4))
	if err != nil || len(msgs) == 0 || len(msgs) >= count || w.cfg.Linger <= 0 {
		return msgs, delivered, err
	}
	w.sleep(w.cfg.Linger)
	more, err := w.read(k, ">", count-len(msgs), -1)
	if err != nil {
		// What was read is delivered to this consumer: write it; the error shows again.
		return msgs, delivered, nil
	}
	return append(msgs, more...), delivered, nil
}

// scanStart is the id a scan of a group's pending entries starts from, and the cursor
// XAUTOCLAIM answers once its scan has reached their end.
const scanStart = "0-0"

// claim takes over up to count entries other consumers left idle past ClaimIdle, scanning the
// group's pending entries from the id from. Redis looks at no more than ten times count of them
// in one call: it answers the id to go on from, or scanStart when it reached their end. On an
// error the next claim starts over.
func (w *Writer) claim(k keys, from string, count int) (msgs []redis.XMessage, next string, err error) {
	ctx, cancel := context.WithTimeout(w.ctx, redisCallTimeout)
	defer cancel()
	msgs, next, err = w.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: k.stream, Group: w.cfg.Group,
		Consumer: w.cfg.Consumer, MinIdle: w.cfg.ClaimIdle, Start: from, Count: int64(count)}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, scanStart, nil
	}
	if err != nil {
		return nil, scanStart, err
	}
	if next == "" {
		next = scanStart
	}
	if len(msgs) > 0 {
		w.metrics.claimed.Add(float64(len(msgs)))
		w.log.Info("writer: claimed idle entries", "stream", k.stream, "entries", len(msgs))
	}
	return msgs, next, nil
}

// process writes msgs, delivered to this consumer at delivered, and acknowledges what is in
// the database. It reports false when the database could not be reached: the entries stay
// pending for this consumer and are retried. It uses its own deadline, not Stop's: a batch
// that started commits and acknowledges. late reports that the batch's deadline passed.
func (w *Writer) process(voucherID int64, k keys, msgs []redis.XMessage, delivered time.Time) (ok, late bool) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(w.ctx), delivered.Add(batchSpan(w.cfg.ClaimIdle)))
	defer cancel()
	ok = w.write(ctx, voucherID, k, msgs)
	return ok, !ok && ctx.Err() != nil
}

// write is process within the batch's deadline, ctx.
func (w *Writer) write(ctx context.Context, voucherID int64, k keys, msgs []redis.XMessage) bool {
	es := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		e, err := decodeEntry(m, voucherID)
		if err != nil {
			w.deadLetter(ctx, k, e, "malformed entry: "+err.Error(), unitFree)
			continue
		}
		es = append(es, e)
	}
	if len(es) == 0 {
		return true
	}
	held := w.held(k)
	outs, err := w.store.Write(ctx, voucherID, es, held)
	if err == nil {
		w.dbUp()
		w.endFailing(voucherID)
		return w.settle(ctx, voucherID, k, es, outs)
	}
	if w.notHeld(voucherID, len(es), err) || w.notRefused(ctx, voucherID, len(es), err) {
		return false
	}
	// The database refused the batch: find the orders it refuses, one at a time.
	ok := true
	for _, e := range es {
		outs, err := w.store.Write(ctx, voucherID, []Entry{e}, held)
		switch {
		case err == nil:
			w.endFailing(voucherID)
			ok = w.settle(ctx, voucherID, k, []Entry{e}, outs) && ok
		case errors.Is(err, ErrEntriesGone):
			w.notHeld(voucherID, 1, err)
			ok = false
		case w.notHeld(voucherID, 1, err), w.notRefused(ctx, voucherID, 1, err):
			return false
		default:
			unit := unitFree
			if errors.Is(err, ErrStockShort) {
				unit = unitShort
			}
			w.fail(ctx, k, e, err.Error(), unit)
			ok = false
		}
	}
	return ok
}

// batchSpan is how long a batch may take, from the delivery of its entries to their
// acknowledgement: less than claimIdle, so that no other writer claims, and writes again, a
// batch that is still being written; a batch past it is rolled back and read again, half as
// large (down to one entry), so that one too slow for it still commits. Half of
// claimIdle plus a Redis call's bound while that leaves a tenth of claimIdle to spare (for
// the acknowledgement's way to Redis, and Redis's clock against ours), that is from 5 s on;
// below, nine tenths of claimIdle.
func batchSpan(claimIdle time.Duration) time.Duration {
	return min(claimIdle/2+redisCallTimeout, claimIdle-claimIdle/10)
}

// errHeldUnknown wraps the error of a held check that could not ask Redis.
var errHeldUnknown = errors.New("ask whether the batch is still pending")

// held is the check Store.Write runs before it commits a batch of k's stream: are the entries
// still in the stream? One that is not was lost by Redis (it restarted empty, and a reload may
// already have read the database without this batch) or settled by another consumer that
// claimed it; committing it would write an order whose unit and user Redis has given back.
func (w *Writer) held(k keys) Held {
	return func(ctx context.Context, es []Entry) error {
		if len(es) == 0 {
			return nil
		}
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.StreamID
		}
		// In stream order, async_held.lua reads the batch in one range (a batch is in that
		// order as read, but the check does not depend on it).
		gone, err := heldScript.Run(ctx, w.rdb, []string{k.stream}, inStreamOrder(ids)...).Int()
		switch {
		case err != nil:
			return fmt.Errorf("%w: %w", errHeldUnknown, err)
		case gone > 0:
			return fmt.Errorf("%w: %d of %d", ErrEntriesGone, gone, len(es))
		}
		return nil
	}
}

// notHeld reports, and logs, whether err is the held check's: the batch of n entries was
// rolled back, and what is still pending for this consumer is read again (an entry that left
// the stream does not come back).
func (w *Writer) notHeld(voucherID int64, n int, err error) bool {
	switch {
	case errors.Is(err, ErrEntriesGone):
		w.log.Error("writer: entries left the stream while their batch was written (Redis lost them, or another consumer settled them); the batch was rolled back",
			"voucher_id", voucherID, "entries", n, "err", err)
	case errors.Is(err, errHeldUnknown):
		w.log.Warn("writer: could not check the batch against the stream; it was rolled back and stays pending",
			"voucher_id", voucherID, "entries", n, "err", err)
	default:
		return false
	}
	return true
}

// settle acknowledges the entries in the database (written now or before) and counts a
// failed attempt for each conflict.
func (w *Writer) settle(ctx context.Context, voucherID int64, k keys, es []Entry, outs []Outcome) bool {
	var done []Entry
	written := 0
	ok := true
	for i, e := range es {
		switch outs[i] {
		case Written:
			written++
			done = append(done, e)
		case Existed:
			done = append(done, e)
		case Conflict:
			w.fail(ctx, k, e, "the user already has another order of this voucher", unitFree)
			ok = false
		}
	}
	w.metrics.written.Add(float64(written))
	if w.beforeAck != nil && !w.beforeAck(voucherID, done) {
		return true
	}
	if len(done) == 0 {
		return ok
	}
	args := []any{w.cfg.Group}
	for _, e := range done {
		args = append(args, e.StreamID, e.OrderID)
	}
	if err := ackScript.Run(ctx, w.rdb, []string{k.stream, k.orders, k.attempts}, args...).Err(); err != nil {
		// Committed, not acknowledged: the entries come back and are found written.
		w.log.Warn("writer: acknowledge written orders", "voucher_id", voucherID, "entries", len(done), "err", err)
		return false
	}
	return ok
}

// notRefused reports, and logs, whether err leaves the batch of n entries pending, to be
// tried again, rather than counting a refused attempt for each: the database could not be
// reached, or its error says nothing against the orders (database.IsTransient). A wait for the
// voucher's row that another transaction holds past the DSN's readTimeout ends in the driver's
// "invalid connection" while the database answers a ping: counted, it dead-lettered orders
// for a lock wait.
func (w *Writer) notRefused(ctx context.Context, voucherID int64, n int, err error) bool {
	switch {
	case w.unreachable(ctx, err):
		w.dbDown()
		w.metrics.retried.WithLabelValues(RetryUnreachable).Inc()
		w.log.Warn("writer: database unreachable; the batch stays pending", "voucher_id", voucherID, "entries", n, "err", err)
	case database.RefusesEveryWrite(err):
		w.batchFailing(voucherID)
		w.metrics.retried.WithLabelValues(RetryDatabaseState).Inc()
		w.log.Warn("writer: the database refuses every write for now (read-only, out of connections, shutting down); the batch stays pending",
			"voucher_id", voucherID, "entries", n, "err", err)
	case database.IsTransient(err):
		// A wait given up (the voucher's row held, a deadlock, the batch's deadline) is of
		// this voucher, not of the service: not in Ready, which would take every instance
		// out of service for one row another transaction holds. It also ends a run of errors
		// of the database's state: the database took the write far enough to wait.
		w.endFailing(voucherID)
		w.metrics.retried.WithLabelValues(RetryTransient).Inc()
		w.log.Warn("writer: the database gave up on the batch, not on its orders (a lock wait, a lost connection); it stays pending",
			"voucher_id", voucherID, "entries", n, "err", err)
	default:
		return false
	}
	return true
}

// unreachable reports whether err means the database could not be reached (then the orders
// wait) rather than that it refused them (then each refusal counts an attempt): whether the
// database answers a ping. The ping has its own bound, pingTimeout, past the batch's deadline
// (ctx's): a batch that failed at that deadline may have spent it waiting for the voucher's
// row while another transaction held it, the database answering all along (InnoDB's wait
// ends a second before the deadline only for a statement that began early enough, and only
// unless the DSN sets innodb_lock_wait_timeout), and a failure just before the deadline would
// leave the ping no time to answer.
func (w *Writer) unreachable(ctx context.Context, err error) bool {
	if errors.Is(err, ErrStockShort) {
		return false
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	return w.pingDB(pctx) != nil
}

func (w *Writer) pingDB(ctx context.Context) error { return w.store.Ping(ctx) }

// What a refusal by the database says of the order's unit, for async_dead.lua.
const (
	// unitFree: the database holds no unit for the order (its user has another row, or it
	// refused the row itself): the unit Redis reserved is free again.
	unitFree = "free"
	// unitShort: the database's stock could not cover the order (ErrStockShort): Redis
	// counted a unit the database does not have, and giving it back would admit another
	// order that the database refuses too.
	unitShort = "short"
)

// fail counts a refused attempt of e, unit saying what the refusal says of e's unit; at
// MaxAttempts it dead-letters e. An entry no longer pending for this consumer (another
// claimed it, or settled it) is not counted: the count is its owner's attempts.
func (w *Writer) fail(ctx context.Context, k keys, e Entry, reason, unit string) {
	n, err := attemptScript.Run(ctx, w.rdb, []string{k.stream, k.attempts}, w.cfg.Group, w.cfg.Consumer, e.StreamID).Int64()
	if err != nil {
		w.log.Warn("writer: count failed attempt", "order_id", e.OrderID, "err", err)
		return
	}
	if n == 0 {
		w.log.Warn("writer: the database refused an order no longer this consumer's; not counted", "order_id", e.OrderID,
			"voucher_id", e.VoucherID, "reason", reason)
		return
	}
	w.log.Warn("writer: the database refused an order", "order_id", e.OrderID, "user_id", e.UserID,
		"voucher_id", e.VoucherID, "attempt", n, "max_attempts", w.cfg.MaxAttempts, "reason", reason)
	if n >= int64(w.cfg.MaxAttempts) {
		w.deadLetter(ctx, k, e, reason, unit)
	}
}

// deadLetter moves e to the dead-letter stream and releases its reservation: its user, and
// its unit unless unit is unitShort (see async_dead.lua).
func (w *Writer) deadLetter(ctx context.Context, k keys, e Entry, reason, unit string) {
	order, user := "", ""
	if e.OrderID != 0 {
		order, user = strconv.FormatInt(e.OrderID, 10), strconv.FormatInt(e.UserID, 10)
	}
	res, err := deadScript.Run(ctx, w.rdb, []string{k.stream, k.dead, k.sale, k.users, k.orders, k.attempts},
		w.cfg.Group, w.cfg.Consumer, e.StreamID, order, user, e.VoucherID, e.At.UnixMilli(), reason, unit).Result()
	if err != nil {
		w.log.Error("writer: dead-letter an order", "order_id", e.OrderID, "err", err)
		return
	}
	// 0: the entry is no longer this consumer's; else what became of the order's unit.
	became, ok := res.(string)
	if !ok {
		return
	}
	w.metrics.deadLettered.Inc()
	w.log.Error("writer: order dead-lettered, its user released", "order_id", e.OrderID,
		"user_id", e.UserID, "voucher_id", e.VoucherID, "reason", reason, "unit", became)
	if e.OrderID == 0 {
		return
	}
	// The failed status in the database outlives Redis's copy (a Redis that restarted empty,
	// a voucher retired). Not recorded (the database refused or is down): the retirement
	// copies it from the dead letter before the Redis copy goes.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisCallTimeout)
	defer cancel()
	if err := w.store.RecordFailed(rctx, []FailedOrder{{OrderID: e.OrderID, UserID: e.UserID, VoucherID: e.VoucherID,
		Reason: reason, Unit: became, At: e.At}}); err != nil {
		w.log.Warn("writer: record a dead-lettered order in the database; its retirement records it", "order_id", e.OrderID, "err", err)
	}
}

// decodeEntry reads an entry written by async_admit.lua; on error e still has its StreamID.
func decodeEntry(m redis.XMessage, voucherID int64) (Entry, error) {
	e := Entry{StreamID: m.ID, VoucherID: voucherID}
	var at int64
	var errs []error
	for name, dst := range map[string]*int64{"order": &e.OrderID, "user": &e.UserID, "at": &at} {
		s, _ := m.Values[name].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("field %s=%q", name, s))
		}
		*dst = n
	}
	e.At = time.UnixMilli(at).UTC()
	if len(errs) > 0 {
		return Entry{StreamID: m.ID, VoucherID: voucherID}, errors.Join(errs...)
	}
	return e, nil
}
