package async

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/order"
)

// The asynchronous mode's metric names. Readers use these, never their own copies.
const (
	// MetricAdmissions counts admissions by result (order.ResultLabel): admitted, and the
	// refusals of order.Results.
	MetricAdmissions   = "seckill_async_admissions_total"
	MetricWritten      = "seckill_async_written_total"
	MetricClaimed      = "seckill_async_claimed_total"
	MetricDeadLettered = "seckill_async_dead_lettered_total"
	// MetricPending is the entries delivered to a writer and not acknowledged (XPENDING).
	MetricPending = "seckill_async_pending"
	// MetricBacklog is the entries admitted and not yet written: the streams' length.
	MetricBacklog = "seckill_async_backlog"
	// MetricOldestAge is the age of the oldest entry not yet written.
	MetricOldestAge = "seckill_async_oldest_pending_seconds"
	// MetricRetried counts the batches left pending to be tried again, by cause
	// (RetryUnreachable, RetryDatabaseState, RetryTransient).
	MetricRetried = "seckill_async_batches_retried_total"
	// MetricStranded is the registered vouchers without a sale hash and with an empty stream,
	// as the writer's last discovery found them: no loop reads them, and discovery loads them
	// (MetricStrandedLoads).
	MetricStranded = "seckill_async_stranded_vouchers"
	// MetricStrandedLoads counts discovery's loads of stranded vouchers by result
	// (StrandedLoaded, StrandedRemoved, StrandedFailed).
	MetricStrandedLoads = "seckill_async_stranded_loads_total"
	// MetricAdmitBatch is the orders each call of the admission script decided (admit.go).
	MetricAdmitBatch = "seckill_async_admission_batch_orders"
	// MetricAdmitCall is the time of each call of the admission script, from its sending to
	// its answer (or error) read back: Redis's part of an admission and the round trip, without
	// the wait for the voucher's previous call (admit.go) or for a processor afterwards.
	MetricAdmitCall = "seckill_async_admission_call_seconds"
)

// Results of discovery's load of a stranded voucher (MetricStrandedLoads's label "result").
const (
	// StrandedLoaded: the load created the sale hash (or found it created).
	StrandedLoaded = "loaded"
	// StrandedRemoved: the database has no such voucher, and its keys and registration were
	// removed from Redis.
	StrandedRemoved = "removed"
	// StrandedFailed: the load failed, or found no such voucher whose keys must stay; tried again
	// after a back-off.
	StrandedFailed = "failed"
)

// Causes of a batch left pending to be tried again (MetricRetried's label "cause").
const (
	// RetryUnreachable: the database did not answer a ping.
	RetryUnreachable = "database_unreachable"
	// RetryDatabaseState: the database answered with an error of its state, refusing every
	// write whatever the rows (database.RefusesEveryWrite: read-only, out of connections,
	// shutting down, a full disk or table). /readyz reports it once it lasts.
	RetryDatabaseState = "database_state"
	// RetryTransient: the database answered with a wait it gave up, a statement it ended or a
	// connection it lost (database.IsTransient, not RefusesEveryWrite): the voucher's row held
	// by another transaction, a deadlock, the batch's deadline, a statement killed or past the
	// server's time limit. Of one voucher, not of the service:
	// counted here and in the oldest pending age, not in /readyz.
	RetryTransient = "transient"
)

// Admission results besides order.Results.
const (
	resultAdmitted = "admitted"
	resultNotFound = "not_found"
)

// Metrics are the asynchronous mode's Prometheus metrics.
type Metrics struct {
	admissions   *prometheus.CounterVec
	admitBatch   prometheus.Histogram
	admitCall    prometheus.Histogram
	written      prometheus.Counter
	claimed      prometheus.Counter
	deadLettered prometheus.Counter
	pending      prometheus.Gauge
	backlog      prometheus.Gauge
	oldest       prometheus.Gauge
	retried      *prometheus.CounterVec
	stranded     prometheus.Gauge
	reloads      *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAdmissions,
			Help: "Asynchronous admissions by result: admitted, or why not."}, []string{order.ResultLabel}),
		admitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricAdmitBatch,
			Help:    "Orders decided by each call of the admission script: those of one voucher that arrived at the instance while its previous call was under way.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		admitCall: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricAdmitCall,
			Help:    "Time of each call of the admission script, from its sending to its answer read back, whatever the answer.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2}}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricWritten,
			Help: "Orders the writer committed to the database."}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricClaimed,
			Help: "Stream entries this writer claimed from another consumer (XAUTOCLAIM) after they idled past the claim time."}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricDeadLettered,
			Help: "Orders given up after too many refusals by the database: dead-lettered, reservation released."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricPending,
			Help: "Stream entries delivered to a writer and not acknowledged (XPENDING), all vouchers."}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricBacklog,
			Help: "Orders admitted and not yet written (the streams' length), all vouchers."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricOldestAge,
			Help: "Age in seconds of the oldest order admitted and not yet written; 0 when none."}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRetried,
			Help: "Batches the writer left pending to try again, by cause: the database unreachable, or an error that says nothing against the orders."}, []string{"cause"}),
		stranded: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricStranded,
			Help: "Registered vouchers without a sale hash and with an empty stream (a load that failed after registering them), as the writer's last discovery found them."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricStrandedLoads,
			Help: "Discovery's loads of stranded vouchers by result: loaded, removed (no such voucher in the database), or failed (tried again after a back-off)."}, []string{"result"}),
	}
	reg.MustRegister(m.admissions, m.admitBatch, m.admitCall, m.written, m.claimed, m.deadLettered, m.pending, m.backlog, m.oldest, m.retried, m.stranded, m.reloads)
	m.retried.WithLabelValues(RetryUnreachable)
	m.retried.WithLabelValues(RetryDatabaseState)
	m.retried.WithLabelValues(RetryTransient)
	for _, r := range []string{StrandedLoaded, StrandedRemoved, StrandedFailed} {
		m.reloads.WithLabelValues(r)
	}
	for _, r := range []string{resultAdmitted, order.ResultAlreadyOrdered, order.ResultSoldOut, order.ResultSaleNotActive, resultNotFound, order.ResultError} {
		m.admissions.WithLabelValues(r)
	}
	return m
}
