package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The node-loss test runs the five-node locks against five private redis-server processes
// (never the shared nodes) and stops them one by one: a node that hangs (SIGSTOP: it accepts
// connections and answers nothing), a node that is down (SIGKILL: connections refused), and
// three nodes down (no quorum).

type privateNodes struct {
	dir   string
	addrs []string
	procs []*exec.Cmd
}

func startNodes(ctx context.Context, base int) (*privateNodes, error) {
	dir, err := os.MkdirTemp("", "lockbench-redis-")
	if err != nil {
		return nil, err
	}
	p := &privateNodes{dir: dir}
	for i := range 5 {
		port := base + i
		d := filepath.Join(dir, strconv.Itoa(port))
		if err := os.MkdirAll(d, 0o755); err != nil {
			p.stop()
			return nil, err
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", d, "--logfile", filepath.Join(d, "log"))
		if err := cmd.Start(); err != nil {
			p.stop()
			return nil, fmt.Errorf("redis-server: %w", err)
		}
		p.procs = append(p.procs, cmd)
		p.addrs = append(p.addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	for _, a := range p.addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		var err error
		for range 100 {
			if err = rdb.Ping(ctx).Err(); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = rdb.Close()
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("private redis-server at %s: %w", a, err)
		}
	}
	return p, nil
}

func (p *privateNodes) signal(i int, s syscall.Signal) error { return p.procs[i].Process.Signal(s) }

func (p *privateNodes) stop() {
	for _, c := range p.procs {
		_ = c.Process.Signal(syscall.SIGCONT)
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	_ = os.RemoveAll(p.dir)
}

// nodeLoss is one five-node lock's uncontended pairs/s (1 goroutine) in each state.
type nodeLoss struct {
	name   string
	states []string // "1,234/s", or what went wrong
}

var nodeLossStates = []string{"5 of 5 up", "1 hung (SIGSTOP)", "1 down (SIGKILL)", "3 down"}

func (b bench) nodeLoss(ctx context.Context, cs []contestant, base int) ([]nodeLoss, error) {
	p, err := startNodes(ctx, base)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	e := *b.env
	e.redlockAddrs = p.addrs
	// One instance per lock for the whole test, as in a service whose node dies under it.
	ins := make([]*instance, len(cs))
	results := make([]nodeLoss, len(cs))
	for i, c := range cs {
		results[i].name = c.name
		if ins[i], err = c.setup(ctx, &e); err != nil {
			return nil, err
		}
		defer ins[i].close()
		if err := pairs(ctx, ins[i].acquire, c.keys(&e)+"warm", 20); err != nil {
			return nil, err
		}
	}
	for s := range nodeLossStates {
		switch s {
		case 1:
			err = p.signal(0, syscall.SIGSTOP)
		case 2:
			if err = p.signal(0, syscall.SIGCONT); err == nil {
				err = p.signal(0, syscall.SIGKILL)
			}
		case 3:
			err = errors.Join(p.signal(1, syscall.SIGKILL), p.signal(2, syscall.SIGKILL))
		}
		if err != nil {
			return nil, err
		}
		for i, c := range cs {
			fmt.Fprintf(os.Stderr, "node loss, %s: %s\n", nodeLossStates[s], c.name)
			results[i].states = append(results[i].states, b.pairsFor(ctx, ins[i], c.keys(&e)+"nodeloss"))
		}
	}
	return results, nil
}

// pairsFor counts one goroutine's acquire+release pairs for at least b.duration (a pair
// already begun is finished, within a 10 s bound), and says how it went.
func (b bench) pairsFor(ctx context.Context, in *instance, key string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	var firstErr error
	start := time.Now()
	for time.Since(start) < b.duration && ctx.Err() == nil {
		actx, acancel := context.WithDeadline(ctx, start.Add(b.duration))
		release, err := in.acquire(actx, key)
		acancel()
		if err == nil {
			err = release(ctx)
		}
		if err != nil {
			if firstErr == nil && !errors.Is(err, context.DeadlineExceeded) {
				firstErr = err
			}
			continue
		}
		n++
	}
	el := time.Since(start)
	v := fmt.Sprintf("%.0f pairs/s", float64(n)/el.Seconds())
	if n > 0 {
		v += fmt.Sprintf(" (%v a pair)", round(el/time.Duration(n)))
	} else {
		v = fmt.Sprintf("none in %v", el.Round(100*time.Millisecond))
	}
	if firstErr != nil {
		v += fmt.Sprintf("; error: %.80s", firstErr.Error())
	}
	return v
}
