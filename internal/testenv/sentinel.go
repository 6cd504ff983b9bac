package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The failover settings of a test's sentinels, the ones scripts/sentinel.sh uses: the primary
// is judged down after SentinelDownAfter without a valid answer, and a failover that stalls
// is abandoned (and may be retried) after SentinelFailoverTimeout.
const (
	SentinelMaster          = "seckill"
	SentinelDownAfter       = time.Second
	SentinelFailoverTimeout = 3 * time.Second
	sentinelQuorum          = 2
	sentinelCount           = 3
	sentinelReadyTimeout    = 30 * time.Second // sentinels find each other by hello messages every 2 s
)

// Sentinel is a Redis primary, one replica and three sentinels (quorum 2) of one test's own,
// on loopback: redis-server processes, the sentinels in redis-server's sentinel mode (what
// Debian's redis-sentinel runs). Ports are ones loopback reserves, or five consecutive ones from
// SECKILL_TEST_SENTINEL_PORT (primary, replica, the sentinels) where free. All are killed
// when the test ends.
type Sentinel struct {
	Primary, Replica *RedisProcess
	Sentinels        []*RedisProcess

	t   testing.TB
	dir string
}

// StartSentinel starts the primary, the replica and the sentinels, and returns once the
// replica is in sync and every sentinel knows the replica and the two other sentinels: a
// failover can then be agreed on.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{t: t, dir: t.TempDir()}
	base, _ := strconv.Atoi(Getenv("SECKILL_TEST_SENTINEL_PORT", "0"))
	port := func(i int) int {
		if base == 0 {
			return 0
		}
		return base + i
	}
	s.Primary = startRedis(t, s.dir, port(0), func(p string) ([]string, error) {
		// A replica's first sync starts at once instead of after the default 5 s delay.
		return append(plainArgs(s.dir, p, redisLog(s.dir, p)), "--repl-diskless-sync-delay", "0"), nil
	})
	_, primaryPort, _ := net.SplitHostPort(s.Primary.Addr)
	s.Replica = startRedis(t, s.dir, port(1), func(p string) ([]string, error) {
		return append(plainArgs(s.dir, p, redisLog(s.dir, p)), "--replicaof", "127.0.0.1", primaryPort), nil
	})
	for i := range sentinelCount {
		s.Sentinels = append(s.Sentinels, startRedis(t, s.dir, port(2+i), func(p string) ([]string, error) {
			return s.sentinelArgs(p, primaryPort)
		}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelReadyTimeout)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		t.Fatalf("sentinel setup not ready within %s: %v (logs in %s)", sentinelReadyTimeout, err, s.dir)
	}
	return s
}

// sentinelArgs writes the configuration of a sentinel on port watching the primary on
// primaryPort (a sentinel needs a file it may rewrite) and returns its command line.
func (s *Sentinel) sentinelArgs(port, primaryPort string) ([]string, error) {
	conf := filepath.Join(s.dir, "sentinel-"+port+".conf")
	body := fmt.Sprintf(`bind 127.0.0.1
port %s
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %s %d
sentinel down-after-milliseconds %[4]s %[7]d
sentinel failover-timeout %[4]s %[8]d
sentinel parallel-syncs %[4]s 1
`, port, s.dir, redisLog(s.dir, port), SentinelMaster, primaryPort, sentinelQuorum,
		SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds())
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return nil, err
	}
	return []string{conf, "--sentinel"}, nil
}

// Addrs are the sentinels' addresses.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, p := range s.Sentinels {
		addrs[i] = p.Addr
	}
	return addrs
}

// Setting is the service's SECKILL_REDIS_SENTINEL for this setup.
func (s *Sentinel) Setting() string { return SentinelMaster + "@" + strings.Join(s.Addrs(), ",") }

// Dir holds the servers' logs and the sentinels' configuration files.
func (s *Sentinel) Dir() string { return s.dir }

func (s *Sentinel) sentinelClient(i int) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[i].Addr, MaxRetries: -1})
}

// waitReady polls until the replica's link is up and every sentinel sees the primary, a
// healthy replica and the other sentinels.
func (s *Sentinel) waitReady(ctx context.Context) error {
	replica := redis.NewClient(&redis.Options{Addr: s.Replica.Addr, MaxRetries: -1})
	defer replica.Close()
	clients := make([]*redis.SentinelClient, len(s.Sentinels))
	for i := range clients {
		clients[i] = s.sentinelClient(i)
		defer clients[i].Close()
	}
	ready := func() error {
		info, err := replica.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s not in sync with the primary", s.Replica.Addr)
		}
		for i, c := range clients {
			m, err := c.Master(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			if m["flags"] != "master" || m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
				return fmt.Errorf("sentinel %s sees the primary as flags=%s num-slaves=%s num-other-sentinels=%s",
					s.Sentinels[i].Addr, m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
			replicas, err := c.Replicas(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			if len(replicas) != 1 || replicas[0]["flags"] != "slave" || replicas[0]["master-link-status"] != "ok" {
				return fmt.Errorf("sentinel %s sees the replica as %v", s.Sentinels[i].Addr, replicas)
			}
		}
		return nil
	}
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %v", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Switch is a sentinel's +switch-master for the test's master: when it was received, and the
// address of the promoted primary.
type Switch struct {
	At   time.Time
	Addr string
}

// WatchSwitch subscribes to +switch-master on the first sentinel and returns a channel that
// yields the first switch of the test's master. It returns once the subscription is in place,
// so that a failover started after it is seen.
func (s *Sentinel) WatchSwitch() <-chan Switch {
	s.t.Helper()
	c := s.sentinelClient(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps := c.Subscribe(ctx, "+switch-master")
	s.t.Cleanup(func() { _ = ps.Close(); _ = c.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		s.t.Fatalf("subscribe to +switch-master on sentinel %s: %v", s.Sentinels[0].Addr, err)
	}
	out := make(chan Switch, 1)
	go func() {
		for msg := range ps.Channel() {
			// "<master name> <old ip> <old port> <new ip> <new port>"
			f := strings.Fields(msg.Payload)
			if len(f) == 5 && f[0] == SentinelMaster {
				out <- Switch{At: time.Now(), Addr: net.JoinHostPort(f[3], f[4])}
				return
			}
		}
	}()
	return out
}
