package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// holdSlot places user 42's order of voucher 7 (its voucher and lock expected by the caller)
// and returns once the order is inside the store, holding its admission slot; release lets
// it commit and waits for it.
func (f *fixture) holdSlot(t *testing.T) (release func()) {
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil).Once()
	inside, proceed := make(chan struct{}), make(chan struct{})
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		RunAndReturn(func(context.Context, order.Order, order.Fence, func(context.Context) error) error {
			close(inside)
			<-proceed
			return nil
		}).Once()
	done := make(chan error)
	go func() {
		_, err := f.svc.Place(context.Background(), 42, 7)
		done <- err
	}()
	<-inside
	return func() {
		close(proceed)
		require.NoError(t, <-done)
	}
}

// TestPlaceOverloadedAnswersAtOnce: with MaxInflight orders in progress, the next one is
// refused at once, touching no lock and no store, and counted; once a slot is free again an
// order is admitted.
func TestPlaceOverloadedAnswersAtOnce(t *testing.T) {
	f := newFixtureWith(t, order.Config{MaxInflight: 1})
	f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(onSale(), nil).Once() // then cached
	f.locks.EXPECT().New("order:42").Return(f.lock)
	f.lock.EXPECT().TryLock(mock.Anything, 5*time.Second).Return(true, nil)
	f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
	release := f.holdSlot(t) // user 42's order holds the only slot

	_, err := f.svc.Place(context.Background(), 43, 7) // no lock "order:43" is expected: none is made
	require.ErrorIs(t, err, order.ErrOverloaded)
	assert.Equal(t, 1.0, f.count(order.ResultOverloaded))

	release()
	f.ids.EXPECT().Next(mock.Anything).Return(100, nil).Once()
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(order.ErrAlreadyOrdered).Once()
	f.store.EXPECT().GetByUser(mock.Anything, int64(42), int64(7)).Return(order.Order{ID: 5, UserID: 42, VoucherID: 7}, nil).Once()
	_, err = f.svc.Place(context.Background(), 42, 7)
	assert.ErrorIs(t, err, order.ErrAlreadyOrdered, "admitted again once the slot was freed")
	assert.Equal(t, 1.0, f.count(order.ResultOverloaded))
}

// TestPlaceCachedRefusalsTakeNoSlot: a voucher read within the cache's life is not read again;
// not on sale is answered from memory even while every slot is taken, sold out only after the
// one read of the user's order (inside a slot: already_ordered when the user has one); a
// voucher not found is read again every time.
func TestPlaceCachedRefusalsTakeNoSlot(t *testing.T) {
	clock := now
	f := newFixtureWith(t, order.Config{MaxInflight: 1, Now: func() time.Time { return clock }})
	soldOut := voucher.Voucher{ID: 8, Stock: 0, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}
	f.vouchers.EXPECT().Get(mock.Anything, int64(8)).Return(soldOut, nil).Once()
	f.vouchers.EXPECT().Get(mock.Anything, int64(9)).Return(voucher.Voucher{}, voucher.ErrNotFound).Twice()
	ended := voucher.Voucher{ID: 10, Stock: 5, BeginTime: now.Add(-time.Hour), EndTime: now}
	f.vouchers.EXPECT().Get(mock.Anything, int64(10)).Return(ended, nil).Once()
	f.store.EXPECT().GetByUser(mock.Anything, mock.Anything, int64(8)).Return(order.Order{}, order.ErrNotFound)
	_, err := f.svc.Place(context.Background(), 42, 8)
	require.ErrorIs(t, err, order.ErrSoldOut)
	_, err = f.svc.Place(context.Background(), 42, 10)
	require.ErrorIs(t, err, order.ErrSaleNotActive)

	// Hold the only slot with an order of another voucher.
	f.expectLocked()
	f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
	release := f.holdSlot(t)
	_, err = f.svc.Place(context.Background(), 43, 10)
	assert.ErrorIs(t, err, order.ErrSaleNotActive, "from the cache, with no slot free")
	_, err = f.svc.Place(context.Background(), 43, 8)
	assert.ErrorIs(t, err, order.ErrOverloaded, "sold out reads the user's order, in a slot")
	release()
	_, err = f.svc.Place(context.Background(), 43, 8)
	assert.ErrorIs(t, err, order.ErrSoldOut, "from the cache and the user's (missing) order")

	for range 2 {
		_, err = f.svc.Place(context.Background(), 43, 9)
		assert.ErrorIs(t, err, voucher.ErrNotFound)
	}
	clock = clock.Add(time.Second) // the cached voucher 8 has expired: read again
	f.vouchers.EXPECT().Get(mock.Anything, int64(8)).Return(soldOut, nil).Once()
	_, err = f.svc.Place(context.Background(), 44, 8)
	assert.ErrorIs(t, err, order.ErrSoldOut)
	assert.Equal(t, 3.0, f.count(order.ResultSoldOut))
	assert.Equal(t, 2.0, f.count(order.ResultSaleNotActive))
}

