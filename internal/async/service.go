package async

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/order"
	"github.com/seckill/seckill/internal/voucher"
	"github.com/seckill/seckill/scripts/lua"
)

var (
	admitScript  = redis.NewScript(lua.AsyncAdmit)
	settleScript = redis.NewScript(lua.AsyncSettle)
)

// IDs generates order ids (internal/idgen).
type IDs interface {
	Next(ctx context.Context) (int64, error)
}

// Service admits orders in Redis; the Writer writes them to the database later.
type Service struct {
	rdb     redis.UniversalClient
	scripts redis.Scripter // runs the admission script: rdb, or its automatic pipeliner
	ids     IDs
	loader  *Loader
	metrics *Metrics
	log     *slog.Logger
	cfg     Config
	slots   chan struct{} // one token per admission in progress (Config.MaxInflight)

	mu     sync.Mutex
	queues map[int64]*admitQueue // the admissions waiting for their voucher's next call (admit.go)
	clock  redisClock            // Redis's clock, for the admissions' deadlines in the script
}

// NewService returns the admission side of the asynchronous mode.
func NewService(rdb redis.UniversalClient, ids IDs, loader *Loader, metrics *Metrics, log *slog.Logger, cfg Config) *Service {
	s := &Service{rdb: rdb, scripts: rdb, ids: ids, loader: loader, metrics: metrics, log: log, cfg: cfg.withDefaults(),
		queues: make(map[int64]*admitQueue)}
	s.slots = make(chan struct{}, s.cfg.MaxInflight)
	// Admissions run through go-redis's automatic pipeliner (experimental in go-redis 9.23):
	// the scripts of concurrent orders go to Redis in one write and come back in one read, so
	// a busy instance and Redis make a few system calls per batch instead of two each per
	// order. Each call still waits for its own answer within its own context, and the client's
	// MaxRetries -1 holds for the pipeliner too: nothing is sent twice. Redis's CPU per
	// admission fell from 44 to 30 µs with it (docs/loadtest-journal.md, the `make scaling`
	// run of 2026-11-22 12:13).
	if ap, err := rdb.AutoPipeline(); err == nil {
		s.scripts = ap
	} else {
		log.Warn("async: no automatic pipelining; one round trip per admission", "err", err)
	}
	return s
}

// Place admits userID's order of voucherID and returns its id; the order is pending until a
// writer commits it. It returns voucher.ErrNotFound, order.ErrSaleNotActive, order.ErrSoldOut,
// an error wrapping order.ErrAlreadyOrdered whose id is returned with it (the user's earlier
// order, pending or written), or an error wrapping order.ErrUnavailable when Redis or the
// database (for a voucher Redis lacks) failed or did not answer within Config.Timeout: then
// nothing was admitted. With Config.MaxInflight admissions already in progress it returns
// order.ErrOverloaded at once, having tried nothing.
func (s *Service) Place(ctx context.Context, userID, voucherID int64) (int64, error) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.metrics.admissions.WithLabelValues(order.ResultOverloaded).Inc()
		return 0, order.ErrOverloaded
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	id, result, err := s.place(ctx, userID, voucherID)
	s.metrics.admissions.WithLabelValues(result).Inc()
	return id, err
}

func (s *Service) place(ctx context.Context, userID, voucherID int64) (int64, string, error) {
	// One round trip: the id comes from a block the generator holds (internal/idgen.Blocks),
	// and the script checks everything, refusals included, and admits in one call.
	orderID, err := s.ids.Next(ctx)
	if err != nil {
		return 0, order.ResultError, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	for try := 0; ; try++ {
		id, err := s.admit(ctx, userID, voucherID, orderID)
		switch {
		case errors.Is(err, errNotLoaded) && try == 0:
			if err := s.loader.Load(ctx, voucherID); err != nil {
				if errors.Is(err, voucher.ErrNotFound) {
					return 0, resultNotFound, err
				}
				return 0, order.ResultError, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
			}
			continue
		case err == nil:
			return id, resultAdmitted, nil
		case errors.Is(err, order.ErrAlreadyOrdered):
			return id, order.ResultAlreadyOrdered, err
		case errors.Is(err, order.ErrSoldOut):
			return 0, order.ResultSoldOut, err
		case errors.Is(err, order.ErrSaleNotActive):
			return 0, order.ResultSaleNotActive, err
		case errors.Is(err, errNotSent), errors.Is(err, errLate):
			return 0, order.ResultError, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
		default:
			if s.admitted(ctx, userID, voucherID, orderID) {
				return orderID, resultAdmitted, nil
			}
			return 0, order.ResultError, fmt.Errorf("%w: %w", order.ErrUnavailable, err)
		}
	}
}

// readBackTimeout bounds the read that settles an admission whose answer was lost.
const readBackTimeout = 500 * time.Millisecond

// admitted settles an admission whose script call failed without an answer (a timeout, a
// broken connection): the script may have run, or may run yet, as a call given up on is not
// withdrawn (it waits in the pipeliner's queue or in a busy Redis's socket buffer). The order
// id is new, so the user mapping to it, or a status of it, proves the script ran: then the
// order is admitted and answered so, rather than answered 503 while a writer writes it.
// Otherwise async_settle.lua voids the id in the same step, and the script, should it run
// later, admits nothing: a read alone, as before, let it admit after the 503. Each settling
// call runs within readBackTimeout of its own, since the order's deadline may be what ran out.
//
// When the settling call fails too, and not because Redis refused the connection (no Redis
// listening, so no socket holding the call), Redis may be hung with the call in its socket, to
// run it when it resumes. If the call failed before the order's deadline (the client's I/O
// timeout, a second in this service, is shorter than the default deadline of two), it waits
// for the deadline and settles again. From the deadline on the script admits nothing of the
// order (it carries the deadline on Redis's clock, admit.go), so once the deadline has passed
// "not admitted" is final even when that call fails as well: the order is then answered 503
// and no later run of its script admits it. What is left unknown is a script that Redis ran
// before the deadline, whose answer was lost, with Redis out of reach for both settling calls:
// then the order was admitted though answered 503, and a retry answers 409 already_ordered
// with its id. The same holds for a Sentinel primary that ran the script, passed it to its
// replica and died before answering: its refused connection answers 503 at once, and the
// replica, once promoted, holds the order.
func (s *Service) admitted(ctx context.Context, userID, voucherID, orderID int64) bool {
	n, err := s.settle(ctx, userID, voucherID, orderID)
	// Refused, the settling call found no Redis listening: none whose socket could hold the call.
	if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
		if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
			<-ctx.Done() // the deadline, or the client gone (then there is no answer to get right)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				n, err = s.settle(ctx, userID, voucherID, orderID)
			}
		}
	}
	return err == nil && n == 1
}

// settle runs async_settle.lua for the admission within readBackTimeout.
func (s *Service) settle(ctx context.Context, userID, voucherID, orderID int64) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	k := keysOf(voucherID)
	return settleScript.Run(ctx, s.rdb, []string{k.users, k.orders}, userID, orderID).Int()
}
