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
	"github.com/seckill/seckill/internal/voucher"
)

// TestPlaceSoldOutNamesTheUsersOrder: a voucher without stock is refused before the lock, but
// a user who holds an order of it (the order that took the last unit, whose 201 was lost) is
// answered already_ordered with that order, as the retry contract and the asynchronous mode
// say; sold_out only for a user without one; and a read that fails is no sold_out.
func TestPlaceSoldOutNamesTheUsersOrder(t *testing.T) {
	soldOut := voucher.Voucher{ID: 7, Stock: 0, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}
	tests := []struct {
		name     string
		existing order.Order
		readErr  error
		wantErr  error
		wantID   int64
		result   string
	}{
		{"the user's order took a unit", order.Order{ID: 99, UserID: 42, VoucherID: 7}, nil, order.ErrAlreadyOrdered, 99, order.ResultAlreadyOrdered},
		{"the user has no order", order.Order{}, order.ErrNotFound, order.ErrSoldOut, 0, order.ResultSoldOut},
		{"the read fails", order.Order{}, errors.New("dial tcp: refused"), order.ErrUnavailable, 0, order.ResultError},
	}
	for _, tt := range tests {
		for _, cached := range []bool{false, true} {
			name := tt.name
			if cached {
				name += ", voucher cached"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t) // no lock, no id, no transaction: the mocks fail on any other call
				f.vouchers.EXPECT().Get(mock.Anything, int64(7)).Return(soldOut, nil).Once()
				f.store.EXPECT().GetByUser(mock.Anything, int64(42), int64(7)).Return(tt.existing, tt.readErr)
				if cached {
					_, _ = f.svc.Place(context.Background(), 42, 7) // loads the cache
				}
				before := f.count(tt.result)
				_, err := f.svc.Place(context.Background(), 42, 7)
				require.ErrorIs(t, err, tt.wantErr)
				var ao *order.AlreadyOrderedError
				if tt.wantID != 0 {
					require.ErrorAs(t, err, &ao)
					assert.Equal(t, tt.wantID, ao.OrderID)
				}
				assert.Equal(t, before+1, f.count(tt.result), "count of %s", tt.result)
			})
		}
	}
}
