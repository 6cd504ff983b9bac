package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/seckill/seckill/internal/lock"
)

// etcd: concurrency.Mutex, the lock etcd's own client ships (a key per session under a
// prefix, the lowest create revision holds it, each waiter watches the key just before its
// own), against our EtcdLock, the same recipe with a key per owner under one lease.

func (e *env) etcdClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: e.etcdAddrs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdMutex hands each goroutine a session of its own: concurrency.Mutex's key is the
// prefix plus the session's lease, so two goroutines sharing a session would share the
// lock. Sessions are kept and reused (one per goroutine that holds or waits at a time), as
// a service would keep one per worker; their TTL is the lease.
func etcdMutex(ctx context.Context, e *env) (*instance, error) {
	cli, err := e.etcdClient()
	if err != nil {
		return nil, err
	}
	ttl := max(int(e.lease/time.Second), 1)
	free := make(chan *concurrency.Session, 64)
	get := func() (*concurrency.Session, error) {
		select {
		case s := <-free:
			return s, nil
		default:
			return concurrency.NewSession(cli, concurrency.WithTTL(ttl))
		}
	}
	put := func(s *concurrency.Session) {
		select {
		case free <- s:
		default:
			_ = s.Close()
		}
	}
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		s, err := get()
		if err != nil {
			return nil, err
		}
		m := concurrency.NewMutex(s, e.etcdPrefix+strings.ReplaceAll(key, ":", "/"))
		if err := m.Lock(ctx); err != nil {
			put(s)
			if ctx.Err() != nil {
				return nil, ctx.Err() // gRPC's status error does not wrap it
			}
			return nil, err
		}
		return func(ctx context.Context) error {
			defer put(s)
			return m.Unlock(ctx)
		}, nil
	}, close: func() {
		for {
			select {
			case s := <-free:
				_ = s.Close()
			default:
				_ = cli.Close()
				return
			}
		}
	}}, nil
}

// startEtcd runs a private single-member etcd (Debian's etcd-server) on clientPort and
// clientPort+1, in a directory of its own, and returns its stop.
func startEtcd(ctx context.Context, clientPort int) (addr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "lockbench-etcd-")
	if err != nil {
		return "", nil, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(clientPort+1)
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("etcd", "--name", "lockbench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "lockbench="+peer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("etcd (Debian package etcd-server): %w", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		_ = os.RemoveAll(dir)
	}
	e := &env{etcdAddrs: []string{client}}
	cli, err := e.etcdClient()
	if err == nil {
		defer cli.Close()
		for range 100 {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = cli.Get(cctx, "/")
			cancel()
			if err == nil {
				return client, stop, nil
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop()
	return "", nil, errors.Join(errors.New("private etcd did not answer"), err)
}

// etcdOurs runs our EtcdLock: one client (one lease) per run, as one per process in a
// service; its lease is the run's, in whole seconds, at least etcd's 2 s.
func etcdOurs(ctx context.Context, e *env) (*instance, error) {
	ttl := max(e.lease.Round(time.Second), 2*time.Second)
	ec, err := lock.NewEtcdClient(ctx, e.etcdAddrs, lock.EtcdOptions{LeaseTTL: ttl, Prefix: e.etcdPrefix + "ours"})
	if err != nil {
		return nil, err
	}
	locks := lock.NewEtcdLocks(ec)
	return &instance{acquire: func(ctx context.Context, key string) (func(context.Context) error, error) {
		return acquireWait(ctx, locks.EtcdLock(key), 0)
	}, close: func() { _ = ec.Close() }}, nil
}
