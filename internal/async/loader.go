package async

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/scripts/lua"
)

var (
	loadScript  = redis.NewScript(lua.AsyncLoad)
	booksScript = redis.NewScript(lua.AsyncBooks)
)

// restoreChunk is how many users one HSET restores, and restorePipeline how many of those
// HSETs go to Redis in one round trip: a page of a load (loadBounds.page) by default, so that
// a voucher that sold a million units restores its users in 50 round trips.
const (
	restoreChunk    = 1000
	restorePipeline = 20
)

// Loader loads vouchers from the database into Redis: when one is created, at start for those
// Redis lacks, and when an admission finds one missing.
type Loader struct {
	rdb    redis.UniversalClient
	store  *Store
	log    *slog.Logger
	bounds loadBounds
	// beforeCreate, when set (by the tests), runs after the books were read and the users
	// restored, just before the sale hash is created.
	beforeCreate func(voucherID int64)
	// afterBooks, when set (by the tests), runs right after the database's books were read.
	afterBooks func(voucherID int64)
	// startFailed, when set (by the tests), runs after each failed load of LoadOnSale, with
	// the attempt's number (1 for the first) and its error.
	startFailed func(voucherID int64, attempt int, err error)
	// loads lets one load of a voucher run at a time per instance: a storm on a voucher
	// Redis lacks makes one database read, not one per request.
	loads singleflight.Group
}

// NewLoader returns a loader from store into rdb.
func NewLoader(rdb redis.UniversalClient, store *Store, log *slog.Logger) *Loader {
	return &Loader{rdb: rdb, store: store, log: log, bounds: defaultLoadBounds}
}

