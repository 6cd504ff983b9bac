package order

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Results counted by seckill_orders_total.
const (
	ResultCreated         = "created"
	ResultAlreadyOrdered  = "already_ordered"
	ResultInProgress      = "order_in_progress"
	ResultSoldOut         = "sold_out"
	ResultSaleNotActive   = "sale_not_active"
	ResultDuplicateByDB   = "duplicate_blocked_by_db"
	ResultError           = "error"
	lockAcquired          = "acquired"
	lockBusy              = "busy"
	lockError             = "error"
	metricOrdersTotal     = "seckill_orders_total"
	metricLockAcquire     = "seckill_lock_acquire_seconds"
	metricLockLostTotal   = "seckill_lock_lost_total"
	metricUnlockErrsTotal = "seckill_unlock_errors_total"
)

// Metrics are the order service's Prometheus metrics.
type Metrics struct {
	orders       *prometheus.CounterVec
	lockAcquire  *prometheus.HistogramVec
	lockLost     prometheus.Counter
	unlockErrors prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (one registry per instance).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricOrdersTotal,
			Help: "Order attempts by result. duplicate_blocked_by_db counts duplicates that got past the lock and only the unique key stopped.",
		}, []string{"result"}),
		lockAcquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricLockAcquire,
			Help:    "Time to try the per-user order lock, by outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"result"}),
		lockLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricLockLostTotal,
			Help: "Unlocks that found the lock no longer ours (expired or taken): the critical section may have been violated.",
		}),
		unlockErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricUnlockErrsTotal,
			Help: "Unlocks that failed for another reason (the lock is left to expire).",
		}),
	}
	reg.MustRegister(m.orders, m.lockAcquire, m.lockLost, m.unlockErrors)
	// Every result starts at zero so that a scrape shows the full set.
	for _, r := range []string{ResultCreated, ResultAlreadyOrdered, ResultInProgress, ResultSoldOut,
		ResultSaleNotActive, ResultDuplicateByDB, ResultError} {
		m.orders.WithLabelValues(r)
	}
	return m
}
