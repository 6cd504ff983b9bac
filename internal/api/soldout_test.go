package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/database"
)

// TestStackRetryAfterLastUnitLearnsItsOrder: a client whose order took the last unit and whose
// 201 was lost (a 502/504, a timeout) retries, as the README tells it to. The retry must be
// answered 409 already_ordered with that order's orderId ("never a second order", and the
// asynchronous mode's answer), not 409 sold_out, which tells the client it has no order.
// The retry reaches an instance that has not cached the voucher: another instance behind
// nginx, or the same one a second later.
func TestStackRetryAfterLastUnitLearnsItsOrder(t *testing.T) {
	for _, s := range stacks(t) {
		t.Run(s.name, func(t *testing.T) {
			now := time.Now()
			v := s.createVoucher(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
			alice := s.users + 1
			w := s.order(t, alice, v)
			require.Equal(t, http.StatusCreated, w.Code, "body %s", w.Body)
			placed := decodeJSON(t, w)["orderId"]

			// A second instance over the same stores: its voucher cache is empty.
			log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
			other, err := app.New(context.Background(), log, app.Config{AdminToken: testToken, Lock: "redis",
				DBPool: database.Pool{MaxOpen: 2, MaxIdle: 2}}, s.stores)
			require.NoError(t, err)
			t.Cleanup(func() { _ = other.Close() })
			for _, h := range []struct {
				name string
				h    http.Handler
			}{{"another instance", other.Handler}, {"the same instance", s.h}} {
				retry := (&stack{h: h.h}).order(t, alice, v)
				require.Equal(t, http.StatusConflict, retry.Code, "%s: body %s", h.name, retry.Body)
				requireErrorBody(t, retry, api.CodeAlreadyOrdered)
				require.Equal(t, placed, decodeJSON(t, retry)["error"].(map[string]any)["orderId"], "%s: the retry names the order placed", h.name)
			}
			// Another user is still told the truth.
			w = s.order(t, alice+1, v)
			require.Equal(t, http.StatusConflict, w.Code, "body %s", w.Body)
			requireErrorBody(t, w, api.CodeSoldOut)
		})
	}
}
