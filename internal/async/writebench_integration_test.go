//go:build integration

package async_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkWrite writes batches of async.DefaultBatch new orders (Store.Write: the stock
// UPDATE and the INSERT, no read, as every batch of new orders) into a voucher that already has
// SECKILL_BENCH_WRITE_ORDERS order rows (a hundred thousand unless set), on a fresh database
// of the real MariaDB/MySQL. Each batch's users are new and come in no order of their ids, as
// a sale's do; the ids ascend, as the ID generator's. It reports the time per order written
// (us/order): what each index of voucher_orders costs the writer.
//
//	go test -tags integration -run '^$' -bench '^BenchmarkWrite$' -benchtime 500x ./internal/async/
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	existing, err := strconv.Atoi(testenv.Getenv("SECKILL_BENCH_WRITE_ORDERS", "100000"))
	if err != nil || existing < 1 {
		b.Fatalf("SECKILL_BENCH_WRITE_ORDERS: want a positive count, got %v", err)
	}
	db := testenv.Databases(b, database.Pool{MaxOpen: 4})["mysql"]
	st, vid := async.NewStore(db), benchVoucher(b, db, existing)
	users := rand.New(rand.NewPCG(1, 2)).Perm(b.N * async.DefaultBatch)
	batch := make([]async.Entry, async.DefaultBatch)
	next := int64(2_000_000_000_000)
	b.ResetTimer()
	for i := range b.N {
		for j := range batch {
			next++
			batch[j] = async.Entry{OrderID: next, UserID: int64(existing + 1 + users[i*len(batch)+j]), VoucherID: vid, At: time.Now()}
		}
		out, err := st.Write(ctx, vid, batch, nil)
		if err != nil {
			b.Fatal(err)
		}
		if out[0] != async.Written {
			b.Fatalf("got outcome %v, want Written", out[0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(batch)), "us/order")
}
