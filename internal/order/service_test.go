package order_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/lock"
	lockmocks "github.com/seckill/seckill/internal/lock/mocks"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/order/mocks"
	"github.com/seckill/seckill/internal/voucher"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func onSale() voucher.Voucher {
	return voucher.Voucher{ID: 7, Stock: 3, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}
}

type fixture struct {
	vouchers *mocks.Vouchers
	store    *mocks.Store
	locks    *mocks.Locks
	ids      *mocks.IDs
	lock     *lockmocks.Lock
	reg      *prometheus.Registry
	svc      *order.Service
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, order.Config{}) }

// newFixtureWith is newFixture with cfg (LockTTL 5s and the fixed clock unless cfg sets them).
func newFixtureWith(t *testing.T, cfg order.Config) *fixture {
	f := &fixture{
		vouchers: mocks.NewVouchers(t), store: mocks.NewStore(t), locks: mocks.NewLocks(t),
		ids: mocks.NewIDs(t), lock: lockmocks.NewLock(t), reg: prometheus.NewRegistry(),
	}
	if cfg.LockTTL == 0 {
		cfg.LockTTL = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return now }
	}
	f.svc = order.NewService(f.vouchers, f.store, f.locks, f.ids, order.NewMetrics(f.reg),
		slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	return f
}

func (f *fixture) count(result string) float64 {
	c, err := order.ReadCounts(f.reg)
	if err != nil {
		panic(err)
	}
	return c.Orders[result]
}

// expectLocked sets up a voucher on sale and a lock that is taken.
func (f *fixture) expectLocked() {
	f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(onSale(), nil)
	f.locks.EXPECT().New("order:42").Return(f.lock)
	f.lock.EXPECT().TryLock(mock.Anything, 5*time.Second).Return(true, nil)
}

func TestPlaceCreatesAndUnlocksAfterCommit(t *testing.T) {
	f := newFixture(t)
	f.expectLocked()
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	committed := false
	f.store.EXPECT().Create(mock.Anything, order.Order{ID: 99, UserID: 42, VoucherID: 7, Status: order.StatusUnpaid, CreatedAt: now}, order.Fence{}, mock.Anything).
		RunAndReturn(func(context.Context, order.Order, order.Fence, func(context.Context) error) error {
			committed = true
			return nil
		})
	f.lock.EXPECT().Unlock(mock.Anything).RunAndReturn(func(context.Context) error {
		assert.True(t, committed, "unlock before the transaction returned")
		return nil
	})

	id, err := f.svc.Place(context.Background(), 42, 7)
	require.NoError(t, err)
	assert.Equal(t, int64(99), id)
	assert.Equal(t, 1.0, f.count(order.ResultCreated))
}

// TestPlaceDatesTheOrderWhenTheWindowWasJudged: an order let in at the last moment of its sale
// is dated inside the sale, at the instant its window was judged (to the millisecond, as the
// sale's times are), as the asynchronous mode's script dates its orders. Its lock, its id and
// its wait for a connection come after that check; dated after them, it fell after the sale's
// end.
func TestPlaceDatesTheOrderWhenTheWindowWasJudged(t *testing.T) {
	clock := now.Add(600 * time.Microsecond)
	f := newFixtureWith(t, order.Config{Now: func() time.Time { return clock }})
	v := onSale()
	v.EndTime = now.Add(time.Millisecond) // the sale's last millisecond; times are stored to it
	f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(v, nil)
	f.locks.EXPECT().New("order:42").Return(f.lock)
	f.lock.EXPECT().TryLock(mock.Anything, 5*time.Second).RunAndReturn(func(context.Context, time.Duration) (bool, error) {
		clock = clock.Add(5 * time.Millisecond) // the lock took a while: the sale has ended since
		return true, nil
	})
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	var got order.Order
	f.store.EXPECT().Create(mock.Anything, mock.Anything, order.Fence{}, mock.Anything).
		RunAndReturn(func(_ context.Context, o order.Order, _ order.Fence, _ func(context.Context) error) error {
			got = o
			return nil
		})
	f.lock.EXPECT().Unlock(mock.Anything).Return(nil)

	_, err := f.svc.Place(context.Background(), 42, 7)
	require.NoError(t, err)
	assert.True(t, v.OnSale(got.CreatedAt), "got createdAt %s, want within the sale [%s, %s)",
		got.CreatedAt.Format(time.RFC3339Nano), v.BeginTime.Format(time.RFC3339Nano), v.EndTime.Format(time.RFC3339Nano))
	// In whole milliseconds, as the sale's times are: MySQL would round 600 µs up, to the end.
	assert.Equal(t, now, got.CreatedAt, "createdAt: the instant the window was judged, in whole milliseconds")
}

