package order

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The metrics' names. Readers of the counters (the demo, the load test's verdict, tests) use
// these and ReadCounts, never their own copies.
const (
	MetricOrders       = "seckill_orders_total"         // counter by ResultLabel
	MetricLockAcquire  = "seckill_lock_acquire_seconds" // histogram by ResultLabel: acquired, busy, error
	MetricLockLost     = "seckill_lock_lost_total"      // counter
	MetricUnlockErrors = "seckill_unlock_errors_total"  // counter
	// ResultLabel is the label of MetricOrders and MetricLockAcquire.
	ResultLabel = "result"
)

// Results counted by MetricOrders.
const (
	ResultCreated        = "created"
	ResultAlreadyOrdered = "already_ordered"
	ResultInProgress     = "order_in_progress"
	ResultSoldOut        = "sold_out"
	ResultSaleNotActive  = "sale_not_active"
	ResultDuplicateByDB  = "duplicate_blocked_by_db"
	ResultError          = "error"
	// ResultOverloaded counts orders refused at admission: the instance was at MaxInflight.
	ResultOverloaded = "overloaded"
	// ResultCanceled counts orders whose client went away before they finished: not a
	// failure of the stores, so not an error.
	ResultCanceled = "canceled"
	// ResultFenced counts orders refused at the write because their lock's fencing token was
	// older than one a newer holder had presented (Config.Fencing): stale writers stopped.
	ResultFenced = "fenced"
)

// Results lists every result of MetricOrders, in the order reports show them.
var Results = []string{ResultCreated, ResultAlreadyOrdered, ResultInProgress, ResultSoldOut,
	ResultSaleNotActive, ResultDuplicateByDB, ResultFenced, ResultError, ResultOverloaded, ResultCanceled}

// Results of MetricLockAcquire.
const (
	lockAcquired = "acquired"
	lockBusy     = "busy"
	lockError    = "error"
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
			Name: MetricOrders,
			Help: "Order attempts by result. duplicate_blocked_by_db counts duplicates that got past the lock and only the unique key stopped; fenced, writes refused because the lock had passed to a newer holder; overloaded, orders refused at admission; canceled, orders whose client went away.",
		}, []string{ResultLabel}),
		lockAcquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricLockAcquire,
			Help:    "Time to try the per-user order lock, by outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{ResultLabel}),
		lockLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricLockLost,
			Help: "Unlocks that found the lock no longer ours (expired or taken): the critical section may have been violated.",
		}),
		unlockErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricUnlockErrors,
			Help: "Unlocks that failed for another reason (the lock is left to expire).",
		}),
	}
	reg.MustRegister(m.orders, m.lockAcquire, m.lockLost, m.unlockErrors)
	// Every result starts at zero so that a scrape shows the full set.
	for _, r := range Results {
		m.orders.WithLabelValues(r)
	}
	return m
}
