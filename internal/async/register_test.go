package async_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/order"
)

// atLoadedRegister is a go-redis hook that runs do at the first SADD its client sends once
// the voucher's sale hash exists (looked up on another client): a loader's registration of
// the voucher after it created the sale hash. do's error fails the SADD before Redis gets it.
type atLoadedRegister struct {
	hookBase
	rdb  redis.UniversalClient
	sale string
	do   func() error
	done bool
}

func (h *atLoadedRegister) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "sadd" || h.done || h.rdb.Exists(ctx, h.sale).Val() == 0 {
			return next(ctx, cmd)
		}
		h.done = true
		if err := h.do(); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestAdmittedOrdersVoucherIsRegistered: the loader created a voucher's sale hash and only
// then registered the voucher (the registry is the set of streams the writers read and of
// orders hashes a lookup asks). Another instance admits as soon as the sale hash exists,
// without a load: an order admitted before the registration answered 404 to
// GET /api/orders/{id} although its 202 said pending; and when the registration failed (the
// SADD's Redis call), nothing registered the voucher again until an instance restarted, as
// admissions find the sale hash and never load: every order of the sale stayed unwritten,
// answered 404, and its stock was sold all the same. The loader registers the voucher before
// it creates the sale hash.
func TestAdmittedOrdersVoucherIsRegistered(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// fail fails the registration that comes once the sale hash exists.
		fail bool
	}{
		{name: "an admission between the creation and the registration"},
		{name: "the registration after the creation fails", fail: true},
	}
	for _, tc := range cases {
		for _, s := range stores(t) {
			t.Run(tc.name+"/"+s.name, func(t *testing.T) {
				f := newFixture(t, s, async.Config{})
				ctx := context.Background()
				vid := f.voucher(5)
				sale, _, _, _, _ := async.KeysOf(vid)

				// Admitted by another instance, which finds the sale hash and loads nothing.
				var other int64
				var seen async.PendingOrder
				var found bool
				hook := &atLoadedRegister{rdb: f.rdb, sale: sale, do: func() error {
					var err error
					other, err = f.svc.Place(ctx, 2, vid)
					require.NoError(t, err, "admitted once the sale hash exists")
					seen, found, err = f.statuses.Lookup(ctx, other)
					require.NoError(t, err)
					if tc.fail {
						return errInjected
					}
					return nil
				}}
				rdb := f.hookedClient(hook)
				loader := async.NewLoader(rdb, f.store, quiet)
				svc := async.NewService(rdb, idgen.New(f.rdb, "order"), loader, async.NewMetrics(prometheus.NewRegistry()), quiet, f.cfg)

				first, err := svc.Place(ctx, 1, vid)
				require.True(t, hook.done, "an admission ran once the sale hash existed")
				if tc.fail {
					require.ErrorIs(t, err, order.ErrUnavailable, "the load's registration failed")
				} else {
					require.NoError(t, err)
				}
				assert.True(t, found, "order %d, admitted, is found by a lookup (GET /api/orders/{id}): not 404", other)
				assert.False(t, seen.Failed, "and pending")
				require.True(t, f.registered(vid), "the voucher of an admitted order is in the registry")

				f.writer("w", nil)
				f.eventually("the admitted order written", func() bool { return f.rows(vid)[other] == 2 })
				if !tc.fail {
					f.eventually("the first order written", func() bool { return f.rows(vid)[first] == 1 })
				}
			})
		}
	}
}
