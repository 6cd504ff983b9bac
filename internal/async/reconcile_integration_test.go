//go:build integration

package async_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/async"
)

// TestReconcileKeepsNoRows reconciles a voucher of 500,000 order rows on the real MariaDB/MySQL
// and requires that the heap in use grow by less than 8 bytes a row while it does: holding
// every row's order id alone takes that much. (With a map of every row it grew by 15 MB, 32
// bytes a row.) Garbage is collected at a tenth of the live heap meanwhile, so that what is
// measured is what Reconcile keeps, not what it dropped. Of the stream's three entries, two
// have a row (the first and the last, in different pages) and one does not: one is pending.
// Not parallel: the heap it measures is the test process's, which parallel tests would share.
func TestReconcileKeepsNoRows(t *testing.T) {
	const orders = 500_000
	ctx := context.Background()
	rdb, st, vid := bigVoucher(t, orders)
	const first = 1_000_000_000_001 // benchVoucher's first order id
	_, _, _, stream, _ := async.KeysOf(vid)
	for _, id := range []int64{first, first + orders - 1, first + orders} {
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{
			"order", strconv.FormatInt(id, 10), "user", "1", "at", "0"}}).Err())
	}

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	peak := ms.HeapInuse
	stop := sampleHeap(&peak)
	book, err := async.Reconcile(ctx, rdb, st, vid)
	stop()
	require.NoError(t, err)
	assert.Equal(t, async.Book{VoucherID: vid, Initial: 100_000_000 + orders, DBStock: 100_000_000, Pending: 1, Orders: orders}, book)
	grew := int64(peak) - int64(ms.HeapInuse)
	t.Logf("heap in use grew by %.1f MB (%.1f bytes a row)", float64(grew)/(1<<20), float64(grew)/orders)
	assert.Less(t, grew, int64(8*orders), "heap in use grew by %d bytes reading %d rows", grew, orders)
}

// BenchmarkReconcile reads the books of a voucher loaded into a redis-server of its own with
// SECKILL_BENCH_LOAD_ORDERS order rows (a million unless set; BenchmarkLoad's voucher) from the
// real MariaDB/MySQL, as seckill reconcile does. It reports the time per million orders
// (s/Morders) and the most heap in use seen during a read (heap-MB, sampled every 50 ms after
// a collection).
//
//	SECKILL_BENCH_LOAD_ORDERS=500000 go test -tags integration -run '^$' -bench '^BenchmarkReconcile$' -benchtime 3x ./internal/async/
func BenchmarkReconcile(b *testing.B) {
	ctx := context.Background()
	orders := benchLoadOrders(b)
	rdb, st, vid := bigVoucher(b, orders)
	if err := async.NewLoader(rdb, st, quiet).Load(ctx, vid); err != nil {
		b.Fatal(err)
	}
	var took time.Duration
	var peak uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		runtime.GC()
		stop := sampleHeap(&peak)
		began := time.Now()
		b.StartTimer()
		book, err := async.Reconcile(ctx, rdb, st, vid)
		b.StopTimer()
		took += time.Since(began)
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if book.Orders != int64(orders) || book.Drift() != 0 {
			b.Fatalf("got %d orders, drift %+d, want %d, +0", book.Orders, book.Drift(), orders)
		}
	}
	b.ReportMetric(took.Seconds()/float64(b.N)/(float64(orders)/1e6), "s/Morders")
	b.ReportMetric(float64(peak)/(1<<20), "heap-MB")
	b.ReportMetric(0, "ns/op")
}