// Load creates voucherID's sale hash unless it exists. Its stock is the database's stock minus
// the orders still waiting in the stream (admitted, not yet written), and the users of the
// written and the waiting orders are restored first, so that a Redis that lost the hash (it
// restarted empty, or the key was evicted) sells no unit twice and lets no user order twice.
// It returns voucher.ErrNotFound when there is no such seckill voucher.
//
// The stream is read before the database: an order written in between is then in both and
// counted once (it is in the database's rows); read the other way round, it could be in
// neither and its unit sold again.
//
// A load is bounded by its progress, not by one deadline, which callers share: each step (the
// reads before the rows, each page of 20,000 rows read and restored, the creation) within
// 30 s of the one before, and the whole within 30 s plus 30 µs per order restored (see
// loadBounds): a voucher with ten million orders is given 5.5 minutes, and a store that
// stops answering fails the load within 30 s, with an error that wraps ErrLoadStalled (or
// ErrLoadTooSlow). These are not an order's deadline: an order that finds its voucher missing
// waits for the load within its own deadline and gives up (503), while the load goes on for
// the orders after it.
//
// Load does not try again when the load fails (LoadOnSale does, at start): the orders that
// wait for it give up at their own deadline, shorter than one step, and answer 503, and the
// next order that finds the voucher missing starts the next attempt.
func (l *Loader) Load(ctx context.Context, voucherID int64) error {
	ch := l.loads.DoChan(strconv.FormatInt(voucherID, 10), func() (any, error) {
		// Not the first caller's ctx alone: a caller that gives up must not fail the others.
		lctx, d, stop := withLoadDeadline(context.WithoutCancel(ctx), l.bounds)
		defer stop()
		err := l.load(lctx, d, voucherID)
		if cause := context.Cause(lctx); err != nil && cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		return nil, err
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return fmt.Errorf("load voucher %d: %w", voucherID, ctx.Err())
	}
}

func (l *Loader) load(ctx context.Context, d *loadDeadline, voucherID int64) error {
	k := keysOf(voucherID)
	if n, err := l.rdb.Exists(ctx, k.sale).Result(); err != nil {
		return fmt.Errorf("load voucher %d: %w", voucherID, err)
	} else if n == 1 {
		return l.register(ctx, voucherID)
	}
	// The token marks what this load read of Redis: async_load.lua finds it gone when Redis
	// lost the voucher's keys meanwhile, or when another load created the sale hash since.
	// A load that fails leaves it: it is shared by every load that read the books since the
	// last creation (see async_books.lua).
	rb, err := readRedisBooks(ctx, l.rdb, voucherID, strconv.FormatUint(rand.Uint64(), 36))
	if err != nil {
		return fmt.Errorf("load voucher %d: %w", voucherID, err)
	}
	if rb.loaded {
		return l.register(ctx, voucherID) // created by another loader since
	}
	token := rb.token
	// The stream's orders, each true once the database's rows show it written.
	written := make(map[int64]bool, len(rb.stream))
	for _, e := range rb.stream {
		written[e.OrderID] = false
	}
	rows := 0
	v, err := l.store.ReadBooks(ctx, voucherID, l.bounds.page, func(ids, users []int64) error {
		for _, id := range ids {
			if _, ok := written[id]; ok {
				written[id] = true
			}
		}
		if err := l.restore(ctx, k.users, ids, users); err != nil {
			return fmt.Errorf("load voucher %d: restore users: %w", voucherID, err)
		}
		rows += len(ids)
		d.progress(len(ids))
		return nil
	})
	if errors.Is(err, voucher.ErrNotFound) {
		// No such voucher: no load comes after this one to reuse the token, and the orders
		// hash that holds it, of a voucher that does not exist, would stay for ever, one per
		// id anyone orders. Deleting it can only fail a load that shares it (ErrLoadLost): a
		// voucher created since is loaded by the next.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisCallTimeout)
		defer cancel()
		if derr := l.rdb.HDel(cctx, k.orders, "load").Err(); derr != nil {
			l.log.Warn("load of a voucher that does not exist: its token left in redis", "voucher_id", voucherID, "err", derr)
		}
	}
	if err != nil {
		return err
	}
	if l.afterBooks != nil {
		l.afterBooks(voucherID)
	}
	// Order id, user id, entry id and pending status of each order counted as pending.
	// async_load.lua restores their users, and their statuses only for entries still in the
	// stream (one written and acknowledged since the database was read must not read pending
	// again), in the step that creates the sale hash and only if it does: a load that another
	// loader's creation beat may hold an order dead-lettered since it read the stream, whose
	// user the dead letter released.
	var pending []any
	counted := 0
	for _, e := range rb.stream {
		if written[e.OrderID] {
			continue
		}
		pending = append(pending, e.OrderID, e.UserID, e.StreamID, pendingValue(e.UserID, e.At.UnixMilli()))
		counted++
	}
	// Registered before the sale hash exists: from its creation on, any instance admits to it
	// without a load, and an order of a voucher out of the registry is read by no writer and
	// found by no lookup (404). Registered only after the creation, an order admitted in
	// between answered 404, and a registration that failed left every order of the sale
	// unwritten, as no admission loads a voucher whose sale hash exists. The registration
	// after the creation stays: one SADD, it registers the voucher whatever a retirement
	// did to the registry meanwhile (its put-back, and putBackLeft, put back a voucher
	// without a sale hash too).
	if err := l.register(ctx, voucherID); err != nil {
		return fmt.Errorf("load voucher %d: %w", voucherID, err)
	}
	if l.beforeCreate != nil {
		l.beforeCreate(voucherID)
	}
	// The script gives back the unit of every order counted here that was dead-lettered
	// since the stream was read (see async_load.lua).
	stock := v.Stock - counted
	args := append([]any{stock, v.BeginTime.UnixMilli(), v.EndTime.UnixMilli(), token}, pending...)
	created, err := loadScript.Run(ctx, l.rdb, []string{k.sale, k.users, k.orders, k.stream}, args...).Int()
	if err != nil {
		return fmt.Errorf("load voucher %d: %w", voucherID, err)
	}
	if created == -1 {
		return fmt.Errorf("load voucher %d: %w", voucherID, ErrLoadLost)
	}
	if created == 1 {
		l.log.Info("voucher loaded into redis", "voucher_id", voucherID, "stock_before_dead_letters", stock,
			"database_stock", v.Stock, "pending", counted, "orders", rows)
	}
	return l.register(ctx, voucherID)
}

// restore sets each user's order (users[i] to ids[i]) in the users hash at key, in one round
// trip of HSETs of restoreChunk users.
func (l *Loader) restore(ctx context.Context, key string, ids, users []int64) error {
	args := make([]any, 0, 2*min(len(ids), restoreChunk))
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < len(ids); i += restoreChunk {
			args = args[:0]
			for j := i; j < min(len(ids), i+restoreChunk); j++ {
				args = append(args, users[j], ids[j])
			}
			p.HSet(ctx, key, args...) // copies args
		}
		return nil
	})
	return err
}

