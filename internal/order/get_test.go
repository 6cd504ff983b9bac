package order_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/order"
)

// fakePending is a Pending over a map of summaries, failing with err when set; its record of
// failed orders is another map, failing with failedErr.
type fakePending struct {
	orders map[int64]order.Summary
	err    error
	asked  int

	failed      map[int64]order.Summary
	failedErr   error
	failedAsked int
}

func (p *fakePending) Failed(_ context.Context, id int64) (order.Summary, bool, error) {
	p.failedAsked++
	s, ok := p.failed[id]
	return s, ok, p.failedErr
}

func (p *fakePending) Lookup(_ context.Context, id int64) (order.Summary, bool, error) {
	p.asked++
	s, ok := p.orders[id]
	return s, ok, p.err
}

func (p *fakePending) OrderOf(_ context.Context, userID, voucherID int64) (int64, bool, error) {
	p.asked++
	for _, s := range p.orders {
		if s.UserID == userID && s.VoucherID == voucherID && s.State == order.StatePending {
			return s.ID, true, p.err
		}
	}
	return 0, false, p.err
}

func TestGetFromTheDatabase(t *testing.T) {
	row := order.Order{ID: 99, UserID: 42, VoucherID: 7, Status: order.StatusUnpaid, CreatedAt: now}
	errDB := errors.New("dial tcp: connection refused")
	tests := []struct {
		name    string
		user    int64
		row     order.Order
		err     error
		want    order.Summary
		wantErr error
	}{
		{name: "own order", user: 42, row: row, want: order.Summary{ID: 99, UserID: 42, VoucherID: 7, State: order.StateCreated, CreatedAt: now}},
		{name: "another user's order", user: 43, row: row, wantErr: order.ErrNotFound},
		{name: "no such order", user: 42, err: order.ErrNotFound, wantErr: order.ErrNotFound},
		{name: "database down", user: 42, err: errDB, wantErr: order.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.store.EXPECT().Get(mock.Anything, int64(99)).Return(tt.row, tt.err)
			got, err := f.svc.Get(context.Background(), tt.user, 99)
			require.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, tt.want, got)
			if errors.Is(err, order.ErrNotFound) {
				assert.Equal(t, order.ErrNotFound, err, "another user's order and a missing one answer alike")
			}
		})
	}
}

