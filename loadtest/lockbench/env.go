package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seckill/seckill/migrations"
)

// env is where the backends are, shared by every contestant of a run (and by the child
// process of the kill test, which gets the same flags).
type env struct {
	redisAddr    string
	redlockAddrs []string
	mysqlDSN     string // server DSN, ending in "/"
	mysqlDB      string // the database the run creates (and drops)
	zkAddrs      []string
	zkRoot       string        // under which every ZooKeeper node of the run lives
	zkSession    time.Duration // ZooKeeper session timeout, ours and the peer's
	etcdAddrs    []string
	etcdPrefix   string        // of every etcd key
	prefix       string        // of every key
	lease        time.Duration // every lock's lease
	killLease    time.Duration // the lease in the kill test
}

// openMySQL opens the run's database with a pool big enough for 32 goroutines that each
// pin a connection (GET_LOCK) and the statements besides.
func (e *env) openMySQL() (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(e.mysqlDSN)
	if err != nil {
		return nil, err
	}
	cfg.DBName = e.mysqlDB
	cfg.ParseTime = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(48)
	db.SetMaxIdleConns(48)
	return db, nil
}

// prepareMySQL creates the run's database and its tables (the service's migrations).
func (e *env) prepareMySQL(ctx context.Context) error {
	server, err := sql.Open("mysql", e.mysqlDSN)
	if err != nil {
		return err
	}
	defer server.Close()
	if _, err := server.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+e.mysqlDB+"`"); err != nil {
		return err
	}
	db, err := e.openMySQL()
	if err != nil {
		return err
	}
	defer db.Close()
	slog.SetLogLoggerLevel(slog.LevelWarn) // goose logs each migration
	_, err = migrations.Up(ctx, db, migrations.MySQL)
	return err
}

func (e *env) dropMySQL(ctx context.Context) error {
	server, err := sql.Open("mysql", e.mysqlDSN)
	if err != nil {
		return err
	}
	defer server.Close()
	_, err = server.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+e.mysqlDB+"`")
	return err
}

// zkConnect opens a ZooKeeper session and waits until it is established.
func (e *env) zkConnect(ctx context.Context) (*zk.Conn, error) {
	conn, events, err := zk.Connect(e.zkAddrs, e.zkSession, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("zookeeper at %v: no session: %w", e.zkAddrs, ctx.Err())
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// removeZK deletes the run's ZooKeeper nodes, children first.
func (e *env) removeZK(ctx context.Context) error {
	conn, err := e.zkConnect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var remove func(p string) error
	remove = func(p string) error {
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, c := range children {
			if err := remove(path.Join(p, c)); err != nil {
				return err
			}
		}
		if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	}
	return remove(e.zkRoot)
}

// roundTrips measures, for each backend family, the median round trip of the cheapest
// request: PING on Redis; PING on all five RedLock nodes in parallel (the slowest of the
// five); SELECT 1 on MySQL; exists("/") on ZooKeeper.
func (e *env) roundTrips(ctx context.Context, families []string) (map[string]time.Duration, error) {
	const n = 1000
	rtts := map[string]time.Duration{}
	median := func(f func() error) (time.Duration, error) {
		for range 50 { // warm up
			if err := f(); err != nil {
				return 0, err
			}
		}
		ds := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		return ds[n/2], nil
	}
	for _, f := range families {
		var d time.Duration
		var err error
		switch f {
		case famRedis:
			rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr})
			d, err = median(func() error { return rdb.Ping(ctx).Err() })
			_ = rdb.Close()
		case famRedLock:
			clients, _, closeAll := e.nodes(e.redlockAddrs)
			d, err = median(func() error {
				var wg sync.WaitGroup
				errs := make([]error, len(clients))
				for i, c := range clients {
					wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
				}
				wg.Wait()
				return errors.Join(errs...)
			})
			closeAll()
		case famMySQL:
			var db *sql.DB
			if db, err = e.openMySQL(); err == nil {
				db.SetMaxOpenConns(1)
				d, err = median(func() error { return db.QueryRowContext(ctx, "SELECT 1").Scan(new(int)) })
				_ = db.Close()
			}
		case famEtcd:
			var cli *clientv3.Client
			if cli, err = e.etcdClient(); err == nil {
				d, err = median(func() error { _, err := cli.Get(ctx, e.etcdPrefix+"ping"); return err })
				_ = cli.Close()
			}
		case famZK:
			var conn *zk.Conn
			if conn, err = e.zkConnect(ctx); err == nil {
				d, err = median(func() error { _, _, err := conn.Exists("/"); return err })
				conn.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rtts[f] = d
	}
	return rtts, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
