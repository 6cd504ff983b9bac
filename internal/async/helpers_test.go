package async_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/verdict"
	"github.com/seckill/seckill/internal/voucher"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// store is one pair of stores a test runs on.
type store struct {
	name string
	rdb  redis.UniversalClient
	db   *database.DB
}

// stores returns the embedded pair (miniredis + SQLite), unless testenv.RealOnly, and, in
// integration builds, a redis-server of the test's own with the real MariaDB/MySQL.
func stores(t *testing.T) []store {
	t.Helper()
	dbs := testenv.Databases(t, database.Pool{MaxOpen: 8})
	var out []store
	if !testenv.RealOnly() {
		out = append(out, store{name: "embedded", rdb: testenv.EmbeddedRedis(t).Client, db: dbs["sqlite"]})
	}
	if testenv.Integration {
		out = append(out, store{name: "real", rdb: testenv.StartRedisServer(t).Client(), db: dbs["mysql"]})
	}
	return out
}

// fixture is the asynchronous mode over one pair of stores.
type fixture struct {
	t        *testing.T
	rdb      redis.UniversalClient
	db       *database.DB
	store    *async.Store
	loader   *async.Loader
	svc      *async.Service
	statuses *async.Statuses
	cfg      async.Config
	// log is the writers' logger: quiet unless a test reads what they log.
	log *slog.Logger
}

func newFixture(t *testing.T, s store, cfg async.Config) *fixture {
	st := async.NewStore(s.db)
	loader := async.NewLoader(s.rdb, st, quiet)
	if cfg.ClaimIdle == 0 {
		// Short, so that the tests of claims do not wait long, and far above what a batch of
		// a few orders takes to commit: a batch is given up at nine tenths of it.
		cfg.ClaimIdle = time.Second
	}
	return &fixture{t: t, rdb: s.rdb, db: s.db, store: st, loader: loader, cfg: cfg, log: quiet,
		svc:      async.NewService(s.rdb, idgen.New(s.rdb, "order"), loader, async.NewMetrics(prometheus.NewRegistry()), quiet, cfg),
		statuses: async.NewStatuses(s.rdb, st)}
}

// voucher creates a seckill voucher on sale now with stock.
func (f *fixture) voucher(stock int) int64 {
	f.t.Helper()
	return f.voucherWindow(stock, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// voucherWindow creates a seckill voucher with stock on sale from begin to end.
func (f *fixture) voucherWindow(stock int, begin, end time.Time) int64 {
	f.t.Helper()
	v, err := voucher.NewService(voucher.NewStore(f.db.DB)).Create(context.Background(), voucher.Voucher{Title: "t", Stock: stock,
		BeginTime: begin, EndTime: end})
	require.NoError(f.t, err)
	return v.ID
}

// orderRows inserts n order rows of voucherID (below 10^15), users 1 to n, without taking
// stock.
func (f *fixture) orderRows(voucherID int64, n int) {
	f.t.Helper()
	now := time.Now().UTC()
	for u := int64(1); u <= int64(n); u++ {
		require.NoError(f.t, f.db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)",
			voucherID*1000+u, u, voucherID, now, now).Error)
	}
}

// loaded checks that voucherID's sale hash was created with stock, and that its users hash
// holds users users.
func (f *fixture) loaded(voucherID int64, stock, users int) {
	f.t.Helper()
	sale, us, _, _, _ := async.KeysOf(voucherID)
	got, err := f.rdb.HGet(context.Background(), sale, "stock").Int()
	require.NoError(f.t, err, "the sale hash was created")
	assert.Equal(f.t, stock, got)
	n, err := f.rdb.HLen(context.Background(), us).Result()
	require.NoError(f.t, err)
	assert.Equal(f.t, int64(users), n, "every user restored")
}

