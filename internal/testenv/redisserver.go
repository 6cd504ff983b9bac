package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/loopback"
)

// RedisProcess is a redis-server of one test's own on a port of 127.0.0.1 that loopback reserves, without
// persistence, for tests that must crash or restart a Redis (never the shared one). It is
// killed when the test ends.
type RedisProcess struct {
	Addr string

	t   testing.TB
	bin string
	dir string
	// args is the command line after the binary for a server on port; nil runs a plain
	// server (plainArgs).
	args func(port string) ([]string, error)
	process
}

// RedisServerBin returns the redis-server binary: SECKILL_TEST_REDIS_SERVER_BIN, else the one
// on PATH. It fails t, with how to install one, when there is none.
func RedisServerBin(t testing.TB) string {
	t.Helper()
	if bin := Getenv("SECKILL_TEST_REDIS_SERVER_BIN", ""); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test starts its own redis-server, and there is none on PATH: install it "+
			"(Debian/Ubuntu: apt-get install --no-install-recommends redis-server) or set "+
			"SECKILL_TEST_REDIS_SERVER_BIN (%v)", err)
	}
	return bin
}

// StartRedisServer starts a redis-server for t and waits until it answers.
func StartRedisServer(t testing.TB) *RedisProcess {
	t.Helper()
	return startRedis(t, t.TempDir(), 0, nil)
}

// startRedis starts a redis-server for t in dir, on port first if it is free (0: any port
// loopback reserves), with the command line args gives (nil: a plain server).
func startRedis(t testing.TB, dir string, first int, args func(port string) ([]string, error)) *RedisProcess {
	t.Helper()
	p := &RedisProcess{t: t, bin: RedisServerBin(t), dir: dir, args: args}
	t.Cleanup(p.kill)
	if err := onFreePort(first, func(addr string) error { p.Addr = addr; return p.start() }); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	return p
}

// onFreePort calls start with a 127.0.0.1 address that loopback reserves for this process:
// first's if it is not zero and free, else random ones below the ephemeral range until start
// succeeds. The reservation outlives the server's stops, so a Restart finds its port free:
// no other server of these tests, in this process or another, is placed on it meanwhile, and
// no client socket takes it. start fails when a process that does not reserve ports (a shared
// server, another program) listens there, and the next port is tried.
func onFreePort(first int, start func(addr string) error) error {
	if first != 0 {
		if err := loopback.StartOn(first, start); err == nil {
			return nil
		}
	}
	return loopback.Start(start)
}

// Client returns a new client of the server, closed when t ends.
func (p *RedisProcess) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	p.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart kills the server (SIGKILL: a crash, nothing saved) and starts it again on the same
// address, empty, as a Redis without persistence comes back.
func (p *RedisProcess) Restart() {
	p.t.Helper()
	p.kill()
	if err := p.start(); err != nil {
		p.t.Fatalf("restart redis-server: %v", err)
	}
}

// plainArgs is a server without persistence on port, logging to log in dir.
func plainArgs(dir, port, log string) []string {
	return []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", log}
}

// Log is the server's log file.
func (p *RedisProcess) Log() string {
	_, port, _ := net.SplitHostPort(p.Addr)
	return redisLog(p.dir, port)
}

func redisLog(dir, port string) string { return filepath.Join(dir, "redis-"+port+".log") }

func (p *RedisProcess) start() error {
	_, port, _ := net.SplitHostPort(p.Addr)
	log := p.Log()
	args := plainArgs(p.dir, port, log)
	if p.args != nil {
		var err error
		if args, err = p.args(port); err != nil {
			return err
		}
	}
	cmd := exec.Command(p.bin, args...)
	if err := p.run(cmd); err != nil {
		return err
	}
	// A short read bound: a foreign listener on the port may accept and never answer, and the
	// exit of our server, which could not bind, is seen only between two probes.
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ReadTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case err := <-p.exited():
			p.exited() <- err
			return inUse(fmt.Errorf("redis-server on %s exited: %v (log: %s)", p.Addr, err, log), log)
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("redis-server on %s does not answer: %w (log: %s)", p.Addr, ctx.Err(), log)
		case <-time.After(5 * time.Millisecond):
		}
		// The pid tells our server from another that took the port first.
		if info, err := c.Info(ctx, "server").Result(); err == nil {
			if strings.Contains(info, "\r\nprocess_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
				return nil
			}
			p.kill()
			return fmt.Errorf("%w: another server answers on %s", loopback.ErrInUse, p.Addr)
		}
	}
}

// Kill ends the server with SIGKILL, as a crash: nothing saved, nothing said to its clients
// or replicas. It waits until the process has exited.
func (p *RedisProcess) Kill() { p.kill() }

// Freeze stops the server (SIGSTOP): it keeps its port and accepts connections, but answers
// nothing, as a hung server does. Thaw resumes it.
func (p *RedisProcess) Freeze() { p.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (p *RedisProcess) Thaw() { p.signal(syscall.SIGCONT) }

func (p *RedisProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.process.signal(sig); err != nil {
		p.t.Fatalf("signal redis-server on %s: %v", p.Addr, err)
	}
}
