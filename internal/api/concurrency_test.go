package api_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/order"
)

// TestStackConcurrentOrders fires orders at once through the API over the real lock and
// stores: one user's 40 concurrent orders create exactly one, and 60 users racing for 20
// vouchers create exactly 20; every other answer is a 409, never a 5xx.
func TestStackConcurrentOrders(t *testing.T) {
	for _, s := range stacks(t) {
		t.Run(s.name, func(t *testing.T) {
			now := time.Now()
			oneUser := s.createVoucher(t, 100, now.Add(-time.Hour), now.Add(time.Hour))
			scarce := s.createVoucher(t, 20, now.Add(-time.Hour), now.Add(time.Hour))

			type shot struct{ user, voucherID int64 }
			var shots []shot
			for range 40 {
				shots = append(shots, shot{s.users + 1, oneUser})
			}
			for i := range int64(60) {
				shots = append(shots, shot{s.users + 100 + i, scarce})
			}

			checks := make([]func(), len(shots))
			codes := make([]string, len(shots))
			statuses := make([]int, len(shots))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, sh := range shots {
				wg.Go(func() {
					<-start
					w, check := s.orderLater(t, sh.user, sh.voucherID)
					checks[i] = check
					statuses[i] = w.Code
					if w.Code >= 400 {
						var e api.ErrorBody
						if assert.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), "body %s", w.Body) {
							codes[i] = e.Error.Code
						}
					}
				})
			}
			close(start)
			wg.Wait()
			for _, check := range checks {
				check() // against docs/openapi.yaml, now that the race is over
			}

			count := map[int64]map[string]int{oneUser: {}, scarce: {}}
			for i, sh := range shots {
				switch {
				case statuses[i] == http.StatusCreated:
					count[sh.voucherID]["created"]++
				case statuses[i] == http.StatusConflict:
					count[sh.voucherID][codes[i]]++
				default:
					t.Errorf("order %d (user %d): status %d, want 201 or 409", i, sh.user, statuses[i])
				}
			}
			one := count[oneUser]
			assert.Equal(t, 1, one["created"], "one user's concurrent orders: created; all %v", one)
			assert.Equal(t, 39, one[api.CodeAlreadyOrdered]+one[api.CodeInProgress], "one user's concurrent orders: refused; all %v", one)
			assert.Equal(t, 20, count[scarce]["created"], "created from a stock of 20; all %v", count[scarce])
			assert.Equal(t, 40, count[scarce][api.CodeSoldOut], "sold out; all %v", count[scarce])

			w := serve(t, s.h, request{"GET", "/metrics", nil, ""})
			c, err := order.ReadCountsText(w.Body)
			require.NoError(t, err)
			assert.Zero(t, c.Orders[order.ResultDuplicateByDB], "the lock, not the unique key, must stop one user's duplicates")
			assert.Zero(t, c.LockLost)
			assert.Equal(t, int64(1), s.count(t, "SELECT COUNT(*) FROM voucher_orders WHERE voucher_id = ?", oneUser), "rows for one user")
			assert.Equal(t, int64(99), s.count(t, "SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", oneUser), "stock left")
			assert.Equal(t, int64(20), s.count(t, "SELECT COUNT(*) FROM voucher_orders WHERE voucher_id = ?", scarce), "rows for the scarce voucher")
			assert.Equal(t, int64(0), s.count(t, "SELECT stock FROM seckill_vouchers WHERE voucher_id = ?", scarce), "stock left: no oversell")
		})
	}
}
