package async_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/async"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/idgen"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/voucher"
)

// BenchmarkAdmission admits orders of one voucher, every one a new user, from many goroutines
// (b.SetParallelism 32 per GOMAXPROCS) through Service.Place against a redis-server of its own,
// configured as the service configures its client (RESP2, no retries). Besides ns/op it
// reports the CPU per admission of this process (client-us/op: the service's side, handler
// excluded) and of Redis (redis-us/op, from INFO cpu), the two costs an admission adds to an
// instance and to Redis. No writer runs: the stream only grows.
//
//	go test -run '^$' -bench Admission -benchtime 100000x ./internal/async/
func BenchmarkAdmission(b *testing.B) {
	srv := testenv.StartRedisServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, MaxRetries: -1, PoolSize: 64})
	b.Cleanup(func() { _ = rdb.Close() })
	db := testenv.Databases(b, database.Pool{MaxOpen: 4})["sqlite"]
	v, err := voucher.NewService(voucher.NewStore(db.DB)).Create(context.Background(), voucher.Voucher{Title: "b",
		Stock: 100_000_000, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	st := async.NewStore(db)
	svc := async.NewService(rdb, idgen.NewBlocks(rdb, "order", 256, time.Second), async.NewLoader(rdb, st, quiet),
		async.NewMetrics(prometheus.NewRegistry()), quiet, async.Config{MaxInflight: 4096})
	var user atomic.Int64
	if _, err := svc.Place(context.Background(), user.Add(1), v.ID); err != nil {
		b.Fatal(err)
	}
	redisCPU0, selfCPU0 := redisCPU(b, rdb), selfCPU()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.Place(context.Background(), user.Add(1), v.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((selfCPU()-selfCPU0).Microseconds())/float64(b.N), "client-us/op")
	b.ReportMetric((redisCPU(b, rdb)-redisCPU0)*1e6/float64(b.N), "redis-us/op")
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the server's used_cpu_user + used_cpu_sys in seconds.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		k, val, _ := strings.Cut(line, ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(val, 64)
			sum += f
		}
	}
	return sum
}
