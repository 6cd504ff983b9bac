//go:build integration

package async_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
)

// benchLoadOrders is how many orders BenchmarkLoad's voucher has: SECKILL_BENCH_LOAD_ORDERS,
// a million unless set.
func benchLoadOrders(b *testing.B) int {
	n, err := strconv.Atoi(testenv.Getenv("SECKILL_BENCH_LOAD_ORDERS", "1000000"))
	if err != nil || n < 1 {
		b.Fatalf("SECKILL_BENCH_LOAD_ORDERS: want a positive count, got %v", err)
	}
	return n
}

// digits is the numbers 0 to 99,999 as rows of one column, n, in any SQL either database
// speaks (MariaDB's seq_ tables and MySQL's recursion limits differ).
const digits = `(SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*g.d AS n FROM
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) g)`

// BenchmarkLoad loads a voucher with SECKILL_BENCH_LOAD_ORDERS order rows (a million unless
// set; users 1 to n, ids ascending as the ID generator's are) from the real MariaDB/MySQL into
// a redis-server of its own, the voucher's keys deleted before each load as a Redis that
// restarted empty lost them. It reports, per million orders, the load's time (s/Morders), the
// time Redis spent in the users' HSETs (redis-s/Morders, INFO commandstats), and this process's
// CPU (client-cpu-s/Morders: reading the rows and sending the HSETs, on any core), and, apart,
// the time of the database's read alone into a function that keeps nothing (read-s/Morders).
// heap-MB is the most heap in use seen during a load (sampled every 50 ms).
//
//	go test -tags integration -run '^$' -bench '^BenchmarkLoad$' -benchtime 3x ./internal/async/
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	orders := benchLoadOrders(b)
	rdb, st, vid := bigVoucher(b, orders)
	loader := async.NewLoader(rdb, st, quiet)
	million := float64(orders) / 1e6
	var redisUsec int64
	var cpu, took, read time.Duration
	var peak uint64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		began := time.Now()
		if _, err := st.ReadBooks(ctx, vid, 20_000, func([]int64, []int64) error { return nil }); err != nil {
			b.Fatal(err)
		}
		read += time.Since(began)
		sale, users, ords, stream, dead := async.KeysOf(vid)
		if err := rdb.Del(ctx, sale, users, ords, stream, dead).Err(); err != nil {
			b.Fatal(err)
		}
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		stop := sampleHeap(&peak)
		cpu0, began := selfCPU(), time.Now()
		b.StartTimer()
		err := loader.Load(ctx, vid)
		b.StopTimer()
		took += time.Since(began)
		cpu += selfCPU() - cpu0
		stop()
		if err != nil {
			b.Fatal(err)
		}
		_, usec := commandStat(b, rdb, "hset")
		redisUsec += usec
	}
	n := float64(b.N)
	b.ReportMetric(took.Seconds()/n/million, "s/Morders")
	b.ReportMetric(float64(redisUsec)/1e6/n/million, "redis-s/Morders")
	b.ReportMetric(cpu.Seconds()/n/million, "client-cpu-s/Morders")
	b.ReportMetric(read.Seconds()/n/million, "read-s/Morders")
	b.ReportMetric(float64(peak)/(1<<20), "heap-MB")
	b.ReportMetric(0, "ns/op")
}

// bigVoucher creates a voucher of orders order rows (benchVoucher) on a fresh database of the
// real MariaDB/MySQL, and starts a redis-server of its own.
func bigVoucher(t testing.TB, orders int) (*redis.Client, *async.Store, int64) {
	db := testenv.Databases(t, database.Pool{MaxOpen: 4})["mysql"]
	return testenv.StartRedisServer(t).Client(), async.NewStore(db), benchVoucher(t, db, orders)
}

// benchVoucher creates a voucher on sale with orders order rows, users 1 to orders, ids from
// 1,000,000,000,001 ascending, a hundred thousand rows per INSERT … SELECT.
func benchVoucher(b testing.TB, db *database.DB, orders int) int64 {
	ctx := context.Background()
	v, err := voucher.NewService(voucher.NewStore(db.DB)).Create(ctx, voucher.Voucher{Title: "b", Stock: 100_000_000,
		BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for from := 1; from <= orders; from += 100_000 {
		if err := db.Exec("INSERT INTO voucher_orders (id, user_id, voucher_id, status, created_at, updated_at) "+
			"SELECT ? + n, ? + n, ?, 1, ?, ? FROM "+digits+" d WHERE n < ?",
			1_000_000_000_000+from, from, v.ID, now, now, min(100_000, orders-from+1)).Error; err != nil {
			b.Fatal(err)
		}
	}
	return v.ID
}

// sampleHeap records in peak the most heap in use it sees, every 50 ms until stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		var ms runtime.MemStats
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapInuse)
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}
