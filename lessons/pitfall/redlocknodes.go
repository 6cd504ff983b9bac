package pitfall

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/loopback"
)

// redlockNodes are the RedLock lesson's five independent Redis servers, started for one run:
// embedded miniredis servers by default, or redis-server processes on unix sockets in a
// temporary directory (Env.RedLockProcesses), each with a directory of its own so that one
// can keep an append-only file. A node can crash (SIGKILL for a process) and start again on
// the same address, empty or, with fsync, with what it had acknowledged.
type redlockNodes struct {
	bin   string
	dir   string
	fsync bool // real nodes run with appendonly yes, appendfsync always

	network string
	addrs   []string
	minis   []*miniredis.Miniredis // embedded: nil while down
	procs   []*redisProc           // real: nil while down
	clock   time.Time              // the embedded servers' clock
}

func startRedLockNodes(ctx context.Context, env Env, n int, fsync bool) (_ *redlockNodes, err error) {
	r := &redlockNodes{fsync: fsync}
	defer func() {
		if err != nil {
			_ = r.close()
		}
	}()
	if !env.RedLockProcesses {
		r.network, r.clock = "tcp", epoch
		for range n {
			m := miniredis.NewMiniRedis()
			// Below the ephemeral port range, so that a node's restart on its own address
			// finds the port free (a node on a kernel-chosen port once failed to restart with
			// "address already in use").
			if err := loopback.Start(m.StartAddr); err != nil {
				return nil, fmt.Errorf("start embedded redis: %w", err)
			}
			m.SetTime(epoch)
			r.minis = append(r.minis, m)
			r.addrs = append(r.addrs, m.Addr())
		}
		return r, nil
	}
	r.network, r.bin = "unix", env.RedisServerBin
	if r.dir, err = os.MkdirTemp("", "seckill-redlock-"); err != nil {
		return nil, err
	}
	r.procs = make([]*redisProc, n)
	for i := range n {
		r.addrs = append(r.addrs, filepath.Join(r.dir, r.name(i)+".sock"))
		if err := r.start(ctx, i, false); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *redlockNodes) name(i int) string { return fmt.Sprintf("node%d", i+1) }

// crash stops node i at once: SIGKILL for a process, nothing flushed that was not already.
func (r *redlockNodes) crash(i int) {
	if r.procs != nil {
		r.procs[i].kill()
		r.procs[i] = nil
		return
	}
	r.minis[i].Close()
}

// start starts node i again on its address. keep says whether it comes back with the keys
// it had acknowledged: an embedded node keeps its data only when asked to (it stands for
// appendfsync always), a process replays its append-only file when it runs with one.
func (r *redlockNodes) start(ctx context.Context, i int, keep bool) error {
	if r.procs == nil {
		if keep {
			return r.minis[i].Restart()
		}
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr(r.addrs[i]); err != nil {
			return fmt.Errorf("restart embedded %s: %w", r.name(i), err)
		}
		m.SetTime(r.clock)
		r.minis[i] = m
		return nil
	}
	dir := filepath.Join(r.dir, r.name(i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var extra []string
	if r.fsync {
		extra = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	extra = append(extra, "--dir", dir)
	p, err := startRedis(ctx, r.bin, r.dir, r.name(i), extra...)
	if err != nil {
		return err
	}
	r.procs[i] = p
	return nil
}

// advance lets d pass on every node: a fast-forward of the embedded servers (a down one
// has nothing to expire), real time for processes, measured on a node's own clock.
func (r *redlockNodes) advance(ctx context.Context, d time.Duration) error {
	if r.procs == nil {
		r.clock = r.clock.Add(d)
		for _, m := range r.minis {
			m.FastForward(d)
			m.SetTime(r.clock)
		}
		return nil
	}
	var up *redisProc
	for _, p := range r.procs {
		if p != nil {
			up = p
			break
		}
	}
	if up == nil {
		return fmt.Errorf("no redlock node is up to measure time on")
	}
	return realServer("unix", up.sock).advance(ctx, d)
}

// exists reports whether node i holds key.
func (r *redlockNodes) exists(ctx context.Context, i int, key string) (bool, error) {
	spy := newSpy(r.network, r.addrs[i])
	defer spy.Close()
	n, err := spy.Exists(ctx, key).Result()
	return n == 1, err
}

func (r *redlockNodes) close() error {
	for _, m := range r.minis {
		if m != nil {
			m.Close()
		}
	}
	for _, p := range r.procs {
		p.kill() // nil for a node that is down
	}
	if r.dir != "" {
		return os.RemoveAll(r.dir)
	}
	return nil
}

// nodeRecorder records an actor's commands to one of RedLock's nodes. RedLock asks its nodes
// in parallel, so the order in which their replies arrive is the scheduler's: the recorder
// holds them back until the actor flushes, which writes them in node order.
type nodeRecorder struct {
	mu    *sync.Mutex
	held  *[]heldCommand
	index int
}

type heldCommand struct {
	node int
	seq  int
	cmd  redis.Cmder
}

func (r *nodeRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *nodeRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && cmd.Err() == nil {
			cmd.SetErr(err)
		}
		if quiet[cmd.Name()] || isNoScript(err) || isNoScript(cmd.Err()) {
			return err
		}
		r.mu.Lock()
		*r.held = append(*r.held, heldCommand{node: r.index, seq: len(*r.held), cmd: cmd})
		r.mu.Unlock()
		return err
	}
}

func (r *nodeRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// redlockActor is one actor's view of the nodes: a client per node and the commands held
// back for the timeline.
type redlockActor struct {
	s       *Scene
	a       *Actor
	clients []*redis.Client
	mu      sync.Mutex
	held    []heldCommand
}

func newRedLockActor(s *Scene, a *Actor, nodes *redlockNodes) *redlockActor {
	ra := &redlockActor{s: s, a: a}
	for i, addr := range nodes.addrs {
		c := redis.NewClient(&redis.Options{
			Network: nodes.network, Addr: addr, DisableIdentity: true, Protocol: 2,
			PoolSize: 2, MaxRetries: -1,
		})
		c.AddHook(&nodeRecorder{mu: &ra.mu, held: &ra.held, index: i})
		ra.clients = append(ra.clients, c)
	}
	return ra
}

// locks returns the actor's RedLocks over the nodes.
func (ra *redlockActor) locks(timeout time.Duration) *lock.RedLocks {
	cs := make([]lock.RedisClient, len(ra.clients))
	for i, c := range ra.clients {
		cs[i] = c
	}
	return lock.NewRedLocks(cs, ra.a.Process, lock.RedLockOptions{NodeTimeout: timeout})
}

// flush writes the held-back commands into the timeline, node by node (recordCommand names
// each acquisition's random value process:tokenN). It returns how many SET NX took.
func (ra *redlockActor) flush() (set int) {
	ra.mu.Lock()
	held := ra.held
	ra.held = nil
	ra.mu.Unlock()
	sort.SliceStable(held, func(i, j int) bool {
		if held[i].node != held[j].node {
			return held[i].node < held[j].node
		}
		return held[i].seq < held[j].seq
	})
	for _, h := range held {
		if b, ok := h.cmd.(*redis.BoolCmd); ok && h.cmd.Name() == "set" && b.Err() == nil && b.Val() {
			set++
		}
		ra.s.recordCommand(fmt.Sprintf("node%d", h.node+1), ra.a.Name, []redis.Cmder{h.cmd})
	}
	return set
}

func (ra *redlockActor) close() {
	for _, c := range ra.clients {
		_ = c.Close()
	}
}

// redlockValue is a lock.RedLock acquisition's value: the process id, "-", 128 random bits.
var redlockValue = regexp.MustCompile(`^(\w+)-[0-9a-f]{32}$`)

// aliasRedLockValue makes the timeline show the random value of a RedLock acquisition that
// cmd sets as process:tokenN, numbered in the order the timeline first shows them.
func (s *Scene) aliasRedLockValue(cmd redis.Cmder) {
	if cmd.Name() != "set" || len(cmd.Args()) < 3 {
		return
	}
	v := fmt.Sprint(cmd.Args()[2])
	m := redlockValue.FindStringSubmatch(v)
	if m == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.aliases {
		if a[0] == v {
			return
		}
	}
	s.tokens++
	s.aliases = append(s.aliases, [2]string{v, fmt.Sprintf("%s:token%d", m[1], s.tokens)})
}
