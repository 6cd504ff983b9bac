package order_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/testenv"
)

// TestSQLStoreFence: a token below the largest presented for the name is refused and writes
// nothing; an equal one (the same grant) and larger ones are admitted.
func TestSQLStoreFence(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := order.NewSQLStore(db)
			vid := newVoucher(t, db, 10)
			fence := testenv.Unique("test/order:")
			steps := []struct {
				token int64
				want  error
			}{{5, nil}, {4, order.ErrFenced}, {5, nil}, {7, nil}, {6, order.ErrFenced}, {1, order.ErrFenced}, {8, nil}}
			created := 0
			for i, st := range steps {
				err := s.Create(ctx, newOrder(int64(1000+i), int64(i+1), vid), order.Fence{Name: fence, Token: st.token}, nil)
				if st.want == nil {
					require.NoError(t, err, "token %d", st.token)
					created++
				} else {
					require.ErrorIs(t, err, st.want, "token %d", st.token)
				}
			}
			left, orders := stockOf(t, db, vid)
			assert.Equal(t, 10-created, left, "a fenced order takes no stock")
			assert.Equal(t, int64(created), orders, "a fenced order inserts nothing")
		})
	}
}

// TestSQLStoreFencesAStaleHolder is the case fencing exists for: holder A's lock expires
// while it is inside its critical section, B is granted the lock (a larger token), checks,
// and writes; A then goes on to write. Without a fence A's duplicate reaches the unique key;
// with one, B's claim, made before B read anything, refuses A's write.
func TestSQLStoreFencesAStaleHolder(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := order.NewSQLStore(db)
			vid := newVoucher(t, db, 10)
			fence := testenv.Unique("test/order:")
			for _, tt := range []struct {
				name   string
				a, b   order.Fence
				user   int64
				wantA  error
				orders int64
			}{
				{"unfenced", order.Fence{}, order.Fence{}, 10, order.ErrDuplicate, 1},
				{"fenced", order.Fence{Name: fence, Token: 1}, order.Fence{Name: fence, Token: 2}, 11, order.ErrFenced, 2},
			} {
				var errB error
				errA := s.Create(ctx, newOrder(tt.user*10, tt.user, vid), tt.a, func(context.Context) error {
					errB = s.Create(ctx, newOrder(tt.user*10+1, tt.user, vid), tt.b, nil)
					return nil
				})
				require.NoError(t, errB, "%s: B, the lock's holder now, places the order", tt.name)
				assert.ErrorIs(t, errA, tt.wantA, tt.name)
				_, orders := stockOf(t, db, vid)
				assert.Equal(t, tt.orders, orders, "%s: one order per user", tt.name)
			}
		})
	}
}

// TestSQLStoreFenceFirstClaimsRace: many first claims of one name at once, each with its own
// token: the row's insert race is settled by the primary key (never an error, never a
// deadlock), and the largest token is always admitted.
func TestSQLStoreFenceFirstClaimsRace(t *testing.T) {
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			s := order.NewSQLStore(db)
			const n = 24
			vid := newVoucher(t, db, n)
			fence := testenv.Unique("test/order:")
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					errs[i] = s.Create(context.Background(), newOrder(int64(5000+i), int64(i+1), vid),
						order.Fence{Name: fence, Token: int64(i + 1)}, nil)
				})
			}
			close(start)
			wg.Wait()
			created := 0
			for i, err := range errs {
				if err == nil {
					created++
					continue
				}
				assert.ErrorIs(t, err, order.ErrFenced, "token %d", i+1)
			}
			assert.NoError(t, errs[n-1], "the largest token")
			_, orders := stockOf(t, db, vid)
			assert.Equal(t, int64(created), orders)
		})
	}
}