func TestPlaceRejectsBeforeLocking(t *testing.T) {
	tests := []struct {
		name    string
		voucher voucher.Voucher
		err     error
		wantErr error
		result  string
	}{
		{"not found", voucher.Voucher{}, voucher.ErrNotFound, voucher.ErrNotFound, ""},
		{"database down", voucher.Voucher{}, errors.New("dial tcp: refused"), order.ErrUnavailable, order.ResultError},
		{"not begun", voucher.Voucher{Stock: 1, BeginTime: now.Add(time.Second), EndTime: now.Add(time.Hour)}, nil, order.ErrSaleNotActive, order.ResultSaleNotActive},
		{"ended (end is exclusive)", voucher.Voucher{Stock: 1, BeginTime: now.Add(-time.Hour), EndTime: now}, nil, order.ErrSaleNotActive, order.ResultSaleNotActive},
		{"no stock", voucher.Voucher{Stock: 0, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}, nil, order.ErrSoldOut, order.ResultSoldOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t) // the mocks fail the test on any unexpected call: no lock, no store
			f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(tt.voucher, tt.err)
			if errors.Is(tt.wantErr, order.ErrSoldOut) { // the one read: has the user an order of it?
				f.store.EXPECT().GetByUser(mock.Anything, int64(42), int64(7)).Return(order.Order{}, order.ErrNotFound)
			}
			_, err := f.svc.Place(context.Background(), 42, 7)
			assert.ErrorIs(t, err, tt.wantErr)
			if tt.result != "" {
				assert.Equal(t, 1.0, f.count(tt.result), "count of %s", tt.result)
			}
		})
	}
}

func TestPlaceLockBusyFailsFast(t *testing.T) {
	f := newFixture(t)
	f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(onSale(), nil)
	f.locks.EXPECT().New("order:42").Return(f.lock)
	f.lock.EXPECT().TryLock(mock.Anything, 5*time.Second).Return(false, nil)
	_, err := f.svc.Place(context.Background(), 42, 7)
	assert.ErrorIs(t, err, order.ErrInProgress)
	assert.Equal(t, 1.0, f.count(order.ResultInProgress))
}

// TestPlaceRedisDownFailsClosed: no lock, no order.
func TestPlaceRedisDownFailsClosed(t *testing.T) {
	f := newFixture(t)
	f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(onSale(), nil)
	f.locks.EXPECT().New("order:42").Return(f.lock)
	f.lock.EXPECT().TryLock(mock.Anything, 5*time.Second).Return(false, errors.New("redis: connection refused"))
	_, err := f.svc.Place(context.Background(), 42, 7)
	assert.ErrorIs(t, err, order.ErrUnavailable)
	assert.Equal(t, 1.0, f.count(order.ResultError))
	f.store.AssertNotCalled(t, "Create")
}

func TestPlaceAfterLockFailures(t *testing.T) {
	errRead := errors.New("read timeout")
	tests := []struct {
		name     string
		idErr    error
		storeErr error
		wantErr  error
		result   string
		// The read of the existing order after an already-ordered refusal: its error, and
		// the id Place must then report (0: a bare ErrAlreadyOrdered).
		readErr error
		wantID  int64
	}{
		{name: "id generator down", idErr: errors.New("redis down"), wantErr: order.ErrUnavailable, result: order.ResultError},
		{name: "database error", storeErr: errors.New("deadlock found"), wantErr: order.ErrUnavailable, result: order.ResultError},
		{name: "already ordered", storeErr: order.ErrAlreadyOrdered, wantErr: order.ErrAlreadyOrdered, result: order.ResultAlreadyOrdered, wantID: 77},
		{name: "already ordered, its id unreadable", storeErr: order.ErrAlreadyOrdered, wantErr: order.ErrAlreadyOrdered, result: order.ResultAlreadyOrdered, readErr: errRead},
		{name: "sold out in the transaction", storeErr: order.ErrSoldOut, wantErr: order.ErrSoldOut, result: order.ResultSoldOut},
		{name: "duplicate caught by the unique key", storeErr: order.ErrDuplicate, wantErr: order.ErrAlreadyOrdered, result: order.ResultDuplicateByDB, wantID: 77},
		{name: "duplicate, its id unreadable", storeErr: order.ErrDuplicate, wantErr: order.ErrAlreadyOrdered, result: order.ResultDuplicateByDB, readErr: errRead},
		{name: "fenced: the lock passed to a newer holder", storeErr: order.ErrFenced, wantErr: order.ErrFenced, result: order.ResultFenced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.expectLocked()
			f.ids.EXPECT().Next(mock.Anything).Return(99, tt.idErr)
			if tt.idErr == nil {
				f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(tt.storeErr)
			}
			if errors.Is(tt.wantErr, order.ErrAlreadyOrdered) {
				f.store.EXPECT().GetByUser(mock.Anything, int64(42), int64(7)).Return(order.Order{ID: 77, UserID: 42, VoucherID: 7}, tt.readErr)
			}
			f.lock.EXPECT().Unlock(mock.Anything).Return(nil) // released on every path
			_, err := f.svc.Place(context.Background(), 42, 7)
			assert.ErrorIs(t, err, tt.wantErr)
			var ao *order.AlreadyOrderedError
			if tt.wantID != 0 {
				require.ErrorAs(t, err, &ao, "the existing order's id")
				assert.Equal(t, tt.wantID, ao.OrderID)
			} else {
				assert.NotErrorAs(t, err, &ao, "an id, though none could be read")
			}
			assert.Equal(t, 1.0, f.count(tt.result), "count of %s", tt.result)
			assert.Zero(t, f.count(order.ResultCreated))
			assert.Zero(t, f.count(order.ResultError)+f.count(order.ResultAlreadyOrdered)+f.count(order.ResultDuplicateByDB)+
				f.count(order.ResultSoldOut)+f.count(order.ResultFenced)-1, "one result counted, whatever the read of the existing order did")
		})
	}
}