// writer starts a writer (named consumer) with the fixture's config; stopped when t ends.
func (f *fixture) writer(consumer string, setup func(*async.Writer)) *async.Writer {
	cfg := f.cfg
	cfg.Consumer = consumer
	w := async.NewWriter(f.rdb, f.store, nil, async.NewMetrics(prometheus.NewRegistry()), f.log, cfg)
	if setup != nil {
		setup(w)
	}
	w.Start()
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// rows returns the voucher's order rows: order id → user id.
func (f *fixture) rows(voucherID int64) map[int64]int64 {
	f.t.Helper()
	rows := map[int64]int64{}
	_, err := f.store.ReadBooks(context.Background(), voucherID, 1000, func(ids, users []int64) error {
		for i, id := range ids {
			rows[id] = users[i]
		}
		return nil
	})
	require.NoError(f.t, err)
	return rows
}

// eventuallyBound is how long eventually waits: a bound on liveness, not a speed claim. It is
// wide because the suites run with -race, many packages at once, on two cores: a batch that
// takes 5 s on a quiet machine took over 20 s in a CI run.
const eventuallyBound = 60 * time.Second

// eventually waits, up to eventuallyBound, until cond holds.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(eventuallyBound)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("not within %s: %s", eventuallyBound, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// book reads the voucher's books.
func (f *fixture) book(voucherID int64) async.Book {
	f.t.Helper()
	b, err := async.Reconcile(context.Background(), f.rdb, f.store, voucherID)
	require.NoError(f.t, err)
	return b
}

// judge gives the load test's verdict (internal/verdict: Evaluate with 202 for accepted, and
// EvaluateAsync) on voucherID after a fault, its initial stock given and admitted the orders
// the test was answered (order id → user): every one exactly one row with its user and
// voucher, no other row, no duplicate, no oversell, the books balanced against the initial
// stock, nothing dead-lettered. No instance runs here, so the one check of instances'
// counters is the only one that fails; GET /api/orders/{id} is the load test's.
func (f *fixture) judge(voucherID, initial int64, admitted map[int64]int64) {
	f.t.Helper()
	ctx := context.Background()
	answered := make([]verdict.Answered, 0, len(admitted))
	for id, u := range admitted {
		answered = append(answered, verdict.Answered{ID: strconv.FormatInt(id, 10), User: u, Voucher: voucherID})
	}
	facts := verdict.Facts{Client: "the test", Accepted: "202", Counts: order.Counts{Orders: map[string]float64{}}}
	run := []verdict.Voucher{{Scenario: "fault", ID: voucherID, Stock: initial}}
	require.NoError(f.t, verdict.ReadDB(ctx, f.db, run, answered, &facts))
	b, err := async.ReconcileSettled(ctx, f.rdb, f.store, voucherID, 3)
	require.NoError(f.t, err)
	dead, err := f.statuses.DeadLettered(ctx, voucherID)
	require.NoError(f.t, err)
	cs := append(verdict.Evaluate(facts), verdict.EvaluateAsync(verdict.AsyncFacts{Polled: -1,
		Vouchers: []verdict.AsyncVoucher{{Scenario: "fault", ID: voucherID, Initial: initial,
			RedisStock: b.RedisStock, Pending: b.Pending, Orders: b.Orders, DeadLettered: dead}}})...)
	assert.Empty(f.t, verdict.Failed(cs, verdict.GuardSignal), "guard checks")
	assert.Equal(f.t, []string{"instances' /metrics read = 0"}, verdict.Failed(cs, verdict.Integrity), "integrity checks")
}

// refusedOrder loads voucherID and admits an order of user that the database refuses every
// time: a row of the user's that Redis does not know of is already there, so the admission
// passes and the write conflicts. It returns the order's id.
func (f *fixture) refusedOrder(voucherID, user int64) int64 {
	f.t.Helper()
	ctx := context.Background()
	require.NoError(f.t, f.loader.Load(ctx, voucherID))
	now := time.Now().UTC()
	require.NoError(f.t, f.db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?)",
		user, user, voucherID, now, now).Error)
	id, err := f.svc.Place(ctx, user, voucherID)
	require.NoError(f.t, err)
	return id
}

// hookBase gives a go-redis hook that watches single commands the two other methods of
// redis.Hook, passing dials and pipelines through.
type hookBase struct{}

func (hookBase) DialHook(next redis.DialHook) redis.DialHook { return next }

func (hookBase) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// place admits one order of voucherID for each user in [from, to], all of which must be
// admitted, and returns order id → user.
func (f *fixture) place(voucherID, from, to int64) map[int64]int64 {
	f.t.Helper()
	admitted := map[int64]int64{}
	for u := from; u <= to; u++ {
		id, err := f.svc.Place(context.Background(), u, voucherID)
		require.NoError(f.t, err, "user %d", u)
		admitted[id] = u
	}
	return admitted
}

// crashed has a consumer "crashed" of the group read voucherID's n entries, and never
// acknowledge them: a writer that died before its commit.
func (f *fixture) crashed(voucherID int64, n int) {
	f.t.Helper()
	ctx := context.Background()
	_, _, _, stream, _ := async.KeysOf(voucherID)
	require.NoError(f.t, f.rdb.XGroupCreateMkStream(ctx, stream, async.DefaultGroup, "0").Err())
	res, err := f.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: async.DefaultGroup, Consumer: "crashed",
		Streams: []string{stream, ">"}, Count: int64(n) + 1, Block: -1}).Result()
	require.NoError(f.t, err)
	require.Len(f.t, res[0].Messages, n, "the crashed consumer took every entry")
}
