package lock

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkUncontended measures one goroutine's acquire+release pairs on each server
// (loadtest/lockbench compares with other libraries). Against a real Redis it also reports
// what a pair costs whatever the machine's load: the benchmark process's CPU time
// (client-µs/op), the server's CPU time (redis-µs/op, from INFO cpu), the time Redis spent
// running the scripts (script-µs/op) and the commands it ran, those inside scripts included
// (redis-calls/op; both from INFO commandstats). The server
// figures count every client's work, so give the benchmark a Redis of its own
// (SECKILL_TEST_REDIS_ADDR).
func BenchmarkUncontended(b *testing.B) {
	for _, srv := range testenv.RedisServers(b) {
		for _, k := range kinds {
			b.Run(srv.Name+"/"+k.name, func(b *testing.B) {
				c := NewClient(srv.Client, Options{})
				defer c.Close()
				l := k.make(proc{c: c, r: NewRegistry(c)}, testenv.Unique("bench-"))
				ctx := context.Background()
				var before cost
				if srv.Mini == nil {
					before = measureCost(b, srv.Client)
				}
				for b.Loop() {
					if ok, err := l.TryLockWait(ctx, -1, 10*time.Second); err != nil || !ok {
						b.Fatal(ok, err)
					}
					if err := l.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if srv.Mini == nil {
					measureCost(b, srv.Client).sub(before).report(b)
				}
			})
		}
	}
}

// cost is a snapshot of the CPU time spent so far by this process and by a Redis server, and
// of the commands the server ran.
type cost struct {
	client, server, exec time.Duration
	calls                int64
}

// measureCost takes a snapshot. INFO and CONFIG, the measurement's own commands, are not
// counted.
func measureCost(b *testing.B, rdb *redis.Client) cost {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	c := cost{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		switch {
		case name == "used_cpu_sys" || name == "used_cpu_user":
			s, _ := strconv.ParseFloat(v, 64)
			c.server += time.Duration(s * float64(time.Second))
		case strings.HasPrefix(name, "cmdstat_") && name != "cmdstat_info" && name != "cmdstat_config":
			calls, rest, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			c.calls += n
			if name == "cmdstat_evalsha" || name == "cmdstat_eval" {
				usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
				us, _ := strconv.ParseInt(usec, 10, 64)
				c.exec += time.Duration(us) * time.Microsecond
			}
		}
	}
	return c
}

func (c cost) sub(o cost) cost {
	return cost{client: c.client - o.client, server: c.server - o.server, exec: c.exec - o.exec, calls: c.calls - o.calls}
}

func (c cost) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(c.client.Microseconds())/n, "client-µs/op")
	b.ReportMetric(float64(c.server.Microseconds())/n, "redis-µs/op")
	b.ReportMetric(float64(c.exec.Microseconds())/n, "script-µs/op")
	b.ReportMetric(float64(c.calls)/n, "redis-calls/op")
}