// TestPlaceDeadline: every store and lock call of an order carries its deadline, and an
// order whose business step outlives the deadline fails as unavailable and still releases
// its lock.
func TestPlaceDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	f := newFixtureWith(t, order.Config{Timeout: timeout, Process: func(ctx context.Context, _ int64) error {
		<-ctx.Done() // a business step that takes longer than the order may
		return ctx.Err()
	}})
	start := time.Now()
	within := func(ctx context.Context) bool {
		d, ok := ctx.Deadline()
		// A bound, not a measurement (the test never waits on it): far below the 5 s lease, so a
		// call that carried the lock's lease instead of the order's deadline fails it.
		return ok && !d.After(start.Add(timeout+2*time.Second))
	}
	f.vouchers.EXPECT().Get(mock.MatchedBy(within), int64(7)).Return(onSale(), nil)
	f.locks.EXPECT().New("order:42").Return(f.lock)
	f.lock.EXPECT().TryLock(mock.MatchedBy(within), 5*time.Second).Return(true, nil)
	f.ids.EXPECT().Next(mock.MatchedBy(within)).Return(99, nil)
	f.store.EXPECT().Create(mock.MatchedBy(within), mock.Anything, mock.Anything, mock.Anything).
		RunAndReturn(func(ctx context.Context, _ order.Order, _ order.Fence, process func(context.Context) error) error {
			return process(ctx)
		})
	f.lock.EXPECT().Unlock(mock.Anything).RunAndReturn(func(ctx context.Context) error {
		assert.NoError(t, ctx.Err(), "the unlock outlives the order's deadline")
		return nil
	})
	_, err := f.svc.Place(context.Background(), 42, 7)
	assert.ErrorIs(t, err, order.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1.0, f.count(order.ResultError), "a deadline is the stores failing to answer in time")
}

// TestPlaceClientCanceledIsNotAnError: an order whose client went away is counted as
// canceled, not as an error of the stores.
func TestPlaceClientCanceledIsNotAnError(t *testing.T) {
	f := newFixture(t)
	f.expectLocked()
	ctx, cancel := context.WithCancel(context.Background())
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		RunAndReturn(func(ctx context.Context, _ order.Order, _ order.Fence, _ func(context.Context) error) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
	f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
	_, err := f.svc.Place(ctx, 42, 7)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1.0, f.count(order.ResultCanceled))
	assert.Zero(t, f.count(order.ResultError))
}

// TestConfigValidate: the lock's lease must outlive the order's deadline, and the deadline
// the simulated processing.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  order.Config
		want string // "" when valid
	}{
		{"defaults", order.Config{}, ""},
		{"default timeout follows a short lease", order.Config{LockTTL: time.Second}, ""},
		{"timeout inside the lease", order.Config{LockTTL: 10 * time.Second, Timeout: 9 * time.Second}, ""},
		{"timeout equal to the lease", order.Config{LockTTL: 3 * time.Second, Timeout: 3 * time.Second}, "shorter than the lock TTL"},
		{"timeout beyond the lease", order.Config{LockTTL: time.Second, Timeout: 2 * time.Second}, "shorter than the lock TTL"},
		// With fencing a lapsed lease cannot let a second write through: the fencing
		// experiment's orders outlive their lease on purpose.
		{"timeout beyond the lease, allowed", order.Config{LockTTL: 200 * time.Millisecond, Timeout: 2 * time.Second, ProcessingDelay: 500 * time.Millisecond, Fencing: true, OutliveLease: true}, ""},
		{"timeout beyond the lease, fenced by default", order.Config{LockTTL: time.Second, Timeout: 2 * time.Second, Fencing: true}, "shorter than the lock TTL"},
		{"delay beyond the timeout", order.Config{Timeout: time.Second, ProcessingDelay: time.Second}, "order delay"},
		{"negative bound", order.Config{MaxInflight: -1}, "must not be negative"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == "" {
			assert.NoError(t, err, tt.name)
		} else {
			assert.ErrorContains(t, err, tt.want, tt.name)
		}
	}
}
