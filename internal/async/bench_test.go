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
	"github.com/seckill/seckill/scripts/lua"
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
	dbs := testenv.Databases(b, database.Pool{MaxOpen: 4})
	db, ok := dbs["sqlite"]
	if !ok { // testenv.RealOnly
		db = dbs["mysql"]
	}
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

// perIDHeld is the held check as it was before async_held.lua read a batch in one range: one
// XRANGE per entry id. BenchmarkHeldCheck measures the one against the other.
const perIDHeld = `local gone = 0
for i = 1, #ARGV do
  if #redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i]) == 0 then
    gone = gone + 1
  end
end
return gone`

// BenchmarkHeldCheck runs the writer's held check (async_held.lua) and the per-id lookup it
// replaced on batches of the shapes a writer checks, over a stream of 10,000 entries as
// admissions write them, against a redis-server of its own. It reports Redis's time per entry
// checked (redis-us/entry: the usec of EVALSHA in INFO commandstats over the entries asked).
//
//	go test -run '^$' -bench HeldCheck -benchtime 2000x ./internal/async/
func BenchmarkHeldCheck(b *testing.B) {
	ctx := context.Background()
	rdb := testenv.StartRedisServer(b).Client()
	const stream = "bench:held"
	for i := 0; i < 10_000; i += 500 {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < i+500; j++ {
				p.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"order", 1<<40 + j, "user", j, "voucher", 7, "at", 1_700_000_000_000 + j}})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		b.Fatal(err)
	}
	every := func(from, to, step int) []any {
		var ids []any
		for i := from; i < to; i += step {
			ids = append(ids, msgs[i].ID)
		}
		return ids
	}
	shapes := []struct {
		name string
		ids  []any
	}{
		{"contiguous-20", every(5000, 5020, 1)},
		{"contiguous-200", every(5000, 5200, 1)},
		{"2-consumers-200", every(5000, 5400, 2)},
		{"3-consumers-200", every(5000, 5600, 3)},
		{"claimed-spread-200", every(0, 10_000, 50)},
	}
	scripts := []struct {
		name   string
		script *redis.Script
	}{{"range", redis.NewScript(lua.AsyncHeld)}, {"per-id", redis.NewScript(perIDHeld)}}
	for _, sh := range shapes {
		for _, sc := range scripts {
			b.Run(sh.name+"/"+sc.name, func(b *testing.B) {
				if err := sc.script.Load(ctx, rdb).Err(); err != nil {
					b.Fatal(err)
				}
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					gone, err := sc.script.Run(ctx, rdb, []string{stream}, sh.ids...).Int()
					if err != nil || gone != 0 {
						b.Fatalf("gone %d, err %v", gone, err)
					}
				}
				b.StopTimer()
				calls, usec := commandStat(b, rdb, "evalsha")
				if calls == 0 {
					b.Fatal("no EVALSHA in INFO commandstats")
				}
				b.ReportMetric(float64(usec)/float64(calls*int64(len(sh.ids))), "redis-us/entry")
			})
		}
	}
}

// commandStat is the calls of command (lower case) in INFO commandstats, and the microseconds
// Redis spent in them; commands a script ran count as calls of their own too.
func commandStat(tb testing.TB, rdb redis.UniversalClient, command string) (calls, usec int64) {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		stats, ok := strings.CutPrefix(line, "cmdstat_"+command+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls, usec
}
