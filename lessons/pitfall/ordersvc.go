package pitfall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
)

// serviceOrders runs a lesson's orders through the service's own order path: order.Service
// over order.SQLStore on a lesson database, one Service per instance, every instance on the
// same database and the scene's Redis. The lesson adds nothing to the path, only what makes
// it visible and lets the script pause it, through the seams the service has: its lock
// factory (order.Locks) records the entry into the critical section when the lock is granted;
// its store (order.Store) records the order's transaction, and the exit when the transaction
// has ended (after its COMMIT); and Config.Process, the business step inside the critical
// section before the order's writes, is a pause point ("processing"). So the run shows where
// the service releases its lock with respect to its commit, whatever the service does.
type serviceOrders struct {
	store     *order.SQLStore
	vouchers  order.Vouchers
	voucherID int64
	user      int64
	lease     time.Duration
	ids       seqIDs

	mu   sync.Mutex
	regs []*prometheus.Registry // one per instance

	// Read by the script once every actor has ended (see observe).
	orders  int     // the user's committed orders
	dupByDB float64 // duplicates only uk_user_voucher stopped, over every instance
}

// newServiceOrders opens a lesson database with one voucher on sale for the user's orders.
func newServiceOrders(s *Scene, user int64) (*serviceOrders, error) {
	d, err := openLessonDB(s.ctx, s.env)
	if err != nil {
		return nil, fmt.Errorf("open the lesson's database: %w", err)
	}
	s.teardown = append(s.teardown, d.close)
	vouchers := voucher.NewService(voucher.NewStore(d.orm.DB))
	now := time.Now()
	v, err := vouchers.Create(s.ctx, voucher.Voucher{Title: "pitfall lesson", Stock: 10,
		BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)})
	if err != nil {
		return nil, fmt.Errorf("create the lesson's voucher: %w", err)
	}
	return &serviceOrders{store: order.NewSQLStore(d.orm), vouchers: vouchers, voucherID: v.ID, user: user, lease: s.Lease()}, nil
}

// instance returns a new service instance whose requests actor a runs.
func (so *serviceOrders) instance(s *Scene, a *Actor) *order.Service {
	reg := prometheus.NewRegistry()
	so.mu.Lock()
	so.regs = append(so.regs, reg)
	so.mu.Unlock()
	cfg := order.Config{
		// The script never lets the lease or the order's deadline run out; both only bound
		// the run if it hangs.
		LockTTL: so.lease, Timeout: so.lease / 2,
		Process: func(context.Context, int64) error {
			a.Note("runs the order's business step (order.Config.Process), before its writes")
			a.Point("processing")
			return nil
		},
	}
	return order.NewService(so.vouchers, recordedStore{Store: so.store, a: a}, recordedLocks{s: s, a: a},
		&so.ids, order.NewMetrics(reg), slog.New(slog.DiscardHandler), cfg)
}

// place orders the voucher for the user on svc and records the answer the client gets.
func (so *serviceOrders) place(ctx context.Context, a *Actor, svc *order.Service) (string, error) {
	_, err := svc.Place(ctx, so.user, so.voucherID)
	answer := ""
	switch {
	case err == nil:
		answer = created
	case errors.Is(err, order.ErrInProgress):
		answer = orderInProgress
	case errors.Is(err, order.ErrAlreadyOrdered):
		answer = alreadyOrdered
	default:
		return "", err
	}
	a.Note("answers %s", answer)
	return answer, nil
}

// observe reads, once every actor has ended, the user's orders in the database and the
// duplicates the instances counted, and records what the database holds.
func (so *serviceOrders) observe(s *Scene) error {
	_, err := so.store.GetByUser(s.ctx, so.user, so.voucherID)
	switch {
	case err == nil:
		so.orders = 1 // uk_user_voucher: never more
	case errors.Is(err, order.ErrNotFound):
		so.orders = 0
	default:
		return err
	}
	s.Note("in the database, user %d has %d order%s of the voucher", so.user, so.orders, plural(so.orders))
	for _, reg := range so.regs {
		c, err := order.ReadCounts(reg)
		if err != nil {
			return err
		}
		so.dupByDB += c.Orders[order.ResultDuplicateByDB]
	}
	return nil
}

// seqIDs numbers orders 1, 2, … in place of the service's Redis id generator, whose ids
// carry the time and would make every timeline different.
type seqIDs struct{ n atomic.Int64 }

func (g *seqIDs) Next(context.Context) (int64, error) { return g.n.Add(1), nil }

// recordedLocks hands the service the lock it would have (lock.SimpleRedisLock, in the
// scene's namespace, on the actor's recorded client) and records the grant as the entry into
// the critical section.
type recordedLocks struct {
	s *Scene
	a *Actor
}

func (l recordedLocks) New(name string) lock.Lock {
	return enteringLock{SimpleRedisLock: lock.NewSimpleRedisLock(l.a.Redis, l.a.Process, l.s.LockName(name)), a: l.a}
}

type enteringLock struct {
	*lock.SimpleRedisLock
	a *Actor
}

func (l enteringLock) TryLock(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := l.SimpleRedisLock.TryLock(ctx, ttl)
	if ok && err == nil {
		l.a.Enter()
	}
	return ok, err
}

// recordedStore records the order's transaction and, once it has ended, the exit from the
// critical section: the order's work is done, whether or not the lock is still held.
type recordedStore struct {
	order.Store
	a *Actor
}

func (r recordedStore) Create(ctx context.Context, o order.Order, fence order.Fence, process func(context.Context) error) error {
	err := r.Store.Create(ctx, o, fence, process)
	reply, note := "committed", "the order is visible to others"
	if err != nil {
		reply, note = "error: "+err.Error(), "nothing written"
	}
	r.a.Did("DB", fmt.Sprintf("order.SQLStore.Create(order %d of user %d)", o.ID, o.UserID), reply, note)
	r.a.Exit()
	return err
}