func TestPlaceLockLostAtUnlockIsCounted(t *testing.T) {
	f := newFixture(t)
	f.expectLocked()
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	f.lock.EXPECT().Unlock(mock.Anything).Return(lock.ErrNotHeld)
	_, err := f.svc.Place(context.Background(), 42, 7)
	require.NoError(t, err, "the order committed; the lost lock is reported, not undone")
	c, err := order.ReadCounts(f.reg)
	require.NoError(t, err)
	assert.Equal(t, 1.0, c.LockLost)
}

// TestPlaceUnlocksAfterClientHangsUp: a cancelled request still releases its lock.
func TestPlaceUnlocksAfterClientHangsUp(t *testing.T) {
	f := newFixture(t)
	f.expectLocked()
	ctx, cancel := context.WithCancel(context.Background())
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		RunAndReturn(func(context.Context, order.Order, order.Fence, func(context.Context) error) error {
			cancel()
			return context.Canceled
		})
	f.lock.EXPECT().Unlock(mock.Anything).RunAndReturn(func(ctx context.Context) error {
		assert.NoError(t, ctx.Err(), "unlock context must outlive the request")
		return nil
	})
	_, err := f.svc.Place(ctx, 42, 7)
	assert.ErrorIs(t, err, order.ErrUnavailable)
}

// TestPlaceRunsProcessInsideTheCriticalSection: Config.Process replaces the delay as the
// store's business step and learns whose order it is.
func TestPlaceRunsProcessInsideTheCriticalSection(t *testing.T) {
	f := newFixture(t)
	var got []int64
	f.svc = order.NewService(f.vouchers, f.store, f.locks, f.ids, order.NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(io.Discard, nil)), order.Config{LockTTL: 5 * time.Second, Now: func() time.Time { return now },
			Process: func(_ context.Context, userID int64) error { got = append(got, userID); return nil }})
	f.expectLocked()
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		RunAndReturn(func(ctx context.Context, _ order.Order, _ order.Fence, process func(context.Context) error) error {
			assert.Empty(t, got, "process ran before the store called it")
			return process(ctx)
		})
	f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
	_, err := f.svc.Place(context.Background(), 42, 7)
	require.NoError(t, err)
	assert.Equal(t, []int64{42}, got)
}

// tokenLock is a mocked lock that hands out a fencing token.
type tokenLock struct {
	*lockmocks.Lock
	token int64
}

func (l tokenLock) Token() int64 { return l.token }

// TestPlaceFencing: with fencing on, the order's write presents its lock's token under the
// row of the token source and the lock's name; a lock that issues no token is refused as a
// failure (app.New refuses that configuration before any order).
func TestPlaceFencing(t *testing.T) {
	t.Run("token presented", func(t *testing.T) {
		f := newFixtureWith(t, order.Config{Fencing: true, TokenSource: "redis"})
		f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(onSale(), nil)
		f.locks.EXPECT().New("order:42").Return(tokenLock{f.lock, 41})
		f.lock.EXPECT().TryLock(mock.Anything, 5*time.Second).Return(true, nil)
		f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
		f.store.EXPECT().Create(mock.Anything, mock.Anything, order.Fence{Name: "redis/order:42", Token: 41}, mock.Anything).Return(nil)
		f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
		_, err := f.svc.Place(context.Background(), 42, 7)
		require.NoError(t, err)
	})
	t.Run("no token", func(t *testing.T) {
		f := newFixtureWith(t, order.Config{Fencing: true, TokenSource: "local"})
		f.expectLocked()
		f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
		_, err := f.svc.Place(context.Background(), 42, 7)
		assert.ErrorIs(t, err, order.ErrUnavailable)
		assert.Equal(t, 1.0, f.count(order.ResultError))
	})
}
