package async

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
)

// SetBeforeAck makes w run f after each commit and before its acknowledgement; f returning
// false abandons the batch there, as a writer that crashed would. Call it before Start.
func SetBeforeAck(w *Writer, f func(voucherID int64, es []Entry) bool) { w.beforeAck = f }

// SetBeforeCreate makes l run f after it read a voucher's books and restored its users, just
// before it creates the sale hash.
func SetBeforeCreate(l *Loader, f func(voucherID int64)) { l.beforeCreate = f }

// SetAfterBooks makes l run f right after it read a voucher's books from the database.
func SetAfterBooks(l *Loader, f func(voucherID int64)) { l.afterBooks = f }

// SetStartFailed makes l run f after each failed load of LoadOnSale, with the attempt's
// number (1 for the first) and its error.
func SetStartFailed(l *Loader, f func(voucherID int64, attempt int, err error)) { l.startFailed = f }

// DBDown reports whether w holds the database for unreachable (Ready fails once that has
// lasted past DBDownBound).
func DBDown(w *Writer) bool { return w.dbDownSince.Load() != 0 }

// Gauges is what w's pending, backlog and oldest-age gauges read.
func Gauges(w *Writer) (pending, backlog float64, oldest time.Duration) {
	read := func(g interface{ Write(*dto.Metric) error }) float64 {
		var d dto.Metric
		if err := g.Write(&d); err != nil {
			panic(err)
		}
		return d.GetGauge().GetValue()
	}
	return read(w.metrics.pending), read(w.metrics.backlog), time.Duration(read(w.metrics.oldest) * float64(time.Second))
}

// KeysOf exposes a voucher's Redis keys to the tests.
func KeysOf(voucherID int64) (sale, users, orders, stream, dead string) {
	k := keysOf(voucherID)
	return k.sale, k.users, k.orders, k.stream, k.dead
}

// Admissions is the count of admissions with result, for the tests.
func (m *Metrics) Admissions(result string) float64 {
	var d dto.Metric
	if err := m.admissions.WithLabelValues(result).Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// Retried is the count of batches left pending to be tried again for cause, for the tests.
func (m *Metrics) Retried(cause string) float64 {
	var d dto.Metric
	if err := m.retried.WithLabelValues(cause).Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// HeldOf is the check w's batches of voucherID's stream run before they commit.
func HeldOf(w *Writer, voucherID int64) Held { return w.held(keysOf(voucherID)) }

// InStreamOrder is the order in which a writer hands its batch's entry ids to the held check.
func InStreamOrder(ids []string) []any { return inStreamOrder(ids) }

// StreamIDTime is when Redis added the entry of id, as the oldest-pending gauge reads it.
func StreamIDTime(id string) (time.Time, bool) { return streamIDTime(id) }

// AttemptsOf is the key of voucherID's count of refused attempts per entry.
func AttemptsOf(voucherID int64) string { return keysOf(voucherID).attempts }

// SetBeforeRetire makes w run f after a retirement copied the voucher's dead letters to the
// database and before its script. Call it before Start.
func SetBeforeRetire(w *Writer, f func(voucherID int64)) { w.beforeRetire = f }

// Retire runs one retirement of voucherID by w, as discovery does for a finished voucher past
// the retention, and reports whether it retired it.
func Retire(ctx context.Context, w *Writer, voucherID int64) (bool, error) {
	return w.retire(ctx, voucherID)
}

// Discover runs one discovery of w: loops for the vouchers to read, retirement for the old.
func Discover(w *Writer) { w.discover() }

// Registered reports whether voucherID is in the registry the writers and lookups read.
func Registered(ctx context.Context, rdb redis.UniversalClient, voucherID int64) (bool, error) {
	return rdb.SIsMember(ctx, registryKey, voucherID).Result()
}

// AllKeysOf is every Redis key of voucherID, the sale hash first.
func AllKeysOf(voucherID int64) []string {
	k := keysOf(voucherID)
	return []string{k.sale, k.users, k.orders, k.stream, k.dead, k.attempts}
}

// SetLoadBounds bounds l's loads: each step (the first, then each page of page orders read and
// restored, and the last) within step of the one before, the whole within step plus perOrder
// per order restored.
func SetLoadBounds(l *Loader, step, perOrder time.Duration, page int) {
	l.bounds = loadBounds{step: step, perOrder: perOrder, page: page}
}

// OrdersOfVoucher is the statement that reads every order of a voucher.
const OrdersOfVoucher = ordersOfVoucher

// RegistryKey is the registry's key: the vouchers the writers read and lookups ask.
const RegistryKey = registryKey

// LeavingKey is the key of the vouchers a retirement is taking out of the registry.
const LeavingKey = leavingKey

// SetLeftoverAfter sets how long a voucher stays among those leaving the registry before w's
// discovery settles it as a retirement's leftover.
func SetLeftoverAfter(w *Writer, d time.Duration) { w.leftoverAfter = d }

// Running reports whether w has a loop reading voucherID's stream.
func Running(w *Writer, voucherID int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[voucherID]
}

// Stranded is the gauge of stranded vouchers (MetricStranded), for the tests.
func (m *Metrics) Stranded() float64 {
	var d dto.Metric
	if err := m.stranded.Write(&d); err != nil {
		panic(err)
	}
	return d.GetGauge().GetValue()
}

// SetReloadHooks makes w's discovery run started, in discovery, when it starts a load of a
// stranded voucher, and done after each such load, with its result. Call it before Start.
func SetReloadHooks(w *Writer, started func(voucherID int64), done func(voucherID int64, result string)) {
	w.startedReload, w.afterReload = started, done
}

// StrandedLoads is the count of discovery's loads of stranded vouchers with result, for the
// tests.
func (m *Metrics) StrandedLoads(result string) float64 {
	var d dto.Metric
	if err := m.reloads.WithLabelValues(result).Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// Queued is how many admissions of voucherID wait at s for the voucher's next script call.
func Queued(s *Service, voucherID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[voucherID]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// Queues is how many vouchers have admissions waiting at s, or a call under way.
func Queues(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues)
}
