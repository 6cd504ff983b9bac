package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/api"
	"github.com/seckill/seckill/internal/voucher"
)

// errNoDeadline is what hangingVouchers answers to a call without a deadline, at once: a store
// that hangs would hold such a call for as long as its driver's own timeouts allow.
var errNoDeadline = errors.New("the call has no deadline")

// hangingVouchers is a voucher service whose store hangs: each call answers only when its
// context ends. It records how long each call had before its deadline.
type hangingVouchers struct {
	budgets chan time.Duration
}

func (h *hangingVouchers) hang(ctx context.Context) error {
	d, ok := ctx.Deadline()
	if !ok {
		return errNoDeadline
	}
	h.budgets <- time.Until(d)
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingVouchers) Create(ctx context.Context, _ voucher.Voucher) (voucher.Voucher, error) {
	return voucher.Voucher{}, h.hang(ctx)
}

func (h *hangingVouchers) Get(ctx context.Context, _ int64) (voucher.Voucher, error) {
	return voucher.Voucher{}, h.hang(ctx)
}

// TestVoucherRequestsHaveADeadline: a voucher request whose store hangs is given up at
// Config.VoucherTimeout and answered 503 unavailable, never held by the hung store.
func TestVoucherRequestsHaveADeadline(t *testing.T) {
	const bound = 100 * time.Millisecond
	vs := &hangingVouchers{budgets: make(chan time.Duration, 1)}
	h := api.NewServer(discardLog(), api.Config{AdminToken: testToken, VoucherTimeout: bound}, vs, &fakeOrders{})
	for _, r := range []request{
		{"POST", "/api/vouchers", admin, validVoucherBody},
		{"GET", "/api/vouchers/1", nil, ""},
		{"HEAD", "/api/vouchers/1", nil, ""},
	} {
		t.Run(r.method, func(t *testing.T) {
			w := serve(t, h, r)
			require.Equal(t, http.StatusServiceUnavailable, w.Code, "body %s", w.Body)
			if r.method != "HEAD" {
				requireErrorBody(t, w, api.CodeUnavailable)
			}
			select {
			case b := <-vs.budgets:
				// Measured from the store call, which begins after the request arrived.
				assert.LessOrEqual(t, b, bound, "the store call's deadline")
			default:
				t.Fatalf("the store call had no deadline (%v)", errNoDeadline)
			}
		})
	}
}