// register adds voucherID to the set of streams the writers read.
func (l *Loader) register(ctx context.Context, voucherID int64) error {
	if err := l.rdb.SAdd(ctx, registryKey, voucherID).Err(); err != nil {
		return fmt.Errorf("register voucher %d: %w", voucherID, err)
	}
	return nil
}

// LoadOnSale loads every seckill voucher whose sale has not ended and that Redis lacks. A
// voucher whose load fails is tried again while the stores answer (see loadAtStart); the
// first that cannot be loaded is the error.
//
// It also loads the registered vouchers whose sale hash Redis lacks, whatever their sale: a
// load that failed after it registered one (see load) left it so, and when its sale ended no
// admission loads it again; a writer would read its stream for ever, as a sale without a sale
// hash never reads as finished, and never retire it. One of those that cannot be loaded is
// logged, not the start's error: its sale is over.
func (l *Loader) LoadOnSale(ctx context.Context, now time.Time) error {
	ids, err := l.store.OnSale(ctx, now)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := l.loadAtStart(ctx, id); err != nil {
			return err
		}
	}
	stranded, err := l.stranded(ctx)
	if err != nil {
		l.log.Warn("registered vouchers without a sale hash not looked for at start", "err", err)
		return nil
	}
	for _, id := range stranded {
		if err := l.loadAtStart(ctx, id); err != nil {
			l.log.Warn("registered voucher without a sale hash not loaded at start", "voucher_id", id, "err", err)
		}
	}
	return nil
}

