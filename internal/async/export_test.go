package async

import dto "github.com/prometheus/client_model/go"

// SetBeforeAck makes w run f after each commit and before its acknowledgement; f returning
// false abandons the batch there, as a writer that crashed would. Call it before Start.
func SetBeforeAck(w *Writer, f func(voucherID int64, es []Entry) bool) { w.beforeAck = f }

// SetBeforeCreate makes l run f after it read a voucher's books and restored its users, just
// before it creates the sale hash.
func SetBeforeCreate(l *Loader, f func(voucherID int64)) { l.beforeCreate = f }

// SetAfterBooks makes l run f right after it read a voucher's books from the database.
func SetAfterBooks(l *Loader, f func(voucherID int64)) { l.afterBooks = f }

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

// HeldOf is the check w's batches of voucherID's stream run before they commit.
func HeldOf(w *Writer, voucherID int64) Held { return w.held(keysOf(voucherID)) }

// AttemptsOf is the key of voucherID's count of refused attempts per entry.
func AttemptsOf(voucherID int64) string { return keysOf(voucherID).attempts }
