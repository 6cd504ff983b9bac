// Package testenv gives tests the stores they run against: the embedded ones always, and the
// real MariaDB/MySQL and Redis when the tests are built with -tags integration
// (make test-integration), unless RealOnly leaves the embedded ones to make test. A real
// store that cannot be reached fails the test; it never skips.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Redis is one Redis server under test.
type Redis struct {
	Name   string // "embedded" or "real"
	Client *redis.Client
	Mini   *miniredis.Miniredis // the embedded server, nil for a real one
}

// RealOnly reports whether a test that runs once per store runs on the real stores alone:
// in integration builds with SECKILL_TEST_REAL_ONLY=1. CI sets it for make test-integration
// and make test-mysql, which follow make test, where every test ran on the embedded stores
// already; run that way, the embedded half would only repeat it. Tests that run on the
// embedded stores alone, or on both at once, run as they always do (but for
// cmd/seckill's TestDemoShowsEachGuard, which then runs the guards of real servers alone).
func RealOnly() bool {
	return Integration && os.Getenv("SECKILL_TEST_REAL_ONLY") == "1"
}

// RedisServers returns the embedded Redis (unless RealOnly) and, in integration builds, the
// real one at SECKILL_TEST_REDIS_ADDR (default 127.0.0.1:6379). Clients are closed when t
// ends.
func RedisServers(t testing.TB) []Redis {
	t.Helper()
	var servers []Redis
	if !RealOnly() {
		servers = append(servers, EmbeddedRedis(t))
	}
	if Integration {
		servers = append(servers, RealRedis(t))
	}
	return servers
}

// EmbeddedRedis starts a miniredis server for t.
func EmbeddedRedis(t testing.TB) Redis {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return Redis{Name: "embedded", Client: c, Mini: m}
}

// RealRedis connects to the real Redis, failing t if it does not answer.
func RealRedis(t testing.TB) Redis {
	t.Helper()
	addr := Getenv("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379")
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("real Redis at %s (SECKILL_TEST_REDIS_ADDR) unreachable: %v", addr, err)
	}
	return Redis{Name: "real", Client: c}
}

// Unique returns a short random name for keys, locks and databases, so that concurrent test
// runs against a shared server never collide.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Getenv returns the environment variable key, or def when it is unset or empty.
func Getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
