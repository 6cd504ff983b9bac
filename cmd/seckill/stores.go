package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/database"
)

// stores says where the data lives: the configured MySQL and Redis, or embedded ones that
// this process starts and stops.
type stores struct {
	embedded  bool
	redisAddr string
	mysqlDSN  string
	dataDir   string
	mini      *miniredis.Miniredis
	cleanup   func()
}

// openStores starts the embedded Redis and picks the embedded database directory for each
// of them that cfg leaves unset.
func openStores(log *slog.Logger, cfg config) (*stores, error) {
	s := &stores{redisAddr: cfg.redisAddr, mysqlDSN: cfg.mysqlDSN, dataDir: cfg.dataDir, cleanup: func() {}}
	if s.redisAddr == "" {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		s.mini, s.redisAddr, s.embedded = m, m.Addr(), true
		prev := s.cleanup
		s.cleanup = func() { m.Close(); prev() }
	}
	if s.mysqlDSN == "" {
		s.embedded = true
		if s.dataDir == "" {
			dir, err := os.MkdirTemp("", "seckill-")
			if err != nil {
				s.cleanup()
				return nil, fmt.Errorf("embedded database dir: %w", err)
			}
			s.dataDir = dir
			prev := s.cleanup
			s.cleanup = func() { prev(); _ = os.RemoveAll(dir) }
		}
	}
	if s.embedded {
		log.Warn("running on EMBEDDED stores: data lives in this process and is lost when it exits; set SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDR to use MySQL/MariaDB and Redis",
			"redis", describe(cfg.redisAddr == "", "embedded miniredis at "+s.redisAddr, s.redisAddr),
			"database", describe(cfg.mysqlDSN == "", "embedded SQLite in "+s.dataDir, "MySQL"))
	}
	return s, nil
}

func describe(embedded bool, yes, no string) string {
	if embedded {
		return yes
	}
	return no
}

// openDB opens a new connection pool to the database.
func (s *stores) openDB(ctx context.Context, pool database.Pool) (*database.DB, error) {
	if s.mysqlDSN != "" {
		return database.OpenMySQL(ctx, s.mysqlDSN, pool)
	}
	return database.OpenSQLite(ctx, s.dataDir, pool)
}

// openRedis returns a new client (its own pool) to the Redis server.
func (s *stores) openRedis(poolSize int) redis.UniversalClient {
	return redis.NewClient(&redis.Options{Addr: s.redisAddr, PoolSize: poolSize})
}

func (s *stores) close() { s.cleanup() }