// TestGetBoundedByTheOrderTimeout: a store that hangs is given up at the order's deadline.
func TestGetBoundedByTheOrderTimeout(t *testing.T) {
	f := newFixtureWith(t, order.Config{Timeout: 50 * time.Millisecond})
	f.store.EXPECT().Get(mock.Anything, int64(99)).RunAndReturn(func(ctx context.Context, _ int64) (order.Order, error) {
		deadline, ok := ctx.Deadline()
		assert.True(t, ok, "the read has no deadline")
		assert.False(t, deadline.After(time.Now().Add(50*time.Millisecond)), "deadline %v beyond the order timeout", deadline)
		<-ctx.Done()
		return order.Order{}, ctx.Err()
	})
	_, err := f.svc.Get(context.Background(), 42, 99)
	require.ErrorIs(t, err, order.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestGetAsksPendingFirst: what Pending knows is answered without the database, with the
// same ownership rule; what it does not know is read from the database.
func TestGetAsksPendingFirst(t *testing.T) {
	pending := order.Summary{ID: 5, UserID: 42, VoucherID: 7, State: order.StatePending, CreatedAt: now}
	failed := order.Summary{ID: 6, UserID: 42, VoucherID: 8, State: order.StateFailed, Reason: "write failed 5 times", CreatedAt: now}
	p := &fakePending{orders: map[int64]order.Summary{5: pending, 6: failed}}
	f := newFixtureWith(t, order.Config{Pending: p})

	got, err := f.svc.Get(context.Background(), 42, 5)
	require.NoError(t, err)
	assert.Equal(t, pending, got)
	got, err = f.svc.Get(context.Background(), 42, 6)
	require.NoError(t, err)
	assert.Equal(t, failed, got)
	_, err = f.svc.Get(context.Background(), 43, 5)
	assert.Equal(t, order.ErrNotFound, err, "another user's pending order")

	f.store.EXPECT().Get(mock.Anything, int64(99)).Return(order.Order{ID: 99, UserID: 42, VoucherID: 9, CreatedAt: now}, nil).Once()
	got, err = f.svc.Get(context.Background(), 42, 99)
	require.NoError(t, err)
	assert.Equal(t, order.StateCreated, got.State, "unknown to Pending: the database's row")

	p.err = errors.New("redis: i/o timeout")
	_, err = f.svc.Get(context.Background(), 42, 99)
	assert.ErrorIs(t, err, order.ErrUnavailable, "Pending failing: no guess from the database alone")
	assert.Equal(t, 5, p.asked)
}

// TestAlreadyOrderedAsksPendingFirst: the 409's order id comes from Pending when it knows
// the user's order, else from the database.
func TestAlreadyOrderedAsksPendingFirst(t *testing.T) {
	p := &fakePending{orders: map[int64]order.Summary{5: {ID: 5, UserID: 42, VoucherID: 7, State: order.StatePending}}}
	f := newFixtureWith(t, order.Config{Pending: p})
	f.expectLocked()
	f.ids.EXPECT().Next(mock.Anything).Return(99, nil)
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(order.ErrAlreadyOrdered).Once()
	f.lock.EXPECT().Unlock(mock.Anything).Return(nil)
	_, err := f.svc.Place(context.Background(), 42, 7)
	var ao *order.AlreadyOrderedError
	require.ErrorAs(t, err, &ao)
	assert.Equal(t, int64(5), ao.OrderID, "Pending's order")

	delete(p.orders, 5)
	f.ids.EXPECT().Next(mock.Anything).Return(100, nil)
	f.store.EXPECT().Create(mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(order.ErrAlreadyOrdered).Once()
	f.store.EXPECT().GetByUser(mock.Anything, int64(42), int64(7)).Return(order.Order{ID: 77}, nil).Once()
	_, err = f.svc.Place(context.Background(), 42, 7)
	require.ErrorAs(t, err, &ao)
	assert.Equal(t, int64(77), ao.OrderID, "the database's order")
}

// TestGetAsksFailedRecordsLast: the record of failed orders, which outlives Pending's Lookup,
// is asked only for an order that neither Lookup nor the database knows: a written order, the
// common case, costs no read of it; a failed one is answered from it, to its owner only.
func TestGetAsksFailedRecordsLast(t *testing.T) {
	failed := order.Summary{ID: 6, UserID: 42, VoucherID: 8, State: order.StateFailed, Reason: "write failed 5 times", CreatedAt: now}
	p := &fakePending{failed: map[int64]order.Summary{6: failed}}
	f := newFixtureWith(t, order.Config{Pending: p})

	f.store.EXPECT().Get(mock.Anything, int64(99)).Return(order.Order{ID: 99, UserID: 42, VoucherID: 9, CreatedAt: now}, nil).Once()
	got, err := f.svc.Get(context.Background(), 42, 99)
	require.NoError(t, err)
	assert.Equal(t, order.StateCreated, got.State)
	assert.Zero(t, p.failedAsked, "a written order read the record of failed orders")

	f.store.EXPECT().Get(mock.Anything, int64(6)).Return(order.Order{}, order.ErrNotFound).Times(2)
	got, err = f.svc.Get(context.Background(), 42, 6)
	require.NoError(t, err)
	assert.Equal(t, failed, got, "no row: the record's")
	_, err = f.svc.Get(context.Background(), 43, 6)
	assert.Equal(t, order.ErrNotFound, err, "another user's failed order")

	f.store.EXPECT().Get(mock.Anything, int64(7)).Return(order.Order{}, order.ErrNotFound).Times(2)
	_, err = f.svc.Get(context.Background(), 42, 7)
	assert.Equal(t, order.ErrNotFound, err, "known nowhere")
	p.failedErr = errors.New("dial tcp: connection refused")
	_, err = f.svc.Get(context.Background(), 42, 7)
	assert.ErrorIs(t, err, order.ErrUnavailable, "the record failing: no not-found guessed")

	asked := p.failedAsked
	f.store.EXPECT().Get(mock.Anything, int64(8)).Return(order.Order{}, errors.New("dial tcp: connection refused")).Once()
	_, err = f.svc.Get(context.Background(), 42, 8)
	assert.ErrorIs(t, err, order.ErrUnavailable)
	assert.Equal(t, asked, p.failedAsked, "the database failing: the record is not asked")
}