// stranded returns the registered vouchers whose sale hash Redis lacks: one SMEMBERS and one
// pipeline.
func (l *Loader) stranded(ctx context.Context) ([]int64, error) {
	members, err := l.rdb.SMembers(ctx, registryKey).Result()
	if err != nil || len(members) == 0 {
		return nil, err
	}
	ids := make([]int64, 0, len(members))
	exists := make([]*redis.IntCmd, 0, len(members))
	if _, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range members {
			if id, err := strconv.ParseInt(m, 10, 64); err == nil {
				ids = append(ids, id)
				exists = append(exists, p.Exists(ctx, keysOf(id).sale))
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []int64
	for i, id := range ids {
		if exists[i].Val() == 0 {
			out = append(out, id)
		}
	}
	return out, nil
}

// Bounds of the retries of a load at start.
const (
	// startRetryPause is the pause after a first failed load, doubled after each failure up to
	// startRetryMaxPause.
	startRetryPause    = 250 * time.Millisecond
	startRetryMaxPause = 2 * time.Second
	// storesPingTimeout bounds the check, after a failed load, that the database and Redis
	// still answer: DefaultDialTimeout's 2 s, time enough for a live server to take a new
	// connection, short enough that a server that hangs fails the start within the DSN's
	// readTimeout plus this.
	storesPingTimeout = 2 * time.Second
)

// loadAtStart loads voucherID as Load does, and tries again when the load failed while both
// stores still answer a ping: another instance loading the same voucher holds its row while it
// takes its snapshot of the books (Store.ReadBooks), which the DSN's readTimeout may not
// cover when that instance waited for a writer's batch or stalled, and this load's wait for
// the row then fails; once that instance has loaded the voucher, a load here finds the sale
// hash and only registers it. That instance holds the row within the first step of its load
// (its deadline, bounds.step, rolls the transaction back; the rows are read from the snapshot
// after it let go of the row), and it held the row before the first attempt here began, so an
// attempt begun bounds.step after the first one finds the row free: one that fails then is the
// last. A store that does not answer fails the start at once (fail closed), within the failed
// attempt plus storesPingTimeout. ctx, the start's deadline, bounds the whole.
func (l *Loader) loadAtStart(ctx context.Context, voucherID int64) error {
	first := time.Now()
	pause := startRetryPause
	for attempt := 1; ; attempt++ {
		began := time.Now()
		err := l.Load(ctx, voucherID)
		if err == nil {
			return nil
		}
		if l.startFailed != nil {
			l.startFailed(voucherID, attempt, err)
		}
		if errors.Is(err, voucher.ErrNotFound) || ctx.Err() != nil || began.Sub(first) >= l.bounds.step {
			return err
		}
		if perr := l.storesAnswer(ctx); perr != nil {
			return fmt.Errorf("%w (not tried again: %w)", err, perr)
		}
		l.log.Warn("voucher not loaded into redis at start; trying again", "voucher_id", voucherID,
			"attempt", attempt, "pause", pause, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, startRetryMaxPause)
	}
}

// storesAnswer reports whether the database and Redis answer a ping within storesPingTimeout.
func (l *Loader) storesAnswer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storesPingTimeout)
	defer cancel()
	if err := l.store.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if err := l.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// redisBooks is a voucher's books in Redis: its stock (loaded false when the sale hash is
// missing), the orders in its stream, the length of its dead-letter stream at that moment,
// whether its keys were retired (async_retire.lua), and a loader's token (the
// orders hash's field 'load': see async_books.lua).
type redisBooks struct {
	loaded  bool
	stock   int64
	stream  []Entry
	dead    int64
	retired bool
	token   string
}

// ErrLoadLost is a load's error when the books it read of Redis are stale: Redis lost the
// voucher's keys (it restarted empty), and the orders read there as pending with them; or
// another load created the sale hash, deleted again since, against which orders were admitted
// that these books do not count. The load created nothing from them. The next load starts
// from what Redis holds.
var ErrLoadLost = errors.New("async: the voucher's books in redis changed during the load")

// readRedisBooks reads the sale hash's stock, the stream's entries and the dead-letter
// stream's length in one script. A loader passes a new token, and gets back the token of its
// load, found or set in the orders hash in the same step while the sale hash is missing
// (its field 'load'); reconcile passes "".
func readRedisBooks(ctx context.Context, rdb redis.Scripter, voucherID int64, token string) (redisBooks, error) {
	k := keysOf(voucherID)
	keys, args := []string{k.sale, k.stream, k.dead}, []any{}
	if token != "" {
		keys, args = append(keys, k.orders), append(args, token)
	}
	res, err := booksScript.Run(ctx, rdb, keys, args...).Slice()
	if err != nil {
		return redisBooks{}, fmt.Errorf("read books: %w", err)
	}
	if len(res) < 4 {
		return redisBooks{}, fmt.Errorf("read books: script returned %d values, want at least 4", len(res))
	}
	var b redisBooks
	if res[0] != nil {
		s, _ := res[0].(string)
		if b.stock, err = strconv.ParseInt(s, 10, 64); err != nil {
			return redisBooks{}, fmt.Errorf("read books: stock %q: %w", s, err)
		}
		b.loaded = true
	}
	b.dead, _ = res[1].(int64)
	b.retired = res[2] != nil
	b.token, _ = res[3].(string)
	for i := 4; i+3 < len(res); i += 4 {
		var n [3]int64
		for j := range n {
			s, _ := res[i+j].(string)
			if n[j], err = strconv.ParseInt(s, 10, 64); err != nil {
				return redisBooks{}, fmt.Errorf("read books: malformed stream entry: %q: %w", s, err)
			}
		}
		sid, _ := res[i+3].(string)
		b.stream = append(b.stream, Entry{StreamID: sid, OrderID: n[0], UserID: n[1], VoucherID: voucherID, At: time.UnixMilli(n[2]).UTC()})
	}
	return b, nil
}
