package pitfall

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// cluster is pitfall 11's topology, started for one run: a primary and a replica, two real
// redis-server processes without persistence, listening on unix sockets in a temporary
// directory (no TCP ports to collide on), the replica linked to the primary through a proxy
// the script controls, so that replication can be held back deterministically.
type cluster struct {
	bin              string
	dir              string
	primary, replica *redisProc
	proxy            *replProxy
	extra            []*redisProc // replicas attached after a failover
	extraProxies     []*replProxy
}

// redisProc is one redis-server process.
type redisProc struct {
	name   string
	sock   string
	cmd    *exec.Cmd
	waited chan error
	spy    *redis.Client
}

func startCluster(ctx context.Context, bin string) (_ *cluster, err error) {
	dir, err := os.MkdirTemp("", "seckill-failover-")
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.primary, err = startRedis(ctx, bin, dir, "primary"); err != nil {
		return nil, err
	}
	if c.replica, c.proxy, err = c.startReplica(ctx, c.primary, "replica"); err != nil {
		return nil, err
	}
	return c, nil
}

// startReplica starts a replica of primary, linked through a new proxy, and waits until it
// is in sync.
func (c *cluster) startReplica(ctx context.Context, primary *redisProc, name string) (*redisProc, *replProxy, error) {
	proxy, err := newReplProxy(primary.sock)
	if err != nil {
		return nil, nil, err
	}
	host, port, _ := net.SplitHostPort(proxy.addr())
	r, err := startRedis(ctx, c.bin, c.dir, name, "--replicaof", host, port)
	if err != nil {
		proxy.close()
		return nil, nil, err
	}
	if err := waitInSync(ctx, primary, r); err != nil {
		r.kill()
		proxy.close()
		return nil, nil, err
	}
	return r, proxy, nil
}

// attachReplica gives the promoted replica a replica of its own, as a failover's
// reconfiguration would.
func (c *cluster) attachReplica(ctx context.Context) error {
	r, proxy, err := c.startReplica(ctx, c.replica, fmt.Sprintf("replica%d", len(c.extra)+2))
	if err != nil {
		return err
	}
	c.extra, c.extraProxies = append(c.extra, r), append(c.extraProxies, proxy)
	return nil
}

func startRedis(ctx context.Context, bin, dir, name string, extra ...string) (*redisProc, error) {
	sock := filepath.Join(dir, name+".sock")
	args := append([]string{
		"--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		"--logfile", filepath.Join(dir, name+".log"),
	}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", bin, name, err)
	}
	p := &redisProc{name: name, sock: sock, cmd: cmd, waited: make(chan error, 1),
		spy: newSpy("unix", sock)}
	go func() { p.waited <- cmd.Wait() }()
	err := poll(ctx, 10*time.Second, func() (bool, error) {
		select {
		case err := <-p.waited:
			p.waited <- err
			return false, fmt.Errorf("redis-server %s exited: %v (log: %s)", name, err, filepath.Join(dir, name+".log"))
		default:
		}
		return p.spy.Ping(ctx).Err() == nil, nil
	})
	if err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// kill ends the process at once (SIGKILL: a crash, nothing flushed, nothing sent).
func (p *redisProc) kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	err := <-p.waited
	p.waited <- err
	_ = p.spy.Close()
}

func (c *cluster) close() {
	for _, r := range c.extra {
		r.kill()
	}
	for _, p := range c.extraProxies {
		p.close()
	}
	if c.replica != nil {
		c.replica.kill()
	}
	if c.primary != nil {
		c.primary.kill()
	}
	if c.proxy != nil {
		c.proxy.close()
	}
	_ = os.RemoveAll(c.dir)
}

// waitInSync waits until the replica's link is up and it has processed everything the
// primary has written.
func waitInSync(ctx context.Context, primary, replica *redisProc) error {
	return poll(ctx, 20*time.Second, func() (bool, error) {
		p, err := replInfo(ctx, primary.spy)
		if err != nil {
			return false, err
		}
		r, err := replInfo(ctx, replica.spy)
		if err != nil {
			return false, err
		}
		return r["master_link_status"] == "up" && r["master_repl_offset"] == p["master_repl_offset"] && p["connected_slaves"] == "1", nil
	})
}

func replInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// replProxy relays the replica's replication connection to the primary. hold cuts the
// primary-to-replica direction: what the primary sends from then on never reaches the
// replica, as if the link had stalled until the primary died.
type replProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	conns []net.Conn
	wg    sync.WaitGroup
}

func newReplProxy(target string) (*replProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &replProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *replProxy) addr() string { return p.ln.Addr().String() }

func (p *replProxy) serve() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", p.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.relay(down, up, false) }()
		go func() { defer p.wg.Done(); p.relay(up, down, true) }()
	}
}

// relay copies from src to dst; toReplica marks the direction that Hold stops.
func (p *replProxy) relay(src, dst net.Conn, toReplica bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			held := toReplica && p.held
			p.mu.Unlock()
			if !held {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// hold stops everything the primary sends to the replica from now on.
func (p *replProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
}

func (p *replProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// promote makes the replica a primary (REPLICAOF NO ONE), as a failover would.
func (c *cluster) promote(ctx context.Context) error {
	if err := c.replica.spy.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promote replica: %w", err)
	}
	return nil
}
